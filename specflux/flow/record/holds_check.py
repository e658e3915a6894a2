"""A run re-checks its holds while it drives (docs/runs.md).

A run takes its holds when it is driven (holds.py) and trusts them no longer than a step: before
each step the engine asks `lost_holds` whether each task it still works on is held by this run,
driven by this process. A task another live run holds now was *taken* (its holds were deleted or
given up behind this run's back, and a second `flow start` claimed it); a task nobody holds any
more was *released*. Either way the run stops for now (paused), saying which run took which task
and what to do (`stop_reason`); `flow resume` then takes the holds back, or refuses while the
other run drives them, and first reconciles with what that run did (steps/reconcile.py).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from specflux.flow.record.holds import Holds


def lost_holds(holds: "Holds", run_id: str, task_ids: Iterable[str]) -> dict[str, str | None]:
    """{task: the live run holding it now, or None when nobody does} for each of `task_ids` that
    run `run_id`, driven by this process, no longer holds. One small file read per task while
    the holds are this run's; the other holder's liveness is checked only when they are not, and
    then under the holds' lock, so that a release or a claim is seen whole, not half done."""
    lost = _lost(holds, run_id, task_ids := list(task_ids))
    if lost:
        with holds.locked():
            lost = _lost(holds, run_id, task_ids)
    return lost


def _lost(holds: "Holds", run_id: str, task_ids: list[str]) -> dict[str, str | None]:
    lost: dict[str, str | None] = {}
    pid = os.getpid()
    for task_id in task_ids:
        hold = holds.hold_of(task_id)
        if hold is not None and hold.get("run") == run_id and hold.get("pid") == pid:
            continue
        lost[task_id] = holds.holder(task_id, other_than=run_id)
    return lost


def stop_reason(run_id: str, lost: dict[str, str | None]) -> str:
    """Why the run pauses, for `pausedFor`, the narrative and the last line: who took which task
    and what to do."""
    taken = {t: r for t, r in lost.items() if r}
    released = [t for t, r in lost.items() if not r]
    parts = [f"task {t} was taken by run {r}" for t, r in taken.items()]
    if released:
        many = len(released) > 1
        parts.append(f"task{'s' if many else ''} {', '.join(released)} {'were' if many else 'was'} released "
                     f"(the hold{'s are' if many else ' is'} gone) while this run drove {'them' if many else 'it'}")
    if taken:
        runs = sorted(set(taken.values()))
        todo = (f"`specflux flow resume {run_id}` once run {', '.join(runs)} has ended (what it completed is not "
                f"worked again), or `specflux flow stop {run_id}`")
    else:
        todo = f"`specflux flow resume {run_id}` takes the holds back, or `specflux flow stop {run_id}`"
    return f"holds: {'; '.join(parts)}; {todo}"


def recheck(holds: "Holds", run) -> str | None:
    """Why run `run` must stop for now (`stop_reason`), or None while it holds every task it has
    not closed."""
    open_tasks = [t["id"] for t in run.state().get("tasks") or [] if t["status"] not in ("complete", "failed", "blocked")]
    lost = lost_holds(holds, run.id, open_tasks)
    return stop_reason(run.id, lost) if lost else None
