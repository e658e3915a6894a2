"""The values a task-state file holds, as pydantic models. No paths, no locks, no git here."""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["pending", "in_progress", "review", "complete", "failed", "blocked"]
TaskId = Union[int, str]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True)


class Metadata(BaseModel):
    """The JSON block of section 0. Unknown keys are kept, in the order they were written."""

    model_config = ConfigDict(extra="allow")

    task_id: TaskId
    status: Status
    total_sessions: int = 0
    epic_id: Optional[TaskId] = None
    dependencies: list[TaskId] = Field(default_factory=list)


class Criterion(_Value):
    index: int  # 1-based, in document order
    text: str
    checked: bool
    line: int
    depth: int = 0  # 0 for a top-level item, more for nested sub-items


class Session(_Value):
    number: int
    timestamp: Optional[str]
    did: list[str]
    issues: str
    next: str
    line: int
    usage: Optional[dict[str, int]] = None  # token counts of an agent session (duration: see `log`)


class SessionInput(BaseModel):
    """What a caller hands over to append a session."""

    did: list[str]
    issues: str = ""
    next: str = ""
    timestamp: Optional[str] = None  # "YYYY-MM-DD HH:MM"; now when omitted


class ChainInput(_Value):
    task_id: str
    title: str
    body: str
    line: int


class ChainOutput(_Value):
    summary: str
    downstream: str
    body: str


class ArchivedSummary(_Value):
    first: int
    last: int
    duration: str
    accomplishments: str
    commits: list[str]
    more_commits: int = 0  # commits counted but not listed ("… (12 more)")
    archive: Optional[str]
    line: int


class TaskState(BaseModel):
    """A parsed task-state file."""

    id: str
    title: str
    metadata: dict[str, Any]  # the JSON block as written
    status: Status
    dependencies: list[str]
    epic: Optional[str] = None
    repository: Optional[str] = None
    requirements: str = ""
    criteria: list[Criterion] = Field(default_factory=list)
    chain_inputs: list[ChainInput] = Field(default_factory=list)
    archived_summary: Optional[ArchivedSummary] = None
    sessions: list[Session] = Field(default_factory=list)
    chain_output: Optional[ChainOutput] = None

    @property
    def done(self) -> int:
        return sum(c.checked for c in self.criteria)
