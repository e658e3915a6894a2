"""`specflux handoff`: a task's chain output written alone — no status change, no wiring, no commit.
What an agent CLI calls inside a workflow run (which decides the status itself), and what a person
writes before `complete` (which keeps it when given the same text)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specflux.base.errors import UsageError
from specflux.format.document import TaskDocument
from specflux.format.edits import apply_edits
from specflux.store.values import Outcome
from specflux.store.workspace import check_id

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager


def write_chain_output(manager: "TaskStateManager", task_id: str, summary: str, downstream: str | None = None) -> Outcome:
    """Write `### Summary` (and `### For Downstream Tasks` when given) into the task's Chain Output,
    keeping every other subsection and any text a person wrote there."""
    task_id = check_id(task_id)
    if not summary.strip():
        raise UsageError("a chain output needs a summary (--summary)")
    outcome = Outcome(task_id)
    with manager.changing([task_id], outcome) as pending:
        doc = manager.load(task_id)
        edits = doc.chain_output_edits(summary, downstream)
        written = TaskDocument(apply_edits(doc.text, edits), doc.path)
        out = written.chain_output()
        if out is None or not out.summary:
            raise doc.hidden_by(min(e.start for e in edits)) or doc.error(
                "the chain output would not be readable where it would be written; nothing was written",
                min(e.start for e in edits))
        pending.files.write(manager.path(task_id), written.text)
    return outcome
