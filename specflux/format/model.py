"""The values a task-state file holds, as plain value classes (base/records.py: `dataclasses` costs `show` ~6 ms of imports). No paths, no locks, no git here.

Standard library only, on purpose: `show`, `session` and `context` import this module, and
pydantic cost ~100 ms of their start-up. Nothing here validates: `document.TaskDocument` checks
what it reads before it builds these, and the agent tools validate what a model sends
(agent/tools.py). Keyword arguments only, as with the pydantic models these replace.
"""

from __future__ import annotations

from specflux.base.records import Factory, as_dict, record
from typing import Any, Literal, Optional, Union

Status = Literal["pending", "in_progress", "review", "complete", "failed", "blocked"]
TaskId = Union[int, str]


class _Dump:
    """`model_dump()` as the pydantic models had it: the fields as a dict, nested values as dicts."""

    __slots__ = ()

    def model_dump(self, *, exclude: set[str] | frozenset[str] | None = None) -> dict[str, Any]:
        out = as_dict(self)
        for key in exclude or ():
            out.pop(key, None)
        return out


@record(frozen=True, kw_only=True)
class Criterion(_Dump):
    index: int  # 1-based, in document order
    text: str
    checked: bool
    line: int
    depth: int = 0  # 0 for a top-level item, more for nested sub-items


@record(frozen=True, kw_only=True)
class Session(_Dump):
    number: int
    timestamp: Optional[str]
    did: list[str]
    issues: str
    next: str
    line: int
    usage: Optional[dict[str, Any]] = None  # tokens, model, cost_usd of an agent session ({"unknown": True}: not read)


@record(kw_only=True)
class SessionInput(_Dump):
    """What a caller hands over to append a session."""

    did: list[str]
    issues: str = ""
    next: str = ""
    timestamp: Optional[str] = None  # "YYYY-MM-DD HH:MM"; now when omitted


@record(frozen=True, kw_only=True)
class ChainInput(_Dump):
    task_id: str
    title: str
    body: str
    line: int


@record(frozen=True, kw_only=True)
class ChainOutput(_Dump):
    summary: str
    downstream: str
    body: str


@record(frozen=True, kw_only=True)
class ArchivedSummary(_Dump):
    first: int
    last: int
    duration: str
    accomplishments: str
    commits: list[str]
    more_commits: int = 0  # commits counted but not listed ("… (12 more)")
    archive: Optional[str]
    line: int


@record(kw_only=True)
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
    criteria: list[Criterion] = Factory(list)
    chain_inputs: list[ChainInput] = Factory(list)
    archived_summary: Optional[ArchivedSummary] = None
    sessions: list[Session] = Factory(list)
    chain_output: Optional[ChainOutput] = None

    @property
    def done(self) -> int:
        return sum(c.checked for c in self.criteria)
