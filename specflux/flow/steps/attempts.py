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
        self._diffs: dict[tuple[str, str], subprocess.CompletedProcess[str]] = {}

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

    def diff(self, root: Path, base: str, head: str) -> subprocess.CompletedProcess[str]:
        """`git diff --stat --patch BASE HEAD` outside `.specflux/`, once per (base, head)."""
        key = (base, head)
        if key not in self._diffs:
            from specflux.vcs.process import run_git

            if len(self._diffs) > 64:
                self._diffs.clear()
            self._diffs[key] = run_git(("diff", "--stat", "--patch", base, head, *OUTSIDE), root)
        return self._diffs[key]
