"""What an agent hands back to its task, below both the backends and the tools: the `end_session`
hand-off (Handoff, with its ChainOutputIn) and TaskHooks, the task side a Toolbox calls into.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator


class ChainOutputIn(BaseModel):
    """The chain output an agent hands over when its task is done."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1)
    downstream: str = ""


class Handoff(BaseModel):
    """The input of the `end_session` tool: the session's progress-log entry."""

    model_config = ConfigDict(extra="forbid")

    did: list[str] = Field(min_length=1)
    issues: str = ""
    next: str = ""
    chain_output: ChainOutputIn | None = None

    @field_validator("did", mode="before")
    @classmethod
    def _one_string_is_one_item(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


class TaskHooks(Protocol):
    """The task side of a session, implemented by the session runner."""

    def check_criterion(self, index: int) -> str:
        """Tick criterion `index` (1-based); raise SpecfluxError for a bad index."""
        ...

    def end_session(self, handoff: Handoff) -> str:
        """Record the hand-off; raise SpecfluxError to refuse it (the agent may try again)."""
        ...
