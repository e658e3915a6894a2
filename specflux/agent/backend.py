"""The backend protocol: what a session asks for, and what it gives back.

One method per backend family (`Backend.run`); the task side is reached only through `TaskHooks`,
so backends know nothing about task files, stores or git.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    from specflux.agent.tools import Toolbox

StopReason = Literal["end_session", "end_turn", "max_turns", "token_budget", "error", "interrupted"]


@dataclass
class Usage:
    """Tokens spent by a session, summed over every response."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def add(self, other: Usage) -> Usage:
        """Add `other` into this one (in place) and return self."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    @property
    def total(self) -> int:
        """Every token read or written: the API counts cached input apart from `input_tokens`."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_input_tokens
            + self.cache_creation_input_tokens
        )


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


@dataclass
class SessionRequest:
    """What one agent session is asked to do."""

    system: str  # the session protocol and rules
    context: str  # the task context, sent as the first user message
    model: str
    max_turns: int
    token_budget: int | None = None  # stop once `Usage.total` exceeds it
    max_tokens: int = 8192  # per response
    task_id: str | None = None  # written into recordings; nothing else depends on it


@dataclass
class SessionOutcome:
    """How a session ended and what it cost."""

    stop: StopReason
    handoff: Handoff | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    duration_ms: int = 0
    recording: Path | None = None
    setup_error: bool = False  # the agent could not start at all (a mistake in the set-up, not the session)


class TaskHooks(Protocol):
    """The task side of a session, implemented by the session runner."""

    def check_criterion(self, index: int) -> str:
        """Tick criterion `index` (1-based); raise SpecfluxError for a bad index."""
        ...

    def end_session(self, handoff: Handoff) -> str:
        """Record the hand-off; raise SpecfluxError to refuse it (the agent may try again)."""
        ...


class Backend(Protocol):
    """Runs one agent session with the given tools."""

    def run(self, request: SessionRequest, toolbox: Toolbox) -> SessionOutcome: ...
