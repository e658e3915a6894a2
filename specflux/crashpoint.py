"""Named crash points, for tests of `kill -9` at the moments that hurt.

`SPECFLUX_CRASH_AT=NAME[@N][,NAME[@N]...]` makes the process SIGKILL itself the N-th time (the
first, without `@N`) it passes the point NAME: a real kill, exactly there, instead of timing luck.
Unset (always, outside tests), a crash point costs one environment lookup.

The points (see tests/test_kill_points.py):
  merge:scratch-made        a lane's merge: the scratch worktree made, nothing merged yet
  merge:committed           the merge commit made in the scratch worktree, the user's branch not moved
  merge:fast-forwarded      the user's branch moved to the merge commit, nothing recorded yet
  event:TYPE[:WHAT]         before a parallel run appends an event: `event:step_finished:merge`,
                            `event:decision:merge`, `event:task_status:complete`, `event:status:completed`
  writeback:before-write    a task completing: its source's new text made, nothing written yet
  atomic:NAME               a file NAME being replaced: its new text in a temporary file, not renamed yet
  wrote:NAME                a change set: file NAME written, the rest (and the commit) not yet
  clean:removed-one         the end of a parallel run: one worktree removed, the others not yet
"""

from __future__ import annotations

import os

ENV = "SPECFLUX_CRASH_AT"
_passed: dict[str, int] = {}


def crash_point(name: str) -> None:
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    _passed[name] = count = _passed.get(name, 0) + 1
    for item in wanted.split(","):
        point, _, nth = item.strip().partition("@")
        if point == name and count == (int(nth) if nth else 1):
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
