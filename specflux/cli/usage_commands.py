"""`specflux stats`: what the agent sessions spent, per task, run and model and in total, from git."""

from __future__ import annotations

from specflux.cli import command
from specflux.cli.output import emit_json
from specflux.surface.tasks import open_manager


@command("stats")
def cmd_stats(args) -> int:
    from specflux.agent.pricing import shipped
    from specflux.store.usage_stats import usage_stats

    manager = open_manager(args.root)
    stats = usage_stats(manager)
    stats["pricingDate"] = shipped()[0]
    if args.json:
        emit_json(stats)
        return 0
    from specflux.base.escape import safe
    from specflux.surface.views import cost_text, table

    def rows(group: dict) -> list[list[str]]:
        """A row per name; tokens no session could read are `unknown`, never 0."""
        keys = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
        return [[name, str(s["sessions"]),
                 *(["unknown"] * 4 if s["usageUnknown"] == s["sessions"] else [f"{s[k]:,}" for k in keys]),
                 cost_text(s)] for name, s in group.items()]

    total = stats["total"]
    if not total["sessions"]:
        print("no agent sessions committed yet")
        return 0
    headers = ["SESSIONS", "INPUT", "OUTPUT", "CACHE-READ", "CACHE-WRITE", "COST"]
    print(safe(table(["TASK", *headers], rows(stats["tasks"]) + [["total", *rows({"": total})[0][1:]]])))
    if stats["models"]:
        print()
        print(safe(table(["MODEL", *headers], rows(stats["models"]))))
    print(f"\ncosts: the agent CLI's own figure where it gives one, else the pricing table of "
          f"{stats['pricingDate']} (override in config.toml: [pricing.\"model\"])")
    return 0
