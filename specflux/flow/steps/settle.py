"""The task files when a run ends: no task is left saying someone works on it.

A run that ends by a limit, by `flow stop`, or by giving up after a crash may leave a task file
`in_progress` (its coder's sessions moved it there) or `review`. Nobody works on it any more, so
the file goes back to the status it had before the run (`pending` where that was `in_progress`
or `review` too), with the reason in the commit. Tasks the run completed, failed or blocked keep
what the run decided.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specflux.base.errors import SpecfluxError

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager
    from specflux.flow.record.run import Run

BUSY = ("in_progress", "review")
PLACEHOLDER = "(To be completed)"
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


def withdraw_claims(manager: "TaskStateManager", task: dict) -> list[str]:
    """A task the run failed claims nothing it did not prove: the criteria its agents ticked in the
    run are unticked, and a chain output they wrote where the file had none is taken out, so
    nothing downstream reads it (`task` is the run state's entry, with what the file held before).
    Returns what was withdrawn, in words; the caller commits with the status."""
    from specflux.format.edits import apply_edits
    from specflux.store.values import Outcome

    task_id = task["id"]
    doc = manager.load(task_id)
    before = set(task.get("checkedBefore") or [])
    ticked = [i for i, (_, _, checked, _, _) in enumerate(doc.criteria_lines, 1) if checked and i not in before]
    said = []
    if ticked:
        manager.set_checked(task_id, ticked, False)
        said.append(f"criteria {', '.join(map(str, ticked))} unticked")
    if task.get("chainOutputBefore") is None and not manager.load(task_id).chain_output_is_placeholder:
        with manager.changing([task_id], Outcome(task_id)) as pending:
            doc = manager.load(task_id, pending.files)
            region = doc.sections.get("chain_output")
            if region is not None:
                pending.files.write(manager.path(task_id), apply_edits(doc.text, [doc.replace_content(region, PLACEHOLDER)]))
                said.append("its chain output taken out")
    return said
