"""specflux.vcs in the git states that could lose work, against real repositories.

A merge, rebase, am, cherry-pick, revert or bisect in progress: nothing is committed. A detached
HEAD: a warning. An agent session on a dirty tree: the commit holds the session's changes only,
the work tree and the user's index stay as they were.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import GIT_ENV, git

import specflux.vcs.session_commit as vcs
from specflux.base.errors import GitError
from specflux.vcs.git import Git

NO_EDITOR = {"GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true"}


# ---------------------------------------------------------------- helpers


def git_fails(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run git where it is expected to stop (a conflict): return the result, assert it failed."""
    env = {**os.environ, **GIT_ENV, **NO_EDITOR}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode != 0, f"git {' '.join(args)} was expected to stop: {done.stdout}"
    return done


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def commit_file(root: Path, name: str, text: str, message: str) -> str:
    (root / name).write_text(text)
    git(root, "add", name)
    git(root, "commit", "-q", "-m", message)
    return head(root)


def files_in(root: Path, rev: str = "HEAD") -> set[str]:
    """Paths a commit touched."""
    out = git(root, "show", "-z", "--name-only", "--format=", rev)
    return {p for p in out.strip("\n").split("\0") if p}


def status(root: Path) -> dict[str, str]:
    out = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all").split("\0")
    return {e[3:]: e[:2] for e in out if e}


