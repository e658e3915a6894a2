"""The task files when a run ends: no task is left saying someone works on it.

A run that ends by a limit, by `flow stop`, or by giving up after a crash may leave a task file
`in_progress` (its coder's sessions moved it there) or `review`. Nobody works on it any more, so
the file goes back to the status it had before the run (`pending` where that was `in_progress`
or `review` too), with the reason in the commit. Tasks the run completed, failed or blocked keep
what the run decided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import SpecfluxError

if TYPE_CHECKING:
    from ..store import TaskStateManager
    from .run import Run

BUSY = ("in_progress", "review")
CLOSED = ("complete", "failed", "blocked")


def settle_tasks(manager: "TaskStateManager", run: "Run") -> list[str]:
    """Put back every run task whose file says `in_progress`/`review` while the run has not closed
    it; returns one line per task put back (or that could not be)."""
    state = run.state()
    said = []
    for task in state.get("tasks") or []:
        if task.get("status") in CLOSED:
            continue
        try:
            current = manager.load(task["id"]).status
        except SpecfluxError:
            continue  # deleted or broken meanwhile: lint says so; nothing of the run's to undo
        if current not in BUSY:
            continue
        before = task.get("statusBefore") or "pending"
        back = "pending" if before in BUSY else before
        reason = f"run {run.id} ended while the task was {current}"
        try:
            manager.set_status(task["id"], back, commit=manager.git is not None, reason=reason,
                               trailers={"Specflux-Run": run.id, "Specflux-Role": "engine"})
        except SpecfluxError as e:
            said.append(f"task {task['id']} stays {current}: could not set it back to {back}: {e}")
            continue
        said.append(f"task {task['id']}: {current} -> {back} (the run ended before the workflow closed it)")
    return said
