"""What is left of a run's budget, shared by the sessions of its lanes.

A parallel run's lanes start their sessions at once, and an agent says what a session cost only as
it goes (or at its end). So before a lane starts a session, the run gives it a share of what is
left: the budget, less what the run has spent, less the shares of the sessions still in flight,
split among the lanes that are free. A session starts only when its share is more than nothing;
otherwise the lane waits for the sessions in flight, and when none is left the run ends on its
limit. A run thus goes over its budget by at most what the sessions in flight spent past their
shares, and says by how much (limits.py `overshoot`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specflux.flow.workflow.limits import budget_left

SESSION_KINDS = ("coder", "reviewer")  # steps that are agent sessions (validate and merge spend nothing)


@dataclass(frozen=True)
class Share:
    tokens: int | None = None  # None: no token budget
    usd: float | None = None  # None: no money budget


@dataclass
class Shares:
    """The shares held by the sessions in flight, by step id."""

    held: dict[str, Share] = field(default_factory=dict)

    def take(self, step: dict[str, Any], state: dict[str, Any], free_lanes: int) -> Share | None:
        """The share of the run's budgets for `step`, held until `give_back`; None when nothing is
        left for it (the budget is spent or spoken for by the sessions in flight). A step that is
        no session gets an empty share."""
        if step.get("kind") not in SESSION_KINDS:
            return Share()
        lanes = max(1, free_lanes)
        tokens_left, usd_left = budget_left(state)
        tokens = usd = None
        if tokens_left is not None:
            left = tokens_left - sum(s.tokens or 0 for s in self.held.values())
            if left <= 0:
                return None
            tokens = max(1, left // lanes)
        if usd_left is not None:
            left_usd = usd_left - sum(s.usd or 0.0 for s in self.held.values())
            if left_usd <= 1e-9:
                return None
            usd = left_usd / lanes
        share = Share(tokens, usd)
        self.held[step["stepId"]] = share
        return share

    def give_back(self, step_id: str) -> None:
        """The step finished (what it spent is in the run's metrics now) or never ran."""
        self.held.pop(step_id, None)

    def clear(self) -> None:
        self.held.clear()
