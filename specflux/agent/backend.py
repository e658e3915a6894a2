"""The backend protocol: what a session asks for, and what it gives back.

One method per backend family (`Backend.run`); the task side is reached only through the
toolbox's `TaskHooks` (handoff.py), so backends know nothing about task files, stores or git.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from specflux.base.records import Factory, record

if TYPE_CHECKING:
    from specflux.agent.handoff import Handoff  # (pydantic: ~0.1 s of a worker's start, paid when a hand-off is read)
    from specflux.agent.tools import Toolbox

StopReason = Literal["end_session", "end_turn", "max_turns", "token_budget", "budget_usd", "error", "interrupted"]
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


@record
class Usage:
    """What a session spent, summed over every response: tokens, the model, and the money.

    `known` is False when the agent printed nothing its usage could be read from, or printed a
    number that is not believed (usage_checks.py; `why` then says which): such a session says
    `unknown`, never 0 tokens. `cost_usd` is the CLI's own figure where it reports one
    (`cost_reported`), else the pricing table's (agent/pricing.py), else None (a model the table
    does not know)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    model: str | None = None
    cost_usd: float | None = None
    cost_reported: bool = False
    known: bool = True
    why: str = ""  # why the usage is unknown, when there is more to say than "no usage printed"

    @classmethod
    def unknown(cls, why: str = "") -> Usage:
        return cls(known=False, why=why)

    def add(self, other: Usage) -> Usage:
        """Add `other` into this one (in place) and return self."""
        for name in TOKEN_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.model = other.model or self.model
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd
            self.cost_reported = self.cost_reported or other.cost_reported
        self.known = self.known and other.known
        self.why = self.why or other.why
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

    @property
    def budgeted(self) -> int:
        """The tokens a token budget counts: input, output and cache writes. A cache read re-reads
        a token counted once already, when it was written or sent (an agent CLI's session reads
        its whole context again on every turn: a 30-turn Claude Code session reads ~1M cached
        tokens); the money budget prices cache reads at what they cost."""
        return self.input_tokens + self.output_tokens + self.cache_creation_input_tokens


@record
class SessionRequest:
    """What one agent session is asked to do."""

    system: str  # the session protocol and rules
    context: str  # the task context, sent as the first user message
    model: str
    max_turns: int
    token_budget: int | None = None  # stop once `Usage.budgeted` exceeds it
    budget_usd: float | None = None  # stop once `Usage.cost_usd` exceeds it
    pricing: Any = None  # a `pricing.Pricing` for the cost of usage the agent does not price itself
    max_tokens: int = 8192  # per response
    task_id: str | None = None  # written into recordings; nothing else depends on it

    def over_budget(self, usage: Usage) -> "tuple[StopReason, str] | None":
        """("token_budget" or "budget_usd", what was spent against what) once `usage` is past
        this session's token or money budget; None while it is within both. The money is the
        pricing table's figure, else the agent's own (`cost_reported`); unknown usage and unknown
        money pass (said after the session: usage_checks.uncounted)."""
        if not usage.known:
            return None
        if self.token_budget is not None and usage.budgeted > self.token_budget:
            return "token_budget", f"used {usage.budgeted:,} tokens, past its budget of {self.token_budget:,}"
        if self.budget_usd is not None:
            cost = self.pricing.cost(usage) if self.pricing is not None else \
                (usage.cost_usd if usage.cost_reported else None)
            if cost is not None and cost > self.budget_usd:
                return "budget_usd", f"spent ${cost:.4f}, past its budget of ${self.budget_usd:.4f}"
        return None


@record
class SessionOutcome:
    """How a session ended and what it cost."""

    stop: StopReason
    handoff: Handoff | None = None
    error: str | None = None
    usage: Usage = Factory(Usage)
    turns: int = 0
    duration_ms: int = 0
    recording: Path | None = None
    setup_error: bool = False  # the agent could not start at all (a mistake in the set-up, not the session)


class Backend(Protocol):
    """Runs one agent session with the given tools."""

    def run(self, request: SessionRequest, toolbox: Toolbox) -> SessionOutcome: ...
