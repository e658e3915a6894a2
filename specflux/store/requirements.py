"""`specflux set --req TEXT` (and the control room's requirements editor): the text under
`### Requirements` replaced, and nothing else in the file touched."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specflux.base.errors import UsageError
from specflux.format.document import TaskDocument
from specflux.format.edits import apply_edits, replace_content
from specflux.store.values import Outcome
from specflux.store.workspace import check_id

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager


def set_requirements(manager: "TaskStateManager", task_id: str, text: str) -> Outcome:
    """Replace what `### Requirements` holds (in the Context section) with `text`, made safe to sit
    there (it cannot start a heading or leave a fence open). A file without that subsection is
    refused, naming where to add it."""
    task_id = check_id(task_id)
    block = check_requirements(manager, task_id, text)
    outcome = Outcome(task_id)
    with manager.changing([task_id], outcome) as pending:
        doc = manager.load(task_id)
        region = _region(doc)
        if doc.body_text(region).strip() == block.strip():
            return outcome
        written = TaskDocument(apply_edits(doc.text, [replace_content(doc, region, block)]), doc.path)
        again = written.find_subsection(written.sections.get("context"), "requirements")
        if again is None or written.body_text(again).strip() != block.strip():
            raise doc.error("the requirements would not read back as written; nothing was written", region.start)
        pending.files.write(manager.path(task_id), written.text)
        outcome.fields.append("requirements rewritten")
    return outcome


def check_requirements(manager: "TaskStateManager", task_id: str, text: str) -> str:
    """The block `set_requirements` would write, or the error it would raise, writing nothing (so
    that `set --req` with other changes refuses before any of them is made)."""
    from specflux.format.render import inert

    block = inert(text)
    if not block:
        raise UsageError("requirements need some text")
    _region(manager.load(check_id(task_id)))
    return block


def _region(doc: TaskDocument):
    region = doc.find_subsection(doc.sections.get("context"), "requirements")
    if region is None:
        raise doc.error("no `### Requirements` under the Context section to write into; add the heading by hand",
                        doc.sections["context"].start if "context" in doc.sections else 0)
    return region