def tree_bytes(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under `root` but .git: (bytes or link target, mode)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = Path(dirpath) / name
            info = full.lstat()
            data = os.readlink(full).encode() if full.is_symlink() else full.read_bytes()
            out[full.relative_to(root).as_posix()] = (data, info.st_mode)
    return out


def unindexed(diff: str) -> str:
    """A diff without its `index <sha>..<sha>` lines (blob names change with HEAD)."""
    return "".join(line for line in diff.splitlines(True) if not line.startswith("index "))


def lines(n: int, tag: str = "line") -> str:
    return "".join(f"{tag} {i}\n" for i in range(1, n + 1))


@pytest.fixture
def repo(git_repo: Path) -> Git:
    found = Git.find(git_repo)
    assert found is not None
    return found


def conflicting_branches(root: Path) -> None:
    """`topic` and `main` each change f.txt's only line differently."""
    commit_file(root, "f.txt", "base\n", "base")
    git(root, "checkout", "-q", "-b", "topic")
    commit_file(root, "f.txt", "topic\n", "topic")
    git(root, "checkout", "-q", "main")
    commit_file(root, "f.txt", "main\n", "main")


def assert_refused(repo: Git, operation: str, finish: str, abort: str) -> None:
    """Every way in refuses, naming the operation and the way out, and nothing changes."""
    root = repo.root
    (root / "work.md").write_text("the session's work\n")
    before_head, before_status = head(root), status(root)
    sentence = (
        f"{operation} is in progress in {root}: finish it ({finish}) or abort it ({abort}) "
        "before specflux commits; nothing was changed"
    )

    assert repo.operation_in_progress() == operation
    with pytest.raises(GitError) as raised:
        repo.check_can_commit()
    assert str(raised.value) == sentence
    with pytest.raises(GitError, match=f"^{operation} is in progress"):
        repo.commit(["work.md"], "session", {})
    baseline = repo.capture()
    with pytest.raises(GitError, match=f"^{operation} is in progress"):
        repo.commit_session(baseline, None, "session", {})

    assert head(root) == before_head
    assert status(root) == before_status


# ---------------------------------------------------------------- operations in progress


@pytest.mark.parametrize("backend", ["--merge", "--apply"])
def test_a_rebase_stopped_on_a_conflict_is_refused(repo: Git, backend: str):
    root = repo.root
    conflicting_branches(root)
    git(root, "checkout", "-q", "topic")
    git_fails(root, "rebase", backend, "main")
    assert (root / ".git" / ("rebase-merge" if backend == "--merge" else "rebase-apply")).is_dir()

    assert_refused(repo, "a rebase", "git rebase --continue", "git rebase --abort")

    git(root, "rebase", "--abort")
    assert repo.operation_in_progress() is None
    assert repo.check_can_commit() == []
    assert repo.commit(["work.md"], "after the rebase", {})


def test_an_interactive_rebase_stopped_to_edit_is_refused(repo: Git):
    root = repo.root
    commit_file(root, "f.txt", "one\n", "one")
    commit_file(root, "f.txt", "two\n", "two")
    env = {"GIT_SEQUENCE_EDITOR": "sed -i -e 's/^pick/edit/'"}
    git(root, "rebase", "-i", "HEAD~1", env=env)  # stops, cleanly, at the commit to edit

    assert_refused(repo, "a rebase", "git rebase --continue", "git rebase --abort")


def test_a_merge_with_a_conflict_is_refused(repo: Git):
    root = repo.root
    conflicting_branches(root)
    git_fails(root, "merge", "topic")

    assert_refused(repo, "a merge", "git merge --continue", "git merge --abort")

    git(root, "merge", "--abort")
    assert repo.check_can_commit() == []


def test_a_merge_stopped_before_its_commit_is_refused(repo: Git):
    root = repo.root
    commit_file(root, "f.txt", "base\n", "base")
    git(root, "checkout", "-q", "-b", "topic")
    commit_file(root, "g.txt", "topic\n", "topic")
    git(root, "checkout", "-q", "main")
    commit_file(root, "h.txt", "main\n", "main")
    git(root, "merge", "--no-commit", "--no-ff", "topic")  # no conflict, but MERGE_HEAD is set

    assert_refused(repo, "a merge", "git merge --continue", "git merge --abort")


def test_a_cherry_pick_with_a_conflict_is_refused(repo: Git):
    root = repo.root
    conflicting_branches(root)
    git_fails(root, "cherry-pick", "topic")

    assert_refused(repo, "a cherry-pick", "git cherry-pick --continue", "git cherry-pick --abort")


def test_a_cherry_pick_sequence_between_two_picks_is_refused(repo: Git):
    """After the first conflict is resolved and committed, only .git/sequencer/ says so."""
    root = repo.root
    conflicting_branches(root)
    git(root, "checkout", "-q", "topic")
    commit_file(root, "other.txt", "other\n", "second pick")
    git(root, "checkout", "-q", "main")
    git_fails(root, "cherry-pick", "topic~1", "topic")
    (root / "f.txt").write_text("resolved\n")
    git(root, "add", "f.txt")
    git(root, "commit", "-q", "--no-edit")
    assert not (root / ".git" / "CHERRY_PICK_HEAD").exists()

    assert_refused(repo, "a cherry-pick", "git cherry-pick --continue", "git cherry-pick --abort")


def test_a_revert_with_a_conflict_is_refused(repo: Git):
    root = repo.root
    commit_file(root, "f.txt", "one\n", "one")
    commit_file(root, "f.txt", "two\n", "two")
    commit_file(root, "f.txt", "three\n", "three")
    git_fails(root, "revert", "--no-edit", "HEAD~1")

    assert_refused(repo, "a revert", "git revert --continue", "git revert --abort")


def test_a_revert_sequence_between_two_reverts_is_refused(repo: Git):
    root = repo.root
    commit_file(root, "f.txt", "one\n", "one")
    commit_file(root, "f.txt", "two\n", "two")
    commit_file(root, "g.txt", "g\n", "g")
    commit_file(root, "f.txt", "three\n", "three")
    git_fails(root, "revert", "--no-edit", "HEAD~2", "HEAD~1")  # the first one conflicts
    (root / "f.txt").write_text("resolved\n")
    git(root, "add", "f.txt")
    git(root, "commit", "-q", "--no-edit", env=NO_EDITOR)
    assert not (root / ".git" / "REVERT_HEAD").exists()

    assert_refused(repo, "a revert", "git revert --continue", "git revert --abort")


def test_an_am_stopped_on_a_patch_that_does_not_apply_is_refused(repo: Git, tmp_path: Path):
    root = repo.root
    commit_file(root, "f.txt", "base\n", "base")
    commit_file(root, "f.txt", "patched\n", "the patch")
    patch = git(root, "format-patch", "-1", "--stdout")
    git(root, "reset", "-q", "--hard", "HEAD~1")
    commit_file(root, "f.txt", "diverged\n", "diverged")
    (tmp_path / "0001.patch").write_text(patch)
    git_fails(root, "am", str(tmp_path / "0001.patch"))

    assert_refused(repo, "an am", "git am --continue", "git am --abort")


def test_a_bisect_is_refused(repo: Git):
    root = repo.root
    good = head(root)
    for n in range(3):
        commit_file(root, "f.txt", f"{n}\n", f"step {n}")
    git(root, "bisect", "start", "HEAD", good)
    (root / "work.md").write_text("x\n")

    assert repo.operation_in_progress() == "a bisect"
    with pytest.raises(GitError) as raised:
        repo.check_can_commit()
    assert str(raised.value) == (
        f"a bisect is in progress in {root}: end it (git bisect reset) before specflux commits; "
        "nothing was changed"
    )
    with pytest.raises(GitError, match="^a bisect"):
        repo.commit(["work.md"], "session", {})

    git(root, "bisect", "reset")
    assert repo.operation_in_progress() is None


def test_an_operation_in_a_linked_worktree_is_that_worktrees_own(repo: Git, tmp_path: Path):
    root = repo.root
    conflicting_branches(root)
    other = tmp_path / "other"
    git(root, "worktree", "add", "-q", "-b", "side", str(other), "main")
    linked = Git.find(other)
    assert linked is not None
    git_fails(other, "merge", "topic")

    assert linked.operation_in_progress() == "a merge"
    assert repo.operation_in_progress() is None
    with pytest.raises(GitError, match=f"a merge is in progress in {other}"):
        linked.check_can_commit()
    assert repo.check_can_commit() == []


# ---------------------------------------------------------------- detached HEAD


def test_a_detached_head_is_a_warning_not_a_refusal(repo: Git):
    root = repo.root
    assert repo.check_can_commit() == []
    sha = head(root)
    git(root, "checkout", "-q", "--detach")

    warnings = repo.check_can_commit()

    assert warnings == [f"HEAD is detached at {sha[:7]}: the commit will not be on any branch"]
    (root / "work.md").write_text("x\n")
    assert repo.commit(["work.md"], "on a detached HEAD", {})


def test_an_unborn_branch_is_no_warning(tmp_path: Path):
    git(tmp_path, "init", "-q", "-b", "main")
    empty = Git.find(tmp_path)
    assert empty is not None
    assert empty.check_can_commit() == []
    assert empty.operation_in_progress() is None


# ---------------------------------------------------------------- session commits on a dirty tree


@pytest.fixture
def project(repo: Git) -> Git:
    """A.txt (30 lines), B.txt, D.txt and E.txt committed."""
    root = repo.root
    (root / "A.txt").write_text(lines(30))
    for name in ("B.txt", "D.txt", "E.txt"):
        (root / name).write_text(f"{name}\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "project")
    return repo


def edit_line(path: Path, number: int, text: str) -> None:
    """Replace line `number` by `text`, keeping the line's own ending (LF or CRLF)."""
    content = path.read_bytes().splitlines(True)
    ending = content[number - 1][len(content[number - 1].rstrip(b"\r\n")):]
    content[number - 1] = text.encode() + ending
    path.write_bytes(b"".join(content))


def test_a_session_on_a_dirty_tree_commits_only_the_sessions_changes(project: Git):
    root = project.root
    old_head = head(root)
    # the user's own work, before the session
    edit_line(root / "A.txt", 2, "the user's line 2")
    (root / "B.txt").write_text("B staged by the user\n")
    git(root, "add", "B.txt")
    (root / "mine.txt").write_text("the user's untracked notes\n")
    user_diff = git(root, "diff", "--", "A.txt")
    staged_before = git(root, "diff", "--cached")
    index_before = git(root, "ls-files", "-s")

    baseline = project.capture()
    # the session
    edit_line(root / "A.txt", 28, "the agent's line 28")
    (root / "C.txt").write_text("created by the agent\n")
    (root / "D.txt").unlink()
    tree_before = tree_bytes(root)

    done = project.commit_session(baseline, None, "task 7: session 1", {"Specflux-Task": "7"})

    assert done.sha == head(root) and git(root, "rev-parse", "HEAD~1").strip() == old_head
    assert files_in(root) == {"A.txt", "C.txt", "D.txt"}
    expected_a = lines(30).replace("line 28\n", "the agent's line 28\n")
    assert git(root, "show", "HEAD:A.txt") == expected_a
    assert git(root, "show", "HEAD:C.txt") == "created by the agent\n"
    assert "D.txt" not in git(root, "ls-tree", "--name-only", "HEAD").split()
    assert git(root, "show", "HEAD:B.txt") == "B.txt\n"
    assert done.paths == ["A.txt", "C.txt", "D.txt"]
    assert done.partly == ["A.txt"] and done.left_out == []
    assert done.notes == [
        "A.txt: you had uncommitted changes there too; only the session's part of the change is "
        "committed, and your own edits are still uncommitted"
    ]
    # the work tree is byte for byte as it was; the user's index holds only what the user staged
    assert tree_bytes(root) == tree_before
    assert git(root, "diff", "--cached") == staged_before
    assert unindexed(git(root, "diff")) == unindexed(user_diff)
    assert status(root) == {"A.txt": " M", "B.txt": "M ", "mine.txt": "??"}
    index_after = git(root, "ls-files", "-s")
    assert [ln for ln in index_after.splitlines() if "B.txt" in ln] == [
        ln for ln in index_before.splitlines() if "B.txt" in ln
    ]
    assert git(root, "log", "-1", "--format=%(trailers:key=Specflux-Task,valueonly)").strip() == "7"


def test_overlapping_edits_leave_the_file_out_with_a_note(project: Git):
    root = project.root
    edit_line(root / "A.txt", 10, "the user's line 10")
    user_diff = git(root, "diff", "--", "A.txt")
    baseline = project.capture()
    edit_line(root / "A.txt", 10, "the agent's line 10")  # the same line: a conflict
    (root / "C.txt").write_text("new\n")
    tree_before = tree_bytes(root)

    done = project.commit_session(baseline, None, "session", {})

    assert files_in(root) == {"C.txt"}
    assert git(root, "show", "HEAD:A.txt") == lines(30)
    assert done.left_out == ["A.txt"] and done.partly == []
    assert done.notes == [
        "A.txt: you had uncommitted changes there too; left out of the commit so that your work "
        "stays yours — review and commit it yourself"
    ]
    assert tree_bytes(root) == tree_before
    assert status(root) == {"A.txt": " M"}
    assert git(root, "diff", "--cached") == ""
    assert git(root, "diff", "--", "A.txt") != user_diff  # the agent's edit is there, uncommitted


def test_a_file_untracked_before_the_session_is_left_out_with_a_note(project: Git):
    root = project.root
    (root / "draft.md").write_text("the user's draft\n")
    (root / "other.md").write_text("untouched by the session\n")
    baseline = project.capture()
    (root / "draft.md").write_text("the user's draft\nand the agent's addition\n")
    (root / "E.txt").write_text("E changed by the agent\n")

    done = project.commit_session(baseline, None, "session", {})

    assert files_in(root) == {"E.txt"}
    assert done.left_out == ["draft.md"]
    assert done.notes == [vcs._LEFT_OUT.format(path="draft.md")]
    assert status(root) == {"draft.md": "??", "other.md": "??"}


def test_nothing_changed_by_the_session_makes_no_commit(project: Git):
    root = project.root
    (root / "B.txt").write_text("user's\n")
    (root / "mine.txt").write_text("user's\n")
    before = head(root)
    baseline = project.capture()

    done = project.commit_session(baseline, None, "session", {})
    explicit = project.commit_session(baseline, ["B.txt", "mine.txt", "E.txt"], "session", {})

    assert done.sha == explicit.sha == "" and done.notes == explicit.notes == []
    assert head(root) == before
    assert status(root) == {"B.txt": " M", "mine.txt": "??"}


def test_given_paths_limit_the_commit(project: Git):
    root = project.root
    baseline = project.capture()
    (root / "C.txt").write_text("new\n")
    (root / "E.txt").write_text("changed, but not named\n")

    done = project.commit_session(baseline, [root / "C.txt"], "session", {})

    assert done.paths == ["C.txt"] and files_in(root) == {"C.txt"}
    assert status(root) == {"E.txt": " M"}


def test_a_file_the_user_had_staged_keeps_its_staged_entry(project: Git):
    """Partly committed; the index entry the user staged stays exactly as it was."""
    root = project.root
    edit_line(root / "A.txt", 2, "the user's staged line 2")
    git(root, "add", "A.txt")
    staged_entry = git(root, "ls-files", "-s", "--", "A.txt")
    baseline = project.capture()
    edit_line(root / "A.txt", 29, "the agent's line 29")

    done = project.commit_session(baseline, None, "session", {})

    assert done.partly == ["A.txt"]
    expected = lines(30).replace("line 29\n", "the agent's line 29\n")
    assert git(root, "show", "HEAD:A.txt") == expected
    assert git(root, "ls-files", "-s", "--", "A.txt") == staged_entry


def test_the_users_mode_change_stays_theirs_and_the_sessions_is_committed(project: Git):
    root = project.root
    (root / "A.txt").chmod(0o755)  # the user's change: the executable bit only
    baseline = project.capture()
    edit_line(root / "A.txt", 15, "the agent's line 15")
    (root / "E.txt").chmod(0o755)  # the agent's change: the executable bit only

    done = project.commit_session(baseline, None, "session", {})

    tree = git(root, "ls-tree", "HEAD", "A.txt", "E.txt").splitlines()
    assert [ln.split()[0] for ln in tree] == ["100644", "100755"]
    expected = lines(30).replace("line 15\n", "the agent's line 15\n")
    assert git(root, "show", "HEAD:A.txt") == expected
    assert done.partly == ["A.txt"]
    mode_only = "diff --git a/A.txt b/A.txt\nold mode 100644\nnew mode 100755\n"
    assert git(root, "diff", "--", "A.txt") == mode_only
    assert status(root) == {"A.txt": " M"}


AWKWARD = ["with space.md", "ünïcödé ✓.md", "st*r?.md", "new\nline.md", "-dash.md", "[x].md"]


def test_awkward_names_symlinks_and_the_executable_bit(project: Git):
    root = project.root
    for name in AWKWARD[:3]:
        (root / name).write_text(lines(12, name))
    git(root, "add", "--", *AWKWARD[:3])
    git(root, "commit", "-q", "-m", "awkward names")
    edit_line(root / "ünïcödé ✓.md", 1, "the user's first line")  # the user's, uncommitted
    baseline = project.capture()
    edit_line(root / "ünïcödé ✓.md", 12, "the agent's last line")
    (root / "with space.md").unlink()
    (root / "st*r?.md").write_text("changed\n")
    for name in AWKWARD[3:]:
        (root / name).write_text(f"{name!r}\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("A.txt", root / "link to A")
    tree_before = tree_bytes(root)

    done = project.commit_session(baseline, None, "session", {})

    expected = {*AWKWARD, "run.sh", "link to A"}
    assert files_in(root) == expected and set(done.paths) == expected
    assert done.partly == ["ünïcödé ✓.md"]
    tree = git(root, "ls-tree", "-z", "HEAD").split("\0")
    modes = {entry.split("\t", 1)[1]: entry.split()[0] for entry in tree if entry}
    assert modes["run.sh"] == "100755" and modes["link to A"] == "120000"
    assert "with space.md" not in modes and modes["new\nline.md"] == "100644"
    assert git(root, "show", "HEAD:link to A") == "A.txt"
    assert git(root, "show", "HEAD:ünïcödé ✓.md") == lines(12, "ünïcödé ✓.md").replace(
        "ünïcödé ✓.md 12\n", "the agent's last line\n"
    )
    assert tree_bytes(root) == tree_before
    assert status(root) == {"ünïcödé ✓.md": " M"}


def test_line_endings_are_merged_as_checked_out_and_committed_as_git_stores_them(project: Git):
    root = project.root
    (root / ".gitattributes").write_text("*.crlf text eol=crlf\n")
    (root / "w.crlf").write_bytes(lines(20).replace("\n", "\r\n").encode())
    git(root, "add", ".gitattributes", "w.crlf")
    git(root, "commit", "-q", "-m", "crlf")
    assert git(root, "cat-file", "blob", "HEAD:w.crlf") == lines(20)  # stored with LF
    edit_line(root / "w.crlf", 1, "user")
    baseline = project.capture()
    edit_line(root / "w.crlf", 20, "agent")
    assert (root / "w.crlf").read_bytes().count(b"\r\n") == 20
    tree_before = tree_bytes(root)

    done = project.commit_session(baseline, None, "session", {})

    assert done.partly == ["w.crlf"]
    assert git(root, "cat-file", "blob", "HEAD:w.crlf") == lines(20).replace("line 20\n", "agent\n")
    assert tree_bytes(root) == tree_before
    assert status(root) == {"w.crlf": " M"}


def test_a_file_over_the_size_cap_is_left_out(project: Git, monkeypatch):
    root = project.root
    monkeypatch.setattr(vcs, "KEEP_FILE_BYTES", 64)
    edit_line(root / "A.txt", 2, "the user's line 2")  # A.txt is ~230 bytes
    baseline = project.capture()
    assert baseline.dirty["A.txt"].too_large and baseline.dirty["A.txt"].content is None
    edit_line(root / "A.txt", 28, "the agent's line 28")

    done = project.commit_session(baseline, None, "session", {})

    assert done.sha == "" and done.left_out == ["A.txt"]
    assert done.notes == [vcs._LEFT_OUT.format(path="A.txt")]


def test_a_user_edit_the_session_did_not_touch_is_not_committed_even_if_named(project: Git):
    root = project.root
    (root / "E.txt").write_text("the user's E\n")
    baseline = project.capture()
    (root / "C.txt").write_text("new\n")

    done = project.commit_session(baseline, ["E.txt", "C.txt"], "session", {})

    assert files_in(root) == {"C.txt"} and done.notes == []
    assert status(root) == {"E.txt": " M"}


def test_hooks_see_only_the_sessions_commit_and_a_refusing_hook_changes_nothing(project: Git):
    root = project.root
    hook = root / ".git" / "hooks" / "pre-commit"
    seen = root.parent / "hook-saw.txt"
    hook.write_text(f"#!/bin/sh\ngit diff --cached --name-only > '{seen}'\n")
    hook.chmod(0o755)
    (root / "B.txt").write_text("staged by the user\n")
    git(root, "add", "B.txt")
    baseline = project.capture()
    (root / "C.txt").write_text("new\n")

    project.commit_session(baseline, None, "session", {})
    assert seen.read_text() == "C.txt\n"

    hook.write_text("#!/bin/sh\necho 'lint says no' >&2\nexit 1\n")
    (root / "E.txt").write_text("agent's E\n")
    before_head, before_status = head(root), status(root)
    index_before = (root / ".git" / "index").read_bytes()
    with pytest.raises(GitError, match="lint says no"):
        project.commit_session(baseline, None, "session", {})
    assert head(root) == before_head and status(root) == before_status
    assert (root / ".git" / "index").read_bytes() == index_before
    assert not [p.name for p in (root / ".git").iterdir() if p.name.startswith("specflux-index")]


def test_a_session_commit_on_an_unborn_branch(tmp_path: Path):
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "staged.txt").write_text("the user's, staged\n")
    git(root, "add", "staged.txt")
    fresh = Git.find(root)
    assert fresh is not None and fresh.check_can_commit() == []
    baseline = fresh.capture()
    assert baseline.head == ""
    (root / "task.md").write_text("# task\n")

    done = fresh.commit_session(baseline, None, "first session", {})

    assert done.sha == head(root) and files_in(root) == {"task.md"}
    assert status(root) == {"staged.txt": "A "}


def test_a_session_commit_in_a_linked_worktree(project: Git, tmp_path: Path):
    other = tmp_path / "other"
    git(project.root, "worktree", "add", "-q", "-b", "side", str(other))
    linked = Git.find(other)
    assert linked is not None
    edit_line(other / "A.txt", 2, "the user's line 2")
    baseline = linked.capture()
    edit_line(other / "A.txt", 28, "the agent's line 28")
    (other / "C.txt").write_text("new\n")

    done = linked.commit_session(baseline, None, "session", {})

    assert git(other, "rev-parse", "side").strip() == done.sha
    assert files_in(other) == {"A.txt", "C.txt"}
    assert status(other) == {"A.txt": " M"}
    assert status(project.root) == {}


def test_capture_fingerprints_match_status_snapshot(project: Git):
    root = project.root
    (root / "A.txt").write_text("changed\n")
    (root / "new.md").write_text("new\n")
    (root / "D.txt").unlink()
    git(root, "mv", "E.txt", "E-renamed.txt")

    baseline = project.capture()

    assert baseline.fingerprints == project.status_snapshot()
    assert baseline.head == head(root)
    assert baseline.dirty["A.txt"].content == b"changed\n"
    assert baseline.dirty["new.md"].content is None and baseline.dirty["new.md"].status == "??"
    assert baseline.dirty["D.txt"].status == " D" and baseline.dirty["D.txt"].mode == "000000"


def _user_symlink(root: Path) -> None:
    (root / "A.txt").unlink()
    os.symlink("B.txt", root / "A.txt")


def _user_deleted(root: Path) -> None:
    (root / "A.txt").unlink()


def _user_added(root: Path) -> None:
    (root / "A.txt").unlink()
    git(root, "rm", "-q", "--cached", "A.txt")
    git(root, "commit", "-q", "-m", "A.txt goes")
    (root / "A.txt").write_text(lines(30))
    git(root, "add", "A.txt")  # staged, never committed: HEAD has no version to start from


def _binary(root: Path) -> None:
    data = bytes(range(256)) * 8
    (root / "A.txt").write_bytes(data)
    git(root, "commit", "-q", "-am", "binary")
    (root / "A.txt").write_bytes(b"\0user" + data[5:])


@pytest.mark.parametrize("users_change", [_user_symlink, _user_deleted, _user_added, _binary],
                         ids=["symlink", "deleted", "added", "binary"])  # fmt: skip
def test_what_cannot_be_split_is_left_out(project: Git, users_change):
    root = project.root
    users_change(root)
    baseline = project.capture()
    if (root / "A.txt").is_symlink() or not (root / "A.txt").exists():
        (root / "A.txt").unlink(missing_ok=True)
        (root / "A.txt").write_text("the agent's A\n")
    else:
        with open(root / "A.txt", "ab") as stream:
            stream.write(b"the agent's last line\n")
    (root / "C.txt").write_text("new\n")
    tree_before, staged_before = tree_bytes(root), git(root, "diff", "--cached")

    done = project.commit_session(baseline, None, "session", {})

    assert files_in(root) == {"C.txt"}
    assert done.left_out == ["A.txt"] and done.notes == [vcs._LEFT_OUT.format(path="A.txt")]
    assert tree_bytes(root) == tree_before and git(root, "diff", "--cached") == staged_before


def test_a_session_commit_waits_for_a_held_index_lock(project: Git):
    import threading
    import time

    root = project.root
    baseline = project.capture()
    (root / "C.txt").write_text("new\n")
    lock = root / ".git" / "index.lock"
    lock.write_text("")
    started = time.monotonic()  # before the timer starts: the lock is held at least 0.5 s from here
    threading.Timer(0.5, lock.unlink).start()

    done = project.commit_session(baseline, None, "session", {})

    assert done.sha and done.notes == []
    assert time.monotonic() - started >= 0.4
    assert status(root) == {}


def test_no_temporary_index_is_left_behind(project: Git):
    root = project.root
    (root / "B.txt").write_text("staged\n")
    git(root, "add", "B.txt")
    baseline = project.capture()
    (root / "C.txt").write_text("new\n")

    assert project.commit_session(baseline, None, "session", {}).sha

    assert sorted(p.name for p in (root / ".git").iterdir() if "specflux-index" in p.name) == []


def test_a_path_the_user_untracked_but_kept_stays_out_of_the_commit(project: Git):
    """`git rm --cached B.txt`: staged as deleted and untracked at once; neither is committed."""
    root = project.root
    git(root, "rm", "-q", "--cached", "B.txt")
    baseline = project.capture()
    assert baseline.dirty["B.txt"].status == "D "
    (root / "C.txt").write_text("new\n")

    done = project.commit_session(baseline, None, "session", {})

    assert files_in(root) == {"C.txt"} and done.notes == []
    assert git(root, "show", "HEAD:B.txt") == "B.txt\n"
    assert git(root, "diff", "--cached", "--name-status") == "D\tB.txt\n"
    assert "?? B.txt" in git(root, "status", "--porcelain")


def test_what_the_user_staged_is_never_committed(project: Git):
    """Staged changes, a staged new file, a staged deletion, an intent-to-add: all stay staged."""
    root = project.root
    (root / "B.txt").write_text("B staged\n")
    (root / "staged-new.txt").write_text("new, staged\n")
    (root / "intent.txt").write_text("intent to add\n")
    git(root, "add", "B.txt", "staged-new.txt")
    git(root, "add", "-N", "intent.txt")
    git(root, "rm", "-q", "D.txt")
    staged_before = git(root, "diff", "--cached")
    index_before = git(root, "ls-files", "-s")
    baseline = project.capture()
    (root / "C.txt").write_text("new\n")
    (root / "E.txt").write_text("the agent's E\n")

    done = project.commit_session(baseline, None, "session", {})

    assert files_in(root) == {"C.txt", "E.txt"} and done.notes == []
    assert git(root, "diff", "--cached") == staged_before
    def others(index: str) -> list[str]:
        return [ln for ln in index.splitlines() if ln.split("\t")[1] not in ("C.txt", "E.txt")]

    assert others(git(root, "ls-files", "-s")) == others(index_before)


@pytest.mark.parametrize("agent_stages", [False, True], ids=["unstaged", "agent-staged"])
def test_staged_entries_of_other_paths_with_an_agent_that_stages(project: Git, agent_stages):
    root = project.root
    (root / "B.txt").write_text("B staged\n")
    git(root, "add", "B.txt")
    baseline = project.capture()
    (root / "C.txt").write_text("new\n")
    (root / "E.txt").write_text("the agent's E\n")
    if agent_stages:
        git(root, "add", "C.txt", "E.txt")

    project.commit_session(baseline, None, "session", {})

    assert files_in(root) == {"C.txt", "E.txt"}
    assert status(root) == {"B.txt": "M "}


@pytest.mark.parametrize("update", ["swap", "reset"])
@pytest.mark.parametrize("next_path", ["E.txt", "B.txt"])
def test_a_kill_between_a_session_commit_and_its_index_update_is_repaired_by_the_next_commit(project: Git,
                                                                                             monkeypatch, update,
                                                                                             next_path):
    """The commit moves HEAD, then the user's index follows it (the index the commit was built in
    swapped in, or `git reset` where it cannot be); killed in between, the committed paths would
    show as a staged revert (and the user's next commit would undo the session)."""
    from specflux.vcs import session_commit

    root = project.root
    baseline = project.capture()
    (root / "B.txt").write_text("the agent's B\n")
    (root / "D.txt").write_text("the user's D, staged\n")
    real, real_swap = Git._git, session_commit._swap_in

    def killed_before_the_index(self, *args, **kwargs):
        if "reset" in args:
            raise KeyboardInterrupt  # the process dies here
        return real(self, *args, **kwargs)

    def killed_before_the_swap(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(Git, "_git", killed_before_the_index)
    monkeypatch.setattr(session_commit, "_swap_in", killed_before_the_swap if update == "swap" else lambda *a: False)
    with pytest.raises(KeyboardInterrupt):
        project.commit_session(baseline, ["B.txt"], "session", {})
    monkeypatch.setattr(Git, "_git", real)
    monkeypatch.setattr(session_commit, "_swap_in", real_swap)
    assert status(root)["B.txt"] == "MM"  # HEAD has the agent's B, the index the old one: a staged revert
    git(root, "add", "D.txt")  # the user stages something of their own meanwhile

    baseline = project.capture()  # (the next session's, which may change the same path again)
    assert "B.txt" not in baseline.dirty  # repaired first: a stale entry is not taken for the user's work
    (root / next_path).write_text("the agent's next version\n")
    project.commit_session(baseline, [next_path], "next session", {})

    assert git(root, "show", f"HEAD:{next_path}") == "the agent's next version\n"
    assert "B.txt" not in status(root) and next_path not in status(root)  # the index follows HEAD
    assert status(root)["D.txt"] == "M "  # and what the user staged is left as it was
    assert not (root / ".git" / "specflux-index-follow.json").exists()


def _git_commands(monkeypatch) -> list[tuple[str, ...]]:
    """Every git command Git runs from now on (text and bytes), as its arguments."""
    seen: list[tuple[str, ...]] = []
    for name in ("_git", "_git_raw"):
        real = getattr(Git, name)

        def traced(self, *args, _real=real, **kwargs):
            seen.append(args)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Git, name, traced)
    return seen


def test_with_nothing_staged_the_index_a_session_commit_was_built_in_becomes_the_users(project: Git, monkeypatch):
    """No `git reset` afterwards: the built index (the user's, the committed paths at the new
    commit) is renamed over the user's, through git's own index.lock."""
    root = project.root
    (root / "D.txt").write_text("the user's own edit, not staged\n")
    baseline = project.capture()
    (root / "B.txt").write_text("the agent's B\n")
    (root / "new.txt").write_text("the agent's new file\n")
    seen = _git_commands(monkeypatch)
    done = project.commit_session(baseline, None, "session", {})
    assert sorted(done.paths) == ["B.txt", "new.txt"]
    assert not [args for args in seen if "reset" in args]
    assert status(root) == {"D.txt": " M"}  # committed paths clean, the user's edit still theirs, nothing staged
    assert not (root / ".git" / "index.lock").exists()
    assert git(root, "diff", "--cached", "--name-only") == ""
    git(root, "fsck", "--no-progress")  # (an index git reads without complaint)


def test_a_session_that_changed_only_tracked_files_commits_in_one_git_process(project: Git, monkeypatch):
    """Modified, deleted and made executable, each HEAD's in the index: `commit --include` stages
    and commits them at once (no update-index); a new file needs update-index (--include stages
    no untracked file), and a user's own edit stays out of both."""
    root = project.root
    (root / "D.txt").write_text("the user's own edit, not staged\n")
    baseline = project.capture()
    (root / "B.txt").write_text("the agent's B\n")
    (root / "E.txt").unlink()
    (root / "A.txt").chmod(0o755)
    seen = _git_commands(monkeypatch)
    done = project.commit_session(baseline, None, "session", {})
    assert sorted(done.paths) == ["A.txt", "B.txt", "E.txt"]
    assert not [args for args in seen if "update-index" in args or "reset" in args]
    assert [args for args in seen if "commit" in args and "--include" in args]
    assert git(root, "show", "HEAD:B.txt") == "the agent's B\n"
    assert "E.txt" not in git(root, "ls-tree", "--name-only", "HEAD").split()
    assert git(root, "ls-tree", "HEAD", "A.txt").split()[0] == "100755"
    assert status(root) == {"D.txt": " M"}
    assert git(root, "diff", "--cached", "--name-only") == ""
    git(root, "fsck", "--no-progress")

    baseline = project.capture()
    (root / "B.txt").write_text("the agent's B again\n")
    (root / "new.txt").write_text("a new file\n")
    seen.clear()
    assert sorted(project.commit_session(baseline, None, "session", {}).paths) == ["B.txt", "new.txt"]
    assert [args for args in seen if "update-index" in args]
    assert not [args for args in seen if "--include" in args]
    assert files_in(root) == {"B.txt", "new.txt"} and status(root) == {"D.txt": " M"}


def test_an_index_changed_or_locked_while_the_session_committed_is_updated_by_reset_instead(project: Git,
                                                                                            monkeypatch):
    """The swap is only made while the user's index is the one copied and no git holds its lock:
    what the user staged meanwhile stays staged."""
    from specflux.vcs import session_commit

    root = project.root
    baseline = project.capture()
    (root / "B.txt").write_text("the agent's B\n")
    (root / "D.txt").write_text("the user's D, staged meanwhile\n")
    real_swap = session_commit._swap_in

    def user_stages_first(built, real, copied):
        git(root, "add", "D.txt")  # between the copy and the swap
        return real_swap(built, real, copied)

    monkeypatch.setattr(session_commit, "_swap_in", user_stages_first)
    seen = _git_commands(monkeypatch)
    project.commit_session(baseline, ["B.txt"], "session", {})
    assert [args for args in seen if "reset" in args]
    assert status(root) == {"D.txt": "M "}  # B follows HEAD; D is still staged
    assert git(root, "show", "HEAD:D.txt") != "the user's D, staged meanwhile\n"

    baseline = project.capture()
    (root / "E.txt").write_text("the agent's E\n")
    lock = root / ".git" / "index.lock"
    monkeypatch.setattr(session_commit, "_swap_in", lambda built, real, copied: (lock.write_text(""), real_swap(
        built, real, copied), lock.unlink())[1])  # another git holds the index at that moment
    assert project.commit_session(baseline, ["E.txt"], "session", {}).paths == ["E.txt"]
    assert "E.txt" not in status(root) and status(root)["D.txt"] == "M "


@pytest.mark.parametrize("case", ["plain", "user_edits_too", "partly", "user_staged", "nothing", "deleted"])
def test_what_a_session_commit_says_is_left_uncommitted_is_what_git_status_says(project: Git, case):
    """`SessionCommit.after` spares a run's step a `git status` after the commit: where it is given
    it must be the status git reads."""
    from specflux.vcs.status import dirty_records

    root = project.root
    if case in ("user_edits_too", "partly"):
        edit_line(root / "A.txt", 3, "the user's line 3")
        (root / "scratch.txt").write_text("the user's untracked file\n")
    if case == "user_staged":
        (root / "D.txt").write_text("the user's D, staged\n")
        git(root, "add", "D.txt")
    baseline = project.capture()
    if case != "nothing":
        (root / "B.txt").write_text("the agent's B\n")
        (root / "sub").mkdir()
        (root / "sub" / "new.txt").write_text("the agent's new file\n")
    if case == "partly":
        edit_line(root / "A.txt", 20, "the agent's line 20")
    if case == "deleted":
        (root / "E.txt").unlink()
    done = project.commit_session(baseline, None, "session", {})
    if case == "partly":
        assert done.partly == ["A.txt"]
    assert done.after is not None
    assert dirty_records(done.after) == dirty_records(project.status()[1]), case
    assert dirty_records(done.after, "sub") == dirty_records(project.status()[1], "sub")


def test_a_killed_session_commits_temporary_index_is_removed_by_the_next(project: Git):
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    leftover = project.root / ".git" / f"specflux-index.{gone.stdout.strip()}"
    leftover.write_bytes(b"DIRC")
    live = project.root / ".git" / f"specflux-index.{os.getppid()}"  # a process still running: kept
    live.write_bytes(b"DIRC")
    baseline = project.capture()
    (project.root / "B.txt").write_text("the agent's B\n")
    project.commit_session(baseline, None, "session", {})
    assert not leftover.exists() and live.exists()
