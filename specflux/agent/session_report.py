"""What one agent session did, as `run_session` reports it: how it stopped, its progress-log
entry, the task's status, the commit, and every notice to show."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specflux.agent.backend import SessionOutcome
from specflux.base.records import Factory, record

if TYPE_CHECKING:
    from specflux.agent.handoff import Handoff  # (pydantic: imported where a hand-off is read)
    from specflux.agent.plain_inputs import WrittenHandoff


@record
class SessionReport:
    task_id: str
    stop: str
    session: int | None = None
    error: str | None = None
    status: str | None = None
    commit: str = ""
    changed: list[str] = Factory(list)
    wired: list[str] = Factory(list)
    outcome: SessionOutcome | None = None
    notices: list[str] = Factory(list)
    archived: list[str] = Factory(list)
    restored: bool = False  # the agent broke or deleted its own task file, which was put back
    handoff: Handoff | WrittenHandoff | None = None  # the agent's end_session, or its task file's (a run decides)
    review: dict | None = None  # a reviewer session's verdict (submit_review), or None
    uncommitted: list[str] | None = None  # right after its commit, as `flow.steps.evidence.uncommitted` says
    after: tuple[str, dict] | None = None  # HEAD and `git status` right after its commit, where known

    @property
    def ok(self) -> bool:
        return self.stop in ("end_session", "end_turn")
