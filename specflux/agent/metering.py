"""Which budgets an agent's output can feed. A token or money budget counts what each session says
it spent; an agent whose output says nothing specflux reads cannot be held to one, and a run
says so when it starts (a budget in money is refused unless the user says `--allow-unmetered`).

- The API backend (`anthropic`, `replay`): every response carries its usage: both budgets.
- A preset whose `usage` names a reader (claude, codex, gemini, aider, opencode): tokens; money
  where the CLI reports its own cost (claude, aider, opencode) or the pricing table prices the
  model: gemini's output names its model, codex's does not (only with `--model`, of a model the
  table knows, is a codex session priced).
- `--agent command`, and `[agents.NAME]` whose `usage` is "auto" (the default): no reader is
  named; what the output happens to say in a shape some reader knows is counted, and a session
  that says nothing is not. Neither budget can be relied on.

A session whose usage turned out unknown says so after it (usage_checks.uncounted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specflux.base.errors import UsageError
from specflux.base.records import record

if TYPE_CHECKING:
    from specflux.agent.presets import Preset
    from specflux.agent.pricing import Pricing

OWN_COST = ("claude", "aider", "opencode")  # readers of CLIs that print what the session cost
NAMES_MODEL = ("claude", "gemini", "aider", "opencode")  # readers of output that names its model
ALLOW = "--allow-unmetered"
READERS_HINT = ('name the CLI\'s reader as an [agents.NAME] in .specflux/config.toml (usage = "claude", '
                '"codex", "gemini", "aider" or "opencode")')


@record(frozen=True)
class Unfed:
    """What an agent's output cannot feed, and why."""

    tokens: bool
    money: bool
    why: str


def unfed(preset: "Preset | None", model: str | None, pricing: "Pricing") -> Unfed | None:
    """What the output of the agent `preset` stands for (None: the API backend) cannot feed: a
    token budget, a budget in money, or both; None when it feeds both."""
    if preset is None:
        return None
    who = "--agent command" if preset.name == "command" else f"--agent {preset.name}"
    if preset.usage == "auto":
        return Unfed(True, True, f"{who} names no usage reader, so only what its output happens to print in "
                                 "a shape specflux reads is counted, and a session that prints none is not")
    if preset.usage in OWN_COST:
        return None
    if preset.usage not in NAMES_MODEL and not model:
        return Unfed(False, True, f"{who}'s output names no model and no cost, so the pricing table cannot "
                                  "price its sessions (name the model with --model)")
    if model and pricing.price(model) is None:
        return Unfed(False, True, f"{who}'s output has no cost, and the pricing table does not know the model "
                                  f"{model!r} (add [pricing.\"{model}\"] to .specflux/config.toml)")
    return None


def announce(found: Unfed | None, token_budget: int | None, budget_usd: float | None, allowed: bool,
             money_source: str = "--budget-usd", whose: str = "the run's") -> str | None:
    """The line a run says when it starts with a budget its agent cannot feed (None when there is
    none); UsageError for a budget in money that is not `allowed` (`money_source` names where the
    budget came from)."""
    if found is None:
        return None
    money = budget_usd if found.money else None
    tokens = token_budget if found.tokens else None
    if money is not None and not allowed:
        raise UsageError(f"{money_source} ${money:,.2f} cannot be enforced: {found.why}. Either "
                         f"{READERS_HINT}, or pass {ALLOW} to run with a budget in money that may not bind")
    budgets = ([f"token budget ({tokens:,})"] if tokens is not None else []) + \
        ([f"budget in money (${money:,.2f})"] if money is not None else [])
    if not budgets:
        return None
    return f"{whose} {' and '.join(budgets)} may not bind: {found.why}"


def for_run(manager, kind: str, cmd: str | None, model: str | None, allowed: bool, token_budget: int | None,
            budget_usd: float | None, flag_usd: bool, whose: str = "the run's") -> str | None:
    """`announce` for a run (or, `whose`, a session) whose agent is `--agent kind` (`cmd`, `model`)
    under these budgets (`flag_usd`: the money one came from --budget-usd, not `[flow] budget_usd`)."""
    from specflux.agent.presets import is_command_agent, resolve
    from specflux.agent.pricing import Pricing

    if not is_command_agent(kind) or (token_budget is None and budget_usd is None):
        return None
    found = unfed(resolve(kind, cmd, manager.ws.config.agents), model, Pricing(manager.ws.config.pricing))
    return announce(found, token_budget, budget_usd, allowed, "--budget-usd" if flag_usd else "[flow] budget_usd",
                    whose)
