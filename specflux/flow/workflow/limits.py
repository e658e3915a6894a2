"""The limits every run has, whether the user set them or not.

A loop edge without `max_iterations` is easy to write and, left alone, runs until the account is
empty. So a run is finite by default:

- **Steps per task** (edge workflows): a task may take at most as many steps as its workflow's
  edges allow it, counting `max_iterations` where an edge has one and DEFAULT_EDGE_LIMIT where it
  has none (plus the merges of a parallel run). A task that reaches it fails (`max_iterations`),
  and the run goes on with the next.
- **Steps per run**: the tasks times that allowance, between FLOOR and CEILING, unless
  `--max-iterations` or `[flow] max_iterations` says otherwise. The run then fails `max_iterations`.
- **Tokens per run**: `[flow] token_budget` (config.py has the default) unless `--token-budget`.
- **Money per run**: `[flow] budget_usd` unless `--budget-usd` (none by default): what the sessions
  cost, priced by agent/pricing.py (a session whose cost is not known counts nothing: said in
  `flow status`).
- **Rounds without change**: the same task going round `[flow] stall_rounds` times with the same
  tree, the same test result and the same review issues ends the run `stalled`.

Every limit that ends a run says which it is and the numbers (`failureReason`, `failureDetail`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from specflux.flow.state import BUDGET_KEYS

if TYPE_CHECKING:
    from specflux.flow.workflow.workflow_file import Workflow

FLOOR, CEILING = 10, 1000  # bounds of the derived run cap (steps)
DEFAULT_EDGE_LIMIT = 3  # what an edge without max_iterations counts for in a task's allowance
DEFAULT_TASK_STEPS = 12  # a task's allowance under Python decision logic (the seed's queue: 12)
MERGE_ALLOWANCE = 7  # a parallel run's merges: 1 + 2 conflicts x (a new coder, a review, a merge)
ERROR_ALLOWANCE = 2  # agent errors retried (rate limits, overloads, timeouts of a review)


def task_step_limit(workflow: "Workflow", parallel: int = 1) -> int | None:
    """The steps one task may take under `workflow` (None for Python decision logic, which
    requests its own steps: only the run cap applies there)."""
    if workflow.spec:
        return None
    steps = 1 + ERROR_ALLOWANCE + sum(edge.max_iterations or DEFAULT_EDGE_LIMIT for edge in workflow.edges
                                      if edge.from_ != "planner")
    return steps + (MERGE_ALLOWANCE if parallel > 1 else 0)


def default_run_cap(tasks: int, per_task: int | None) -> int:
    """The run's cap on steps when nobody set one: its tasks times their allowance, bounded."""
    return max(FLOOR, min(CEILING, max(1, tasks) * (per_task or DEFAULT_TASK_STEPS) + 1))


def limit_reached(state: dict[str, Any], step: dict[str, Any] | None = None,
                  events: Callable[[], Iterable[dict[str, Any]]] | None = None) -> str | None:
    """The limit that starting `step` would pass, as `reason: what happened, with the numbers`,
    or None: the run's step cap, its token budget, or the step's task stalled. With `events` (the
    run's log, read only when a budget is reached), a budget's reason says by how much the
    sessions in flight went past it (`overshoot`)."""
    reason = _limit(state, step)
    if reason and events is not None and reason.startswith(("budget_usd:", "token_budget:")):
        over = overshoot(events, state)
        reason += f"; {over}" if over else ""
    return reason


def _limit(state: dict[str, Any], step: dict[str, Any] | None) -> str | None:
    cap = state.get("maxIterations")
    if cap and state["iteration"] >= cap:
        return f"max_iterations: the run took {state['iteration']} steps, its cap (maxIterations) is {cap}"
    budget = state.get("tokenBudget")
    used = sum(state["metrics"][k] for k in BUDGET_KEYS)
    if budget and used >= budget:
        return f"token_budget: the run used {used:,} tokens of its budget of {budget:,}"
    budget_usd = state.get("budgetUsd")
    spent = state["metrics"].get("costUsd", 0.0)
    if budget_usd and spent >= budget_usd:
        return f"budget_usd: the run spent ${spent:,.4f} of its budget of ${budget_usd:,.2f}"
    rounds = state.get("stallRounds")
    task_id = (step or {}).get("taskId")
    if rounds and task_id and (step or {}).get("kind") == "coder":
        seen = (state.get("stall") or {}).get(task_id) or {}
        if seen.get("rounds", 0) >= rounds:
            return (f"stalled: task {task_id} went {seen['rounds'] + 1} coder rounds in a row with no change in the "
                    f"repository's tree, the tests' result or the reviewer's issues (stall_rounds = {rounds})")
    return None


def overshoot(events: Callable[[], Iterable[dict[str, Any]]], state: dict[str, Any]) -> str | None:
    """How far past its money or token budget the run went, and how many sessions were in flight
    when it got there (started before the step that reached the budget ended, ended with it or
    after): `over the budget by $0.1100: 3 sessions were in flight when it was reached`. None when
    the run is within its budgets. `events()` gives the run's events, read only when it is not."""
    metrics = state.get("metrics") or {}
    budget_usd, budget_tokens = state.get("budgetUsd"), state.get("tokenBudget")
    used = sum(metrics.get(k, 0) for k in BUDGET_KEYS)
    if budget_usd and metrics.get("costUsd", 0.0) > budget_usd + 1e-9:
        money, budget, over = True, budget_usd, f"${metrics['costUsd'] - budget_usd:,.4f}"
    elif budget_tokens and used > budget_tokens:
        money, budget, over = False, budget_tokens, f"{used - budget_tokens:,} tokens"
    else:
        return None
    started: dict[str, int] = {}
    sessions: list[tuple[int, int]] = []  # (started, finished) seq of each session that spent
    spent, reached = 0.0, None
    for e in events():
        if e["type"] == "step_started":
            started[e["stepId"]] = e["seq"]
        elif e["type"] == "step_finished" and e.get("usage") and not e["usage"].get("unknown"):
            sessions.append((started.get(e["stepId"], e["seq"]), e["seq"]))
            spent = round(spent + _spent(e["usage"], money), 6)
            if reached is None and spent >= budget:
                reached = e["seq"]
    if reached is None:
        return f"over the budget by {over}"
    n = sum(1 for began, ended in sessions if began < reached <= ended)
    return f"over the budget by {over}: {n} session{'s were' if n != 1 else ' was'} in flight when it was reached"


def _spent(usage: dict[str, Any], money: bool) -> float:
    """What one session's usage counts against the money (or else the token) budget."""
    if money:
        return usage.get("costUsd") or 0.0
    return sum(usage.get(k, 0) or 0 for k in BUDGET_KEYS)


def budget_left(state: dict[str, Any]) -> tuple[int | None, float | None]:
    """What the run may still spend: tokens and US dollars (None where it has no such budget)."""
    metrics = state.get("metrics") or {}
    tokens, usd = state.get("tokenBudget"), state.get("budgetUsd")
    return (tokens - sum(metrics.get(k, 0) for k in BUDGET_KEYS) if tokens else None,
            usd - metrics.get("costUsd", 0.0) if usd else None)
