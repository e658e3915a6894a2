"""Named crash points, for tests of `kill -9` at the moments that hurt.

`SPECFLUX_CRASH_AT=POINT[,POINT...]` makes the process SIGKILL itself at the first POINT it
reaches: a real kill, exactly there, instead of timing luck. A POINT is `NAME` (the first time
the process passes it), `NAME@N` (the N-th time) or `FIRST>NAME` (the first time it passes NAME
after it passed FIRST); NAME may be a shell pattern (`atomic:task-*-state.md`). Unset (always,
outside tests), a crash point costs one environment lookup.

The points (see tests/test_kill_points.py):
  merge:scratch-made        a lane's merge: the scratch worktree made, nothing merged yet
  merge:committed           the merge commit made in the scratch worktree, the user's branch not moved
  merge:fast-forwarded      the user's branch moved to the merge commit, nothing recorded yet
  event:TYPE[:WHAT]         before a parallel run appends an event (`event:step_finished:merge`,
                            `event:decision:merge`, `event:task_status:complete`, `event:status:completed`);
  recorded:TYPE[:WHAT]      and just after (`recorded:files`: a decision's write journal on the disk,
                            its files not written yet)
  writeback:before-write    a task completing: its source's new text made, nothing written yet
  writing:NAME              a change set: the files before NAME written, NAME and the rest not yet
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
    from fnmatch import fnmatchcase

    for item in wanted.split(","):
        first, _, point = item.strip().rpartition(">")
        point, _, nth = point.partition("@")
        if not fnmatchcase(name, point):
            continue
        if (_passed.get(first, 0) > 0) if first else count == (int(nth) if nth else 1):
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
