"""What `session` and `complete` commit (issue #3): their own files, nothing else, with trailers.

Real repositories throughout: the user's other staged and unstaged work must come through exactly as
it was, a missing identity must leave no trace, and two processes must both land their commits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest
from conftest import git

from helpers import ok, run
from specflux.cli.main import main
from specflux.store.workspace import Workspace

STATE = ".specflux/task-states/task-{}-state.md"
ARCHIVE = ".specflux/archives/task-{}-archive.md"
NAME_HINT = "git config --global user.name"
EMAIL_HINT = "git config --global user.email"


# ---------------------------------------------------------------- helpers




def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def committed_paths(repo: Path, rev: str = "HEAD") -> list[str]:
    return sorted(line for line in git(repo, "show", "--name-only", "--format=", rev).splitlines() if line)


def trailers(repo: Path, rev: str = "HEAD") -> dict[str, str]:
    out = git(repo, "log", "-1", "--format=%(trailers)", rev)
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def subject(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "log", "-1", "--format=%s", rev).strip()


def user_state(repo: Path, paths: list[str]) -> tuple[str, str, str, dict[str, bytes]]:
    """Everything about the user's files: status, staged and unstaged diffs, and their bytes."""
    return (
        git(repo, "status", "--porcelain", "--untracked-files=all", "--", *paths),
        git(repo, "diff", "--cached", "--binary", "--", *paths),
        git(repo, "diff", "--binary", "--", *paths),
        {p: (repo / p).read_bytes() for p in paths if (repo / p).exists()},
    )


@pytest.fixture
def repo(git_repo: Path) -> Path:
    """The conftest repository with specflux initialised and some tracked files of the user's."""
    for name in ("a.txt", "b.txt", "e.txt"):
        (git_repo / name).write_text(f"{name} v1\n")
    git(git_repo, "add", "a.txt", "b.txt", "e.txt")
    git(git_repo, "commit", "-q", "-m", "user files")
    Workspace.init(git_repo)
    return git_repo


def dirty_the_user_tree(repo: Path) -> list[str]:
    """Staged, unstaged, partly staged, new staged and untracked changes; returns their paths."""
    (repo / "a.txt").write_text("a.txt staged change\n")
    git(repo, "add", "a.txt")
    (repo / "b.txt").write_text("b.txt unstaged change\n")
    (repo / "c.txt").write_text("c.txt new and staged\n")
    git(repo, "add", "c.txt")
    (repo / "d.txt").write_text("d.txt untracked\n")
    (repo / "e.txt").write_text("e.txt staged part\n")
    git(repo, "add", "e.txt")
    (repo / "e.txt").write_text("e.txt staged part\ne.txt unstaged part\n")
    (repo / "README.md").unlink()  # a deletion, not staged
    return ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "README.md"]


# ---------------------------------------------------------------- what a commit holds


def test_session_commits_only_its_task_file(repo, capsys):
    ok(capsys, repo, "new", "Parser", "--id", "1", "--ac", "parses")
    ok(capsys, repo, "new", "Other", "--id", "2")
    user = dirty_the_user_tree(repo)
    before = user_state(repo, user)
    base = head(repo)

    out = ok(capsys, repo, "session", "1", "--did", "Wrote the parser", "--did", "Added tests", "--issues", "None", "--next", "Fuzz it")
    assert head(repo) != base
    assert git(repo, "rev-parse", "HEAD~1").strip() == base, "exactly one commit"
    assert head(repo)[:8] in out
    assert committed_paths(repo) == [STATE.format(1)]
    assert user_state(repo, user) == before, "the user's staged and unstaged work is exactly as it was"
    assert subject(repo) == "task 1: session 1 — Wrote the parser"
    t = trailers(repo)
    assert (t["Specflux-Task"], t["Specflux-Session"], t["Specflux-Status"]) == ("1", "1", "in_progress")
    # what was committed is what is on disk, and task 2 (untracked) was left alone
    assert git(repo, "show", f"HEAD:{STATE.format(1)}") == (repo / STATE.format(1)).read_text()
    assert git(repo, "status", "--porcelain", "--", STATE.format(1)) == ""
    assert git(repo, "status", "--porcelain", "--", STATE.format(2)).startswith("??")

    ok(capsys, repo, "session", "1", "--did", "Fuzzed it", "--check", "1")
    assert committed_paths(repo) == [STATE.format(1)]
    assert subject(repo) == "task 1: session 2 — Fuzzed it"
    assert trailers(repo)["Specflux-Session"] == "2"
    assert user_state(repo, user) == before


