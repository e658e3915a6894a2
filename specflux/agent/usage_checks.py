"""Numbers from an agent are data, not truth: which token counts and costs an agent printed are
believed, and what is said when one is not.

A token count is believed when it is a number, finite, not negative and at most `MAX_TOKENS`; a
cost when it is a number, finite, not negative and at most `MAX_COST_USD`. Anything else raises
`Untrusted`, naming the field and the value as the agent printed it (`1e400`, `NaN`, `-5`); the
reader then makes the whole session's usage unknown (an agent that got one number wrong is not
believed on the others), and `Usage.why` says why.

The bounds are far past anything real, so that no true report is ever doubted, and low enough
that a number past them cannot be one: ten billion tokens is ten thousand times the largest
context window of 2026 (one million tokens) read again on every turn of a ten-thousand-turn
session, and more than a day of the fastest streaming; $100,000 is more than those ten billion
tokens cost at the dearest price in the shipped table (Opus' $15 per million input tokens costs
$150,000 only for tokens no session sends). A number past them is a broken or lying agent, and
believed it would either end the run at once on a budget it never spent or (negative) give a
budget back.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specflux.agent.backend import Usage

MAX_TOKENS = 10_000_000_000  # per count of one report: see above
MAX_COST_USD = 100_000.0  # per session: see above
_SHOWN = 40  # characters of a value quoted in a message


class Untrusted(ValueError):
    """A number the agent printed that is not believed; its message says which and why."""


class _Printed(float):
    """A JSON number as a float that remembers how the agent wrote it (`1e400`, `NaN`)."""

    text: str


def _printed(text: str) -> float:
    number = _Printed(text)
    number.text = text
    return number


def loads(text: str) -> Any:
    """`json.loads`, with each non-integer number remembering how it was written (for the
    message naming it); `NaN` and `Infinity` parse, to be refused where they are read."""
    return json.loads(text, parse_float=_printed, parse_constant=_printed)


def shown(value: object, printed: str | None = None) -> str:
    """`value` as the agent wrote it (`printed`, where the caller knows), cut short."""
    text = printed or getattr(value, "text", None) or (json.dumps(value) if isinstance(value, str) else repr(value))
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _number(name: str, value: object, printed: str | None = None) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Untrusted(f"{name} is {shown(value, printed)}, not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise Untrusted(f"{name} is {shown(value, printed)}, not a finite number")
    if value < 0:
        raise Untrusted(f"{name} is {shown(value, printed)}, a negative number")
    return value


def tokens(name: str, value: object, printed: str | None = None) -> int:
    """A token count as reported (None or missing: 0); Untrusted unless believable. `printed`:
    how the agent wrote it, where it was not JSON (aider's `4.6k`)."""
    if value is None:
        return 0
    number = _number(name, value, printed)
    if number > MAX_TOKENS:
        raise Untrusted(f"{name} is {shown(value, printed)}, more than the {MAX_TOKENS:,} tokens "
                        "any session could spend")
    return int(number)


def money(name: str, value: object, printed: str | None = None) -> float | None:
    """A cost in US dollars as reported (None or missing: None, not reported); Untrusted unless
    believable."""
    if value is None:
        return None
    number = _number(name, value, printed)
    if number > MAX_COST_USD:
        raise Untrusted(f"{name} is {shown(value, printed)}, more than the ${MAX_COST_USD:,.0f} any session could cost")
    return float(number)


def failed(error: BaseException) -> str:
    """What is said when reading the usage failed in an unforeseen way (a bug, never the agent's
    fault alone): the session goes on, its usage unknown."""
    text = str(error)
    return f"the usage reader failed on the agent's output ({type(error).__name__}: {text[:_SHOWN * 2]})"


def uncounted(usage: "Usage", token_budget: int | None, budget_usd: float | None) -> str | None:
    """What is said of a session whose usage is unknown: why, and which of its budgets could not
    count it; None when its usage is known, or unknown with nothing to say (no number doubted,
    no budget)."""
    if usage.known:
        return None
    budgets = [name for name, limit in (("token budget", token_budget), ("budget in money", budget_usd))
               if limit is not None]
    if not usage.why and budget_usd is None:
        return None  # an agent that prints no usage, under the token budgets every session has: nothing new to say
    said = usage.why or "the agent printed no usage specflux can read"
    if budgets:
        said += f"; the {' and the '.join(budgets)} could not count this session"
    return said
