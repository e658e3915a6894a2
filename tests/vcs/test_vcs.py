"""specflux.vcs against real temporary git repositories."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import git

import specflux
from specflux.base.errors import GitError, IdentityError
from specflux.vcs.git import Git
from specflux.vcs.status import changed_paths

TRAILERS = {"Specflux-Task": "101", "Specflux-Session": "3", "Specflux-Status": "in_progress"}
NAME_HINT = 'git config --global user.name "Your Name"'
EMAIL_HINT = 'git config --global user.email "you@example.com"'


# ---------------------------------------------------------------- helpers


@pytest.fixture
def repo(git_repo: Path) -> Git:
    """A Git over the conftest repository, with a few more tracked files."""
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (git_repo / name).write_text(f"{name} v1\n")
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "more files")
    found = Git.find(git_repo)
    assert found is not None
    return found


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def files_in(root: Path, rev: str = "HEAD") -> set[str]:
    """Paths a commit touched."""
    return set(git(root, "show", "--name-only", "--format=", rev).split())


def status(root: Path, without: set[str] = frozenset()) -> dict[str, str]:
    """path -> two-letter porcelain status, leaving out `without`."""
    out = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all").split("\0")
    entries = {e[3:]: e[:2] for e in out if e}
    return {p: s for p, s in entries.items() if p not in without}


def diffs(root: Path, *paths: str) -> tuple[str, str]:
    """(staged diff, unstaged diff) of `paths`: exact content, not just status letters."""
    return git(root, "diff", "--cached", "--", *paths), git(root, "diff", "--", *paths)


# ---------------------------------------------------------------- commit: exactly the given paths


def test_commit_takes_only_given_paths_and_leaves_staged_and_unstaged_work_alone(repo: Git):
    root = repo.root
    (root / "b.txt").write_text("b staged\n")
    git(root, "add", "b.txt")
    (root / "c.txt").write_text("c unstaged\n")
    (root / "d.txt").write_text("d staged\n")
    git(root, "add", "d.txt")
    (root / "d.txt").write_text("d staged then changed again\n")
    (root / "untracked.txt").write_text("leave me\n")
    (root / "a.txt").write_text("a for the session\n")
    (root / "new.md").write_text("new task\n")
    others_before = status(root, without={"a.txt", "new.md"})
    diffs_before = diffs(root, "b.txt", "c.txt", "d.txt")

    sha = repo.commit([root / "a.txt", Path("new.md")], "task 101: session 3", TRAILERS)

    assert sha == head(root)
    assert files_in(root) == {"a.txt", "new.md"}
    assert git(root, "show", "HEAD:a.txt") == "a for the session\n"
    assert status(root, without={"a.txt", "new.md"}) == others_before
    assert others_before == {"b.txt": "M ", "c.txt": " M", "d.txt": "MM", "untracked.txt": "??"}
    assert diffs(root, "b.txt", "c.txt", "d.txt") == diffs_before
    assert "a.txt" not in status(root) and "new.md" not in status(root)


def test_commit_new_file_in_new_folder(repo: Git):
    (repo.root / "tasks" / "active").mkdir(parents=True)
    (repo.root / "tasks" / "active" / "101.md").write_text("# 101\n")
    (repo.root / "tasks" / "active" / "102.md").write_text("# 102\n")

    assert repo.commit([Path("tasks/active/101.md")], "add 101", {})

    assert files_in(repo.root) == {"tasks/active/101.md"}
    assert status(repo.root) == {"tasks/active/102.md": "??"}


@pytest.mark.parametrize("new", [False, True])
def test_commit_of_paths_known_new_adds_them_first_and_commits_the_same(repo: Git, new: bool, tmp_path, monkeypatch):
    """`new=True` (a run's first history commit): `git add` then one commit, not a commit that
    fails on the new paths first; the same commit either way, and right for a tracked path too."""
    (repo.root / "tracked.txt").write_text("one\n")
    repo.commit(["tracked.txt"], "tracked", {})
    (repo.root / "tracked.txt").write_text("two\n")
    (repo.root / "runs").mkdir()
    (repo.root / "runs" / "events.jsonl").write_text("{}\n")
    (repo.root / "other.txt").write_text("the user's\n")
    trace = tmp_path / "trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))

    assert repo.commit(["runs/events.jsonl", "tracked.txt"], "history", {}, new=new)

    monkeypatch.delenv("GIT_TRACE")
    calls = re.findall(r"trace: built-in: git (?:-c \S+ )*(\S+)", trace.read_text())
    assert [c for c in calls if c in ("add", "commit")] == (["add", "commit"] if new else ["commit", "add", "commit"]), calls
    assert files_in(repo.root) == {"tracked.txt", "runs/events.jsonl"}
    assert status(repo.root) == {"other.txt": "??"}


def test_commit_deleted_file(repo: Git):
    (repo.root / "a.txt").unlink()
    (repo.root / "b.txt").write_text("still modified\n")

    assert repo.commit(["a.txt"], "drop a", {})

    assert files_in(repo.root) == {"a.txt"}
    assert "a.txt" not in git(repo.root, "ls-tree", "--name-only", "HEAD").split()
    assert status(repo.root) == {"b.txt": " M"}


def test_commit_mixes_changed_new_and_user_removed_paths(repo: Git):
    (repo.root / "a.txt").write_text("changed\n")
    git(repo.root, "rm", "-q", "b.txt")  # removed by the user: in HEAD, not in the index
    (repo.root / "new.txt").write_text("new\n")

    assert repo.commit(["a.txt", "b.txt", "new.txt"], "mixed", {})

    assert files_in(repo.root) == {"a.txt", "b.txt", "new.txt"}
    assert status(repo.root) == {}


def test_commit_of_unchanged_paths_returns_empty_and_makes_no_commit(repo: Git):
    (repo.root / "b.txt").write_text("staged elsewhere\n")
    git(repo.root, "add", "b.txt")
    before = head(repo.root)

    assert repo.commit(["a.txt", "README.md"], "nothing", TRAILERS) == ""

    assert head(repo.root) == before
    assert status(repo.root) == {"b.txt": "M "}


def test_commit_path_with_glob_characters_is_taken_literally(repo: Git):
    (repo.root / "stxr.md").write_text("tracked\n")
    git(repo.root, "add", "stxr.md")
    git(repo.root, "commit", "-q", "-m", "stxr")
    (repo.root / "stxr.md").write_text("modified, and matched by the glob st*r.md\n")
    (repo.root / "st*r.md").write_text("new, with a literal star\n")

    assert repo.commit(["st*r.md"], "literal path", {})

    assert files_in(repo.root) == {"st*r.md"}
    assert status(repo.root) == {"stxr.md": " M"}


def test_commit_outside_the_work_tree_is_refused(repo: Git, tmp_path: Path):
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x\n")
    with pytest.raises(GitError, match="outside the git work tree"):
        repo.commit([outside], "nope", {})
    with pytest.raises(GitError, match="outside the git work tree"):
        repo.commit(["../elsewhere.txt"], "nope", {})


def test_commit_of_a_missing_unknown_path_fails_and_unstages_the_new_ones(repo: Git):
    (repo.root / "new.txt").write_text("new\n")
    before = status(repo.root)

    with pytest.raises(GitError, match="never-existed.txt"):
        repo.commit(["new.txt", "never-existed.txt"], "bad", {})

    assert status(repo.root) == before == {"new.txt": "??"}


def test_commit_of_an_ignored_new_file_says_so_and_stages_nothing(repo: Git):
    (repo.root / ".gitignore").write_text("*.log\n")
    (repo.root / "run.log").write_text("noise\n")
    before = status(repo.root)

    with pytest.raises(GitError, match="ignored"):
        repo.commit(["run.log"], "log", {})

    assert status(repo.root) == before


# ---------------------------------------------------------------- the message and trailers


def test_trailers_are_readable_by_history_and_by_git(repo: Git):
    (repo.root / "a.txt").write_text("session work\n")

    sha = repo.commit(["a.txt"], "task 101: session 3", TRAILERS, body="Did the thing.\n")

    message = git(repo.root, "log", "-1", "--format=%B")
    assert message == (
        "task 101: session 3\n\nDid the thing.\n\n"
        "Specflux-Task: 101\nSpecflux-Session: 3\nSpecflux-Status: in_progress\n\n"
    )
    key_fmt = "--format=%(trailers:key=Specflux-Task,valueonly)"
    assert git(repo.root, "log", "-1", key_fmt).strip() == "101"
    [latest, *_] = repo.history(["a.txt"])
    assert (latest.sha, latest.subject, latest.trailers) == (sha, "task 101: session 3", TRAILERS)
    assert sha.startswith(latest.short)
    assert latest.date == git(repo.root, "log", "-1", "--format=%aI").strip()


def test_trailers_without_body(repo: Git):
    (repo.root / "a.txt").write_text("x\n")
    repo.commit(["a.txt"], "short", {"Specflux-Task": "7"})
    assert git(repo.root, "log", "-1", "--format=%B") == "short\n\nSpecflux-Task: 7\n\n"
    assert repo.history(["a.txt"])[0].trailers == {"Specflux-Task": "7"}


@pytest.mark.parametrize(
    "subject, trailers",
    [("", {}), ("two\nlines", {}), ("ok", {"Bad Key": "1"}), ("ok", {"Key": "a\nb"})],
)
def test_bad_subject_or_trailer_is_refused_before_git_runs(repo: Git, subject, trailers):
    (repo.root / "a.txt").write_text("x\n")
    before = head(repo.root)
    with pytest.raises(ValueError):
        repo.commit(["a.txt"], subject, trailers)
    assert head(repo.root) == before


# ---------------------------------------------------------------- history and find_commits


def test_history_is_newest_first_and_only_for_the_given_paths(repo: Git):
    shas = []
    for name, text in (("a.txt", "1\n"), ("b.txt", "2\n"), ("a.txt", "3\n")):
        (repo.root / name).write_text(text)
        shas.append(repo.commit([name], f"edit {name} {text.strip()}", {}))

    assert [c.sha for c in repo.history(["a.txt"])][:2] == [shas[2], shas[0]]
    assert len(repo.history(["a.txt"])) == 3  # plus the fixture's commit that added it
    assert [c.sha for c in repo.history(["a.txt", "b.txt"])][:3] == shas[::-1]
    assert repo.history(["c.txt"])[0].subject == "more files"
    assert repo.history([]) == []


def test_history_and_find_commits_in_a_repository_without_commits(tmp_path: Path):
    git(tmp_path, "init", "-q", "-b", "main")
    empty = Git.find(tmp_path)
    assert empty is not None
    assert empty.history(["anything.md"]) == []
    assert empty.find_commits({"Specflux-Task": "1"}) == []


def test_find_commits_matches_every_given_trailer_exactly(repo: Git):
    made = {}
    for task, session in (("101", "1"), ("1010", "1"), ("101", "2"), ("11", "2")):
        (repo.root / "a.txt").write_text(f"{task} {session}\n")
        made[task, session] = repo.commit(
            ["a.txt"], f"t{task}", {"Specflux-Task": task, "Specflux-Session": session}
        )

    found = repo.find_commits({"Specflux-Task": "101"})
    assert [c.sha for c in found] == [made["101", "2"], made["101", "1"]]
    both = repo.find_commits({"Specflux-Task": "101", "Specflux-Session": "2"})
    assert [c.sha for c in both] == [made["101", "2"]]
    assert repo.find_commits({"Specflux-Task": "999"}) == []


# ---------------------------------------------------------------- find


def test_find_from_a_subfolder_a_file_and_a_path_not_yet_made(repo: Git):
    (repo.root / "sub" / "deeper").mkdir(parents=True)
    root = repo.root.resolve()
    for start in ("sub/deeper", "a.txt", "sub/not/yet.md"):
        found = Git.find(repo.root / start)
        assert found is not None and found.root.resolve() == root


def test_find_outside_a_repository_is_none(tmp_path: Path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert Git.find(plain) is None
    assert Git.find(plain / "file.md") is None


def test_find_without_git_installed_is_none(git_repo: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-binaries-here"))
    assert Git.find(git_repo) is None


# ---------------------------------------------------------------- the user's config is honoured


@pytest.fixture
def no_identity(repo: Git, tmp_path: Path, monkeypatch) -> Git:
    """The repo as a fresh machine sees it: no user.name/email anywhere git looks."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("AUTHOR", "COMMITTER"):
        for part in ("NAME", "EMAIL", "DATE"):
            monkeypatch.delenv(f"GIT_{name}_{part}", raising=False)
    monkeypatch.delenv("EMAIL", raising=False)
    git(repo.root, "config", "--unset", "user.name")
    git(repo.root, "config", "--unset", "user.email")
    return repo


@pytest.mark.parametrize("config_only", [True, False], ids=["useConfigOnly", "default"])
def test_no_identity_raises_naming_the_commands_and_leaves_git_as_it_was(no_identity, config_only):
    root = no_identity.root
    guess = subprocess.run(["git", "var", "GIT_AUTHOR_IDENT"], cwd=root, capture_output=True)
    if config_only:  # git then never guesses an identity, whatever this host is called
        git(root, "config", "user.useConfigOnly", "true")
    elif guess.returncode == 0:
        pytest.skip("this host gives git a usable guessed identity (user@fqdn)")
    (root / "a.txt").write_text("changed\n")
    (root / "b.txt").write_text("staged\n")
    subprocess.run(["git", "add", "b.txt"], cwd=root, check=True)
    (root / "new.md").write_text("new\n")
    before, before_head = status(root), head(root)

    with pytest.raises(IdentityError) as raised:
        no_identity.commit(["a.txt", "new.md"], "task", TRAILERS)

    assert NAME_HINT in str(raised.value) and EMAIL_HINT in str(raised.value)
    assert status(root) == before == {"a.txt": " M", "b.txt": "M ", "new.md": "??"}
    assert head(root) == before_head


def test_failing_pre_commit_hook_raises_with_its_output_and_unstages_new_paths(repo: Git):
    hook = repo.root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'lint says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    (repo.root / "a.txt").write_text("changed\n")
    (repo.root / "new.md").write_text("new\n")
    before, before_head = status(repo.root), head(repo.root)

    with pytest.raises(GitError, match="lint says no") as raised:
        repo.commit(["a.txt", "new.md"], "task", {})

    assert not isinstance(raised.value, IdentityError)
    assert status(repo.root) == before and head(repo.root) == before_head


def test_commit_gpgsign_is_honoured_not_bypassed(repo: Git):
    git(repo.root, "config", "commit.gpgsign", "true")
    git(repo.root, "config", "gpg.program", "false")  # a signer that always fails
    (repo.root / "a.txt").write_text("changed\n")
    before = head(repo.root)

    with pytest.raises(GitError, match="gpg"):
        repo.commit(["a.txt"], "signed?", {})

    assert head(repo.root) == before


# ---------------------------------------------------------------- concurrency


def test_commit_waits_for_a_held_index_lock(repo: Git):
    lock = repo.root / ".git" / "index.lock"
    lock.write_text("")
    (repo.root / "a.txt").write_text("after the lock\n")
    started = time.monotonic()  # before the timer starts: the lock is held at least 0.5 s from here
    threading.Timer(0.5, lock.unlink).start()

    assert repo.commit(["a.txt"], "waited", {})

    assert time.monotonic() - started >= 0.4
    assert files_in(repo.root) == {"a.txt"}


def test_a_lock_that_is_never_released_fails_after_busy_wait(repo: Git):
    (repo.root / ".git" / "index.lock").write_text("")
    (repo.root / "a.txt").write_text("x\n")
    impatient = Git(repo.root, busy_wait=0.3)
    with pytest.raises(GitError, match="index.lock"):
        impatient.commit(["a.txt"], "blocked", {})


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from specflux.vcs.git import Git
    root, name, start_at = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    repo = Git(root)
    while time.time() < start_at:
        pass
    for i in range(10):
        (root / name).write_text(f"{name} {i}\\n")
        assert repo.commit([name], f"{name} {i}", {"Specflux-Task": name}), "no commit made"
    """
)


def test_two_processes_committing_at_once_both_land(repo: Git):
    env = {**os.environ, "PYTHONPATH": str(Path(specflux.__file__).parent.parent)}
    start_at = str(time.time() + 1.5)  # both start their loops at the same instant
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(repo.root), name, start_at],
            env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        for name in ("one.md", "two.md")
    ]
    errors = [w.communicate(timeout=60)[1] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], errors

    log = git(repo.root, "log", "-20", "--format=%x1e%s", "--name-only").split("\x1e")[1:]
    commits = [entry.split() for entry in log]  # [name, i, touched path]
    assert len(commits) == 20
    assert all(subject_name == path for subject_name, _, path in commits)
    for name in ("one.md", "two.md"):
        assert sorted(int(i) for n, i, _ in commits if n == name) == list(range(10))
        assert len(repo.find_commits({"Specflux-Task": name})) == 10
    assert status(repo.root) == {}


# ---------------------------------------------------------------- status_snapshot


def test_status_snapshot_sees_modified_new_deleted_and_renamed_paths(repo: Git):
    assert repo.status_snapshot() == {}
    (repo.root / "a.txt").write_text("modified\n")
    (repo.root / "fresh" / "nested").mkdir(parents=True)
    (repo.root / "fresh" / "nested" / "n.md").write_text("new\n")
    (repo.root / "c.txt").unlink()
    git(repo.root, "mv", "d.txt", "d-renamed.txt")

    snap = repo.status_snapshot()

    assert set(snap) == {"a.txt", "fresh/nested/n.md", "c.txt", "d.txt", "d-renamed.txt"}
    assert snap["c.txt"] == snap["d.txt"] == "deleted"
    assert snap["a.txt"] != snap["fresh/nested/n.md"]


def test_status_snapshot_fingerprints_follow_content(repo: Git):
    (repo.root / "a.txt").write_text("first\n")
    (repo.root / "new.md").write_text("one\n")
    before = repo.status_snapshot()

    (repo.root / "a.txt").write_text("second\n")  # modified again: still " M", new content
    (repo.root / "b.txt").write_text("b.txt v1\n")  # rewritten with the same bytes: no change
    (repo.root / "new.md").chmod(0o755)
    after = repo.status_snapshot()

    assert before["a.txt"] != after["a.txt"]
    assert changed_paths(before, after) == ["a.txt", "new.md"]
    (repo.root / "a.txt").write_text("a.txt v1\n")  # back to HEAD: leaves the status
    assert changed_paths(after, repo.status_snapshot()) == ["a.txt"]
