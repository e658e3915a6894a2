"""The backend protocol: what a session asks for, and what it gives back.

One method per backend family (`Backend.run`); the task side is reached only through the
toolbox's `TaskHooks` (handoff.py), so backends know nothing about task files, stores or git.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from specflux.agent.handoff import Handoff

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


class Backend(Protocol):
    """Runs one agent session with the given tools."""

    def run(self, request: SessionRequest, toolbox: Toolbox) -> SessionOutcome: ...
