"""The values the store hands around: a task's `list` row, what a write did, what to commit, the
writes gathered for one change, and `TaskStore`, what archiving and chain wiring need of the manager.

They sit below `manager`, `archive` and `chain` so that the manager imports those two and neither
imports it back.
"""

from __future__ import annotations

from specflux.base.records import Factory, record
from pathlib import Path
from typing import TYPE_CHECKING, ContextManager, Iterable, Protocol

from specflux.base.errors import SpecfluxError
from specflux.base.files import ChangeSet

if TYPE_CHECKING:
    from specflux.format.document import TaskDocument
    from specflux.store.workspace import Workspace
    from specflux.vcs.git import Git


@record
class TaskSummary:
    """One row of `list`: cheap to compute, never raises. `error` is set for a broken file."""

    id: str
    path: str  # as the user sees it: relative to the workspace root
    size: int
    title: str = ""
    status: str = ""
    done: int = 0
    total: int = 0
    sessions: int = 0
    dependencies: list[str] = Factory(list)
    error: SpecfluxError | None = None
    warnings: list[str] = Factory(list)


@record
class Outcome:
    """What a write operation did: files changed, the commit (if any), the session number."""

    task_id: str
    changed: list[Path] = Factory(list)
    commit: str = ""
    session: int | None = None
    status: str | None = None
    wired: list[str] = Factory(list)
    archived: list[str] = Factory(list)
    notices: list[str] = Factory(list)
    criteria: list[tuple[int, str, bool]] = Factory(list)  # (index, text, changed) of check/uncheck
    fields: list[str] = Factory(list)  # what `set` changed, one phrase each


@record(frozen=True)
class CommitRequest:
    subject: str
    trailers: dict[str, str]
    extra_paths: tuple[Path, ...] = ()  # files beyond the task files (an agent's work)


@record
class Pending:
    files: ChangeSet
    commit: CommitRequest | None = None


class TaskStore(Protocol):
    """What `archive` and `chain` use of the `TaskStateManager`: its workspace and repository,
    reading tasks, and making one locked change."""

    ws: Workspace

    @property
    def git(self) -> Git | None: ...

    def path(self, task_id: str) -> Path: ...

    def load(self, task_id: str, pending: ChangeSet | None = None) -> TaskDocument: ...

    def summaries(self, status: str | None = None, *, cached: bool = False) -> list[TaskSummary]: ...

    def changing(self, task_ids: Iterable[str], outcome: Outcome) -> ContextManager[Pending]: ...
