"""The values a task-state file holds, as plain dataclasses. No paths, no locks, no git here.

Standard library only, on purpose: `show`, `session` and `context` import this module, and
pydantic cost ~100 ms of their start-up. Nothing here validates: `document.TaskDocument` checks
what it reads before it builds these, and the agent tools validate what a model sends
(agent/tools.py). Keyword arguments only, as with the pydantic models these replace.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Optional, Union

Status = Literal["pending", "in_progress", "review", "complete", "failed", "blocked"]
TaskId = Union[int, str]


class _Dump:
    """`model_dump()` as the pydantic models had it: the fields as a dict, nested values as dicts."""

    __slots__ = ()

    def model_dump(self, *, exclude: set[str] | frozenset[str] | None = None) -> dict[str, Any]:
        out = asdict(self)
        for key in exclude or ():
            out.pop(key, None)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Criterion(_Dump):
    index: int  # 1-based, in document order
    text: str
    checked: bool
    line: int
    depth: int = 0  # 0 for a top-level item, more for nested sub-items


@dataclass(frozen=True, slots=True, kw_only=True)
class Session(_Dump):
    number: int
    timestamp: Optional[str]
    did: list[str]
    issues: str
    next: str
    line: int
    usage: Optional[dict[str, Any]] = None  # tokens, model, cost_usd of an agent session ({"unknown": True}: not read)


@dataclass(slots=True, kw_only=True)
class SessionInput(_Dump):
    """What a caller hands over to append a session."""

    did: list[str]
    issues: str = ""
    next: str = ""
    timestamp: Optional[str] = None  # "YYYY-MM-DD HH:MM"; now when omitted


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainInput(_Dump):
    task_id: str
    title: str
    body: str
    line: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainOutput(_Dump):
    summary: str
    downstream: str
    body: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchivedSummary(_Dump):
    first: int
    last: int
    duration: str
    accomplishments: str
    commits: list[str]
    more_commits: int = 0  # commits counted but not listed ("… (12 more)")
    archive: Optional[str]
    line: int


@dataclass(slots=True, kw_only=True)
class TaskState(_Dump):
    """A parsed task-state file."""

    id: str
    title: str
    metadata: dict[str, Any]  # the JSON block as written
    status: Status
    dependencies: list[str]
    epic: Optional[str] = None
    repository: Optional[str] = None
    requirements: str = ""
    criteria: list[Criterion] = field(default_factory=list)
    chain_inputs: list[ChainInput] = field(default_factory=list)
    archived_summary: Optional[ArchivedSummary] = None
    sessions: list[Session] = field(default_factory=list)
    chain_output: Optional[ChainOutput] = None

    @property
    def done(self) -> int:
        return sum(c.checked for c in self.criteria)