def test_complete_commits_the_task_and_the_tasks_it_wired(repo, capsys):
    ok(capsys, repo, "new", "Schema", "--id", "1")
    ok(capsys, repo, "new", "API", "--id", "2", "--dep", "1")
    ok(capsys, repo, "new", "UI", "--id", "3", "--dep", "1")
    ok(capsys, repo, "new", "Unrelated", "--id", "4")
    ok(capsys, repo, "session", "1", "--did", "Made the schema")
    user = dirty_the_user_tree(repo)
    before = user_state(repo, user)
    untouched = (repo / STATE.format(4)).read_bytes()

    ok(capsys, repo, "complete", "1", "--summary", "Users table", "--downstream", "Use UUIDs")
    assert committed_paths(repo) == sorted(STATE.format(t) for t in ("1", "2", "3"))
    assert user_state(repo, user) == before
    assert (repo / STATE.format(4)).read_bytes() == untouched
    assert git(repo, "status", "--porcelain", "--", STATE.format(4)).startswith("??")
    t = trailers(repo)
    assert (t["Specflux-Task"], t["Specflux-Session"], t["Specflux-Status"]) == ("1", "1", "complete")
    assert subject(repo).startswith("task 1: complete")


def test_session_that_archives_commits_the_archive_too(repo, capsys):
    (repo / ".specflux" / "config.toml").write_text("[archive]\narchive_kb = 3\nkeep_sessions = 1\n")
    ok(capsys, repo, "new", "Big", "--id", "1")
    user = dirty_the_user_tree(repo)
    before = user_state(repo, user)
    for n in range(1, 20):
        out = ok(capsys, repo, "session", "1", "--did", f"step {n}", "--issues", "x" * 400)
        if "archived" in out:
            break
    else:
        pytest.fail("never archived")
    assert committed_paths(repo) == sorted([STATE.format(1), ARCHIVE.format(1)])
    assert user_state(repo, user) == before


def test_no_commit_flag_makes_no_commit(repo, capsys):
    ok(capsys, repo, "new", "Quiet", "--id", "1")
    base = head(repo)
    code, out, err = run(capsys, repo, "session", "1", "--did", "local only", "--no-commit")
    assert code == 0, err
    assert head(repo) == base
    assert "local only" in (repo / STATE.format(1)).read_text()
    code, out, err = run(capsys, repo, "complete", "1", "--summary", "done", "--no-commit")
    assert code == 0, err
    assert head(repo) == base
    assert '"status": "complete"' in (repo / STATE.format(1)).read_text()


# ---------------------------------------------------------------- no repository, no identity


def test_outside_a_repository_it_works_and_says_so_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    root = tmp_path / "plain"
    root.mkdir()
    assert main(["init", str(root)]) == 0
    ok(capsys, root, "new", "Solo", "--id", "1")
    ok(capsys, root, "new", "Next", "--id", "2", "--dep", "1")
    for args in (
        ("session", "1", "--did", "worked without git"),
        ("complete", "1", "--summary", "done without git"),
    ):
        code, out, err = run(capsys, root, *args)
        assert code == 0, err
        lines = [ln for ln in err.splitlines() if ln.strip() and "criteria not ticked" not in ln]
        assert len(lines) == 1, f"exactly one notice about git, got {lines}"
        assert "commit" in lines[0] and "git" in lines[0]
        assert "Traceback" not in err
    assert "worked without git" in (root / STATE.format(1)).read_text()
    assert "### From Task #1" in (root / STATE.format(2)).read_text()
    assert not (root / ".git").exists()
    code, out, err = run(capsys, root, "log", "1", "--json")
    assert code == 0 and json.loads(out) == []


