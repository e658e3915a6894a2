"""What a task's coder attempts in this run committed, as this process saw them, and the change
they add up to: asked of git once per attempt and reused.

The coder's "no change" check and the reviewer's context both need the same diff, from before the
task's first coder commit in the run to HEAD (`.specflux/` aside), and both used to find those
commits with a `git log --grep` over the whole history. A run that made every attempt of a task
itself already knows them; the diff, taken once for the coder, is the reviewer's too while HEAD
has not moved. Where this process did not see every attempt (a resumed run, a lane's step), the
callers ask git as before.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

OUTSIDE = ("--", ".", ":(exclude).specflux")


class Attempts:
    def __init__(self) -> None:
        self._commits: dict[str, list[str]] = {}  # task id -> each attempt's commit ("" for none)
        self._diffs: dict[tuple[str, str], subprocess.CompletedProcess[str] | _Pending] = {}

    def note(self, task_id: str, sha: str) -> None:
        """The coder attempt just made on `task_id` committed `sha` ("" for nothing)."""
        self._commits.setdefault(task_id, []).append(sha)

    def commits(self, state: dict[str, Any], task_id: str) -> list[str] | None:
        """This run's coder commits of `task_id`, newest first, when this process saw each of the
        attempts the run's `state` counts; None when it did not."""
        seen = self._commits.get(task_id)
        if seen is None or len(seen) != (state.get("taskAttempts") or {}).get(task_id, 0):
            return None
        return [sha for sha in reversed(seen) if sha]

    def surely_changed(self, git, state: dict[str, Any], task_id: str, done: dict[str, Any]) -> bool:
        """Whether the attempt just made (`done`, its session's summary), the task's only one in
        the run and still HEAD, committed a path outside `.specflux/`: its diff is then not empty,
        and is taken in a thread (`prefetch`) while the run goes on to the tests."""
        commits = self.commits(state, task_id)
        if git is None or not commits or len(commits) != 1 or commits[0] != done.get("commit"):
            return False
        if not any(p != ".specflux" and not p.startswith(".specflux/") for p in done.get("changed") or ()):
            return False
        head = git.head()
        if head != commits[0]:
            return False
        self.prefetch(git.root, commits[0] + "^", head)
        return True

    def diff(self, root: Path, base: str, head: str) -> subprocess.CompletedProcess[str]:
        """`git diff --stat --patch BASE HEAD` outside `.specflux/`, once per (base, head)."""
        key = (base, head)
        if key not in self._diffs:
            self.prefetch(root, base, head)
        found = self._diffs[key]
        if isinstance(found, _Pending):
            found = self._diffs[key] = found.result()
        return found

    def prefetch(self, root: Path, base: str, head: str) -> None:
        """Start taking that diff in a thread (two commits' trees: no lock, nothing written),
        for `diff` to collect: meanwhile the run goes on (the tests run)."""
        key = (base, head)
        if key in self._diffs:
            return
        from specflux.vcs.process import run_git

        if len(self._diffs) > 64:
            self._diffs.clear()
        self._diffs[key] = _Pending(lambda: run_git(("diff", "--stat", "--patch", base, head, *OUTSIDE), root))


class _Pending:
    """A call made in a daemon thread; `result()` waits for it and returns (or raises) what it did."""

    def __init__(self, call) -> None:
        import threading

        self._call, self._value, self._error = call, None, None
        self._thread = threading.Thread(target=self._run, name="specflux-diff", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._call()
        except BaseException as e:  # given to the caller of result()
            self._error = e

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
