"""Tokens into money: the pricing table shipped in the package (`pricing.toml`, per model, dated),
with `[pricing."model"]` tables of `config.toml` over it.

A CLI's own figure for what a session cost wins (`Usage.cost_reported`); the table prices the rest.
A model the table does not know has no cost: `None`, shown as unknown, never 0.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from specflux.agent.backend import Usage
from specflux.base.records import record

TABLE = Path(__file__).with_name("pricing.toml")
RATES = ("input", "output", "cache_read", "cache_write")  # US dollars per million tokens
_DATE_SUFFIX = re.compile(r"(-\d{8}|@\d{8}|-latest|-preview(-[\d-]+)?)$")


@record(frozen=True)
class Price:
    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, usage: Usage) -> float:
        return (usage.input_tokens * self.input + usage.output_tokens * self.output
                + usage.cache_read_input_tokens * self.cache_read
                + usage.cache_creation_input_tokens * self.cache_write) / 1_000_000


@lru_cache(maxsize=1)
def shipped() -> tuple[str, dict[str, Price]]:
    """The table in the package: its date, and each model's price."""
    import tomllib

    data = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    return str(data["date"]), {name: Price(**rates) for name, rates in data["models"].items()}


class Pricing:
    """The shipped table with a workspace's overrides over it, read when a price is first asked
    for: a session makes its Pricing before its agent starts and prices it after (the table's
    TOML is ~3 ms of a worker's way to its first agent otherwise)."""

    def __init__(self, overrides: Mapping[str, Mapping[str, float]] | None = None):
        self._overrides = overrides
        self._table: dict[str, Price] | None = None

    @property
    def table(self) -> dict[str, Price]:
        if self._table is None:
            table = dict(shipped()[1])
            for model, rates in (self._overrides or {}).items():
                base = table.get(model)
                values = {k: getattr(base, k) for k in RATES} if base else {"input": 0.0, "output": 0.0}
                table[model] = Price(**{**values, **rates})
            self._table = table
        return self._table

    @property
    def date(self) -> str:
        """The shipped table's date."""
        return shipped()[0]

    def price(self, model: str | None) -> Price | None:
        """The price of `model`: by its name, without a provider prefix or date suffix, or the
        longest model name it starts with; None when the table does not know it."""
        if not model:
            return None
        names = [model, model.rpartition("/")[2]]
        names += [_DATE_SUFFIX.sub("", name) for name in names]
        for name in names:
            if name in self.table:
                return self.table[name]
        base = names[-1]
        starts = [name for name in self.table if base.startswith(name + "-")]
        return self.table[max(starts, key=len)] if starts else None

    def cost(self, usage: Usage) -> float | None:
        """What `usage` cost: the CLI's own figure, else the table's; None when neither knows."""
        if usage.cost_usd is not None and usage.cost_reported:
            return usage.cost_usd
        if not usage.known:
            return None
        price = self.price(usage.model)
        return None if price is None else price.cost(usage)

    def priced(self, usage: Usage) -> Usage:
        """`usage` with its cost filled in (in place) where it has none of its own."""
        if usage.known and not usage.cost_reported:
            usage.cost_usd = self.cost(usage)
        return usage


def format_cost(cost: float | None) -> str:
    """`$0.0123`, `$12.34`, or `unknown`."""
    if cost is None:
        return "unknown"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
