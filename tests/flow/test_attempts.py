"""A task's coder attempts in a run (flow/steps/attempts.py): the diff the "no change" check and
the reviewer share, taken once, and taken in a thread while the tests run where the attempt's own
commit already shows a change outside `.specflux/`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from specflux.flow.steps.attempts import OUTSIDE, Attempts, _Pending
from specflux.vcs.git import Git


def commit(root: Path, path: str, text: str) -> str:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", f"change {path}"], cwd=root, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def test_an_attempt_that_committed_code_has_its_diff_taken_in_a_thread(git_repo: Path):
    attempts, git = Attempts(), Git(git_repo)
    sha = commit(git_repo, "src/a.txt", "built\n")
    attempts.note("1", sha)
    done = {"commit": sha, "changed": ["src/a.txt", ".specflux/task-states/task-1-state.md"]}
    assert attempts.surely_changed(git, {"taskAttempts": {"1": 1}}, "1", done)
    assert isinstance(attempts._diffs[(sha + "^", sha)], _Pending)  # started, not waited for
    shown = attempts.diff(git_repo, sha + "^", sha)
    direct = subprocess.run(["git", "diff", "--stat", "--patch", sha + "^", sha, *OUTSIDE], cwd=git_repo,
                            capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout == direct.stdout and "src/a.txt" in shown.stdout
    assert attempts.diff(git_repo, sha + "^", sha) is shown  # once


def test_what_does_not_surely_change_is_left_to_the_diff(git_repo: Path):
    """Only .specflux/ committed, a second attempt (two may add up to nothing), HEAD moved since,
    or a summary that is not this attempt's: no shortcut, and no diff started."""
    git = Git(git_repo)
    only_task = commit(git_repo, ".specflux/task-states/task-1-state.md", "# Task 1\n")
    attempts = Attempts()
    attempts.note("1", only_task)
    assert not attempts.surely_changed(git, {"taskAttempts": {"1": 1}}, "1",
                                       {"commit": only_task, "changed": [".specflux/task-states/task-1-state.md"]})
    first, second = commit(git_repo, "src/a.txt", "one\n"), commit(git_repo, "src/a.txt", "two\n")
    twice = Attempts()
    twice.note("2", first)
    twice.note("2", second)
    assert not twice.surely_changed(git, {"taskAttempts": {"2": 2}}, "2", {"commit": second, "changed": ["src/a.txt"]})
    moved = Attempts()
    moved.note("3", first)
    assert not moved.surely_changed(git, {"taskAttempts": {"3": 1}}, "3", {"commit": first, "changed": ["src/a.txt"]})
    assert not moved.surely_changed(git, {"taskAttempts": {"3": 1}}, "3", {"commit": "", "changed": ["src/a.txt"]})
    assert not attempts._diffs and not twice._diffs and not moved._diffs
