"""A run that goes on after a pause first reconciles with the task files as they are now.

While a run is paused it holds nothing (record/holds.py), so another run, or a person, may have
completed some of its tasks meanwhile. Before `flow resume` drives it again, each task the run has
not closed is read from its file: one that says `complete`, where the completion is not this
run's own, was *completed since* and is not worked again. The run records that
(`task_reconciled`: the task closed, its open steps dropped, the completion named) and never
writes over the other result: a run's decision to fail or block a task whose file another run or
a person completed is not carried out on the file either (`completed_elsewhere`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specflux.base.errors import SpecfluxError

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager
    from specflux.flow.record.run import Run

CLOSED = ("complete", "failed", "blocked")


def completed_elsewhere(manager: "TaskStateManager", run_id: str, task: dict) -> str | None:
    """Who completed the task `task` (the run state's entry) in its file, when it was not run
    `run_id`: `run B`, `a person (commit abc12345)`, `a person (by hand)`; None when the file does
    not say complete, said so before the run started, is not committed so, or this run completed it
    (the commit that completed it, found by its trailers, names the run)."""
    task_id = task["id"]
    try:
        doc = manager.load(task_id)
    except SpecfluxError:
        return None  # deleted or broken: lint says so; nothing to reconcile
    if doc.status != "complete" or task.get("statusBefore") == "complete":
        return None
    git = manager.git
    if git is None:
        return "someone outside this run"
    path = manager.path(task_id)
    if git.committed_text(path) != doc.text:
        return None  # not committed: a person's edit in progress, or this run's own write a crash cut short
    for commit in git.history([path]):
        t = commit.trailers
        if t.get("Specflux-Task") not in (None, task_id) or t.get("Specflux-Status") != "complete":
            continue
        by = t.get("Specflux-Run")
        if by == run_id:
            return None
        return f"run {by}" if by else f"a person (commit {commit.sha[:8]})"
    return "a person (by hand)"


def reconcile(manager: "TaskStateManager", run: "Run", say=lambda line: None) -> list[str]:
    """Close the run's tasks completed since by another run or a person (recorded, never worked
    again, each said in one line); the ids of those closed."""
    state = run.state()
    closed = []
    for task in state.get("tasks") or []:
        if task.get("status") in CLOSED or f"accepted:{task['id']}" in (state.get("artifacts") or {}):
            continue  # (accepted by this run: a crash cut its effects short, which the engine carries out)
        by = completed_elsewhere(manager, run.id, task)
        if by is None:
            continue
        run.record({"type": "task_reconciled", "taskId": task["id"], "status": "complete", "by": by})
        say(f"task {task['id']} was completed by {by} since run {run.id} last drove it: not worked again")
        closed.append(task["id"])
    return closed


def kept_complete(manager: "TaskStateManager", run_id: str, task: dict, wanted: str, say, record) -> bool:
    """Whether the run's decision to make `task` `wanted` (failed, blocked) is not carried out on
    its file, because another run or a person completed it: said, and recorded as reconciled."""
    by = completed_elsewhere(manager, run_id, task)
    if by is None:
        return False
    say(f"task {task['id']} was completed by {by}: it stays complete, not {wanted}")
    record({"type": "task_reconciled", "taskId": task["id"], "status": "complete", "by": by})
    return True