def _identity_free_env(monkeypatch, tmp_path: Path, global_config: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("EMAIL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
                 "GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        monkeypatch.delenv(name, raising=False)
    if global_config == "devnull":
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    else:  # identity auto-detection switched off: the same failure on every machine
        cfg = home / "gitconfig"
        cfg.write_text("[user]\n\tuseConfigOnly = true\n")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(cfg))


@pytest.mark.parametrize("global_config", ["devnull", "useConfigOnly"])
def test_no_identity_is_a_clear_error_and_changes_nothing(tmp_path, monkeypatch, capsys, global_config):
    repo = tmp_path / "noid"
    repo.mkdir()
    _identity_free_env(monkeypatch, tmp_path, global_config)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    probe = subprocess.run(["git", "var", "GIT_COMMITTER_IDENT"], cwd=repo, capture_output=True, text=True)
    if probe.returncode == 0:
        pytest.skip(f"git invents an identity on this machine ({probe.stdout.strip()})")
    assert subprocess.run(["git", "config", "user.name"], cwd=repo, capture_output=True).returncode == 1
    (repo / ".specflux").mkdir()
    (repo / ".specflux" / "config.toml").write_text("[archive]\narchive_kb = 3\nkeep_sessions = 1\n")
    Workspace.init(repo)
    ok(capsys, repo, "new", "Tracked", "--id", "1")
    ok(capsys, repo, "new", "Downstream", "--id", "2", "--dep", "1")
    # someone with an identity committed the workspace once (the helper passes one per command)
    git(repo, "add", ".specflux")
    git(repo, "commit", "-q", "-m", "workspace")
    ok(capsys, repo, "new", "Untracked", "--id", "3")
    (repo / "user.txt").write_text("user work\n")
    git(repo, "add", "user.txt")
    for n in range(1, 7):  # grow task 1 close to the archive limit without committing
        ok(capsys, repo, "session", "1", "--did", f"offline {n}", "--issues", "y" * 300, "--no-commit")
    assert not (repo / ARCHIVE.format(1)).exists()
    size = (repo / STATE.format(1)).stat().st_size
    assert size < 3 * 1024 < size + 700, "the next session below would archive"

    def snapshot():
        files = {p.relative_to(repo).as_posix(): p.read_bytes() for p in (repo / ".specflux").rglob("*.md")}
        return files, git(repo, "status", "--porcelain", "--untracked-files=all"), git(repo, "diff", "--cached"), head(repo)

    before = snapshot()
    for args in (
        ("session", "1", "--did", "needs an identity", "--issues", "z" * 600),  # would archive
        ("session", "3", "--did", "needs an identity"),  # untracked task file
        ("complete", "1", "--summary", "done"),  # would wire task 2
    ):
        code, out, err = run(capsys, repo, *args)
        assert code == 1, f"{args}: {code} {out} {err}"
        assert NAME_HINT in err and EMAIL_HINT in err, err
        assert "Traceback" not in err
        assert snapshot() == before, f"{args[0]} left a half-done change"
    assert not (repo / ARCHIVE.format(1)).exists()


def test_a_failing_commit_hook_leaves_no_half_done_change(repo, capsys):
    ok(capsys, repo, "new", "Hooked", "--id", "1")
    ok(capsys, repo, "new", "Wired", "--id", "2", "--dep", "1")
    ok(capsys, repo, "session", "1", "--did", "before the hook")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho the hook says no >&2\nexit 1\n")
    hook.chmod(0o755)
    user = dirty_the_user_tree(repo)
    files = {p: p.read_bytes() for p in (repo / ".specflux").rglob("*.md")}
    before = (user_state(repo, user), git(repo, "status", "--porcelain", "--untracked-files=all"), head(repo))
    for args in (("session", "1", "--did", "blocked"), ("complete", "1", "--summary", "blocked")):
        code, out, err = run(capsys, repo, *args)
        assert code == 1, f"{args}: {out}{err}"
        assert "the hook says no" in err and "Traceback" not in err
        assert {p: p.read_bytes() for p in (repo / ".specflux").rglob("*.md")} == files
        assert (user_state(repo, user), git(repo, "status", "--porcelain", "--untracked-files=all"), head(repo)) == before


def test_workspace_in_a_subfolder_with_awkward_names(git_repo, capsys):
    sub = git_repo / "sub dir [v2]*"
    sub.mkdir()
    assert main(["init", str(sub)]) == 0
    ok(capsys, sub, "new", "Nested", "--id", "n-1.0")
    (git_repo / "sub dir [v2]x").mkdir()  # would match the folder as a glob
    (git_repo / "sub dir [v2]x" / "other.txt").write_text("not mine\n")
    ok(capsys, sub, "session", "n-1.0", "--did", "works from a subfolder")
    assert committed_paths(git_repo) == ["sub dir [v2]*/" + STATE.format("n-1.0")]
    assert git(git_repo, "status", "--porcelain", "--untracked-files=all", "--", "sub dir [v2]x").startswith("??")


# ---------------------------------------------------------------- two processes at once


def test_concurrent_sessions_on_two_tasks_both_commit(repo, capsys):
    ok(capsys, repo, "new", "Left", "--id", "L")
    ok(capsys, repo, "new", "Right", "--id", "R")
    base = head(repo)
    rounds = 10
    barrier = threading.Barrier(2)
    failures: list[str] = []
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def worker(task_id: str) -> None:
        barrier.wait()
        for n in range(1, rounds + 1):
            done = subprocess.run(
                [sys.executable, "-m", "specflux.cli", "--root", str(repo), "session", task_id, "--did", f"{task_id} step {n}"],
                capture_output=True, text=True, env=env, timeout=60,
            )
            if done.returncode != 0:
                failures.append(f"{task_id} {n}: {done.returncode} {done.stderr}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in ("L", "R")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []

    shas = git(repo, "rev-list", f"{base}..HEAD").split()
    assert len(shas) == 2 * rounds
    seen: dict[str, list[int]] = {"L": [], "R": []}
    for sha in shas:
        t = trailers(repo, sha)
        task_id = t["Specflux-Task"]
        assert committed_paths(repo, sha) == [STATE.format(task_id)], f"{sha} holds another task's file"
        seen[task_id].append(int(t["Specflux-Session"]))
        assert subject(repo, sha) == f"task {task_id}: session {t['Specflux-Session']} — {task_id} step {t['Specflux-Session']}"
    assert sorted(seen["L"]) == sorted(seen["R"]) == list(range(1, rounds + 1))
    # nothing was lost: the committed files are the files on disk, with every session
    assert git(repo, "status", "--porcelain", "--", ".specflux/task-states") == ""
    for task_id in ("L", "R"):
        doc = (repo / STATE.format(task_id)).read_text()
        assert all(f"{task_id} step {n}\n" in doc for n in range(1, rounds + 1))
        assert f'"total_sessions": {rounds}' in doc


def test_concurrent_sessions_on_one_task_are_numbered_once_each(repo, capsys):
    ok(capsys, repo, "new", "Shared", "--id", "S")
    base = head(repo)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    barrier = threading.Barrier(2)
    failures: list[str] = []

    def worker(name: str) -> None:
        barrier.wait()
        for n in range(1, 6):
            done = subprocess.run(
                [sys.executable, "-m", "specflux.cli", "--root", str(repo), "session", "S", "--did", f"{name} {n}"],
                capture_output=True, text=True, env=env, timeout=60,
            )
            if done.returncode != 0:
                failures.append(done.stderr)

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    shas = git(repo, "rev-list", "--reverse", f"{base}..HEAD").split()
    assert [trailers(repo, sha)["Specflux-Session"] for sha in shas] == [str(n) for n in range(1, 11)]
    doc = (repo / STATE.format("S")).read_text()
    assert [doc.count(f"### Session {n} - ") for n in range(1, 11)] == [1] * 10
    assert all(f"{name} {n}\n" in doc for name in ("left", "right") for n in range(1, 6))
    assert git(repo, "status", "--porcelain", "--", STATE.format("S")) == ""


# ---------------------------------------------------------------- reading it back


def test_log_json_shows_the_tasks_commits(repo, capsys):
    ok(capsys, repo, "new", "Logged", "--id", "1")
    ok(capsys, repo, "new", "Noise", "--id", "2")
    ok(capsys, repo, "session", "1", "--did", "first step")
    ok(capsys, repo, "session", "2", "--did", "noise")
    ok(capsys, repo, "session", "1", "--did", "second step")
    # a person edits the task file and commits it by hand
    path = repo / STATE.format(1)
    path.write_text(path.read_text().replace("(describe the task in 2-5 sentences)", "Parse the logs."))
    git(repo, "commit", "-q", "-m", "clarify requirements", "--", STATE.format(1))
    ok(capsys, repo, "complete", "1", "--summary", "Logs parsed")

    entries = json.loads(ok(capsys, repo, "log", "1", "--json"))
    expected = git(repo, "log", "--format=%H", "--", STATE.format(1)).split()
    assert [e["commit"] for e in entries] == expected, "newest first, every commit touching the file"
    assert len(entries) == 4
    for e in entries:
        assert {"commit", "date", "session", "status", "subject"} <= set(e)
        assert e["subject"] == subject(repo, e["commit"])
        datetime.fromisoformat(e["date"])
    assert [(e["session"], e["status"]) for e in entries] == [(2, "complete"), (None, None), (2, "in_progress"), (1, "in_progress")]
    assert entries[2]["subject"] == "task 1: session 2 — second step"
    assert entries[1]["subject"] == "clarify requirements"

    text = ok(capsys, repo, "log", "1")
    for e in entries:
        assert e["commit"][:8] in text
    assert "second step" in text
    assert json.loads(ok(capsys, repo, "log", "2", "--json"))[0]["subject"] == "task 2: session 1 — noise"
