"""What an importer returns: task drafts and located warnings, nothing written.

Every importer is a pure function `parse(text, path) -> ImportResult` (the Backlog.md one takes a
folder's files as a mapping): no disk, no workspace. `specflux.importers.apply` turns drafts into
task files through the TaskStateManager.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("pending", "in_progress", "review", "complete", "failed", "blocked")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_TICKS = re.compile(r"\s*`{3,}")


@dataclass
class TaskDraft:
    """One task read from a source. `task_id` is the specflux id (the source's own id where it is
    a valid id, e.g. `T001`, `BACK-200`, `3.1`); `dependencies` are specflux ids too."""

    task_id: str
    title: str
    requirements: str = ""
    criteria: list[str] = field(default_factory=list)
    checked: list[bool] = field(default_factory=list)  # one per criterion
    status: str = "pending"
    dependencies: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)  # source {path, line}|{path, id}, phase, parallel, ...
    line: int | None = None  # where the task starts in its source file
    kept: int = 0  # lines of the source no field took, kept verbatim in `requirements` (see `verbatim`)

    def __post_init__(self) -> None:
        if not _ID.fullmatch(self.task_id):
            raise ValueError(f"not a task id: {self.task_id!r}")
        if self.status not in STATUSES:
            raise ValueError(f"not a status: {self.status!r}")
        if len(self.checked) < len(self.criteria):
            self.checked = self.checked + [False] * (len(self.criteria) - len(self.checked))


@dataclass(frozen=True)
class ImportWarning:
    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" if self.line else f"{self.path}: {self.message}"


@dataclass
class ImportResult:
    format: str  # "spec-kit", "backlog", "taskmaster", "harness"
    drafts: list[TaskDraft] = field(default_factory=list)
    warnings: list[ImportWarning] = field(default_factory=list)


def to_task_id(raw: str) -> str | None:
    """The source's id as a specflux id, or None when it cannot be one (`#12` -> `12`)."""
    candidate = str(raw).strip().lstrip("#")
    return candidate if _ID.fullmatch(candidate) else None


def verbatim(path: str, lines: list) -> str:
    """Lines of the source no field took (objects with `number` and `text`), for the end of a
    task's requirements: a note saying where they come from, then the lines as written, in a code
    fence longer than any inside them (so that nothing in them is a heading of the task file)."""
    if not lines:
        return ""
    longest = max((len(m.group(0)) for line in lines for m in [_TICKS.match(line.text)] if m), default=0)
    fence = "`" * max(3, longest + 1)
    first, last = lines[0].number, lines[-1].number
    where = f"line {first}" if first == last else f"lines {first}-{last}"
    return "\n".join([f"From the source ({path}, {where}), kept verbatim:", "", fence + "markdown",
                      *(line.text for line in lines), fence])
