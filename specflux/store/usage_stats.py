"""What the agent sessions spent, read back from git: every session commit's usage trailers
(`Specflux-Input-Tokens` ... `Specflux-Cost-Usd`, `Specflux-Model`, `Specflux-Usage: unknown`),
summed per task, per run, per model and in total. `specflux stats` prints it.

The sums use the run metrics' names (flow/state.py): `costUsd` is what the sessions whose cost is
known cost; `costUnknown` counts sessions with tokens but no price (a model the pricing table did
not know, or a commit from before costs were recorded), `usageUnknown` those whose agent printed
no usage at all. Neither is ever counted as 0 dollars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager

TOKENS = (("inputTokens", "Specflux-Input-Tokens"), ("outputTokens", "Specflux-Output-Tokens"),
          ("cacheReadTokens", "Specflux-Cache-Read-Tokens"), ("cacheWriteTokens", "Specflux-Cache-Write-Tokens"))
_FORMAT = "--format=%x1e%H%x1f%(trailers:only,unfold)"


def empty() -> dict[str, Any]:
    return {"sessions": 0, **{key: 0 for key, _ in TOKENS}, "costUsd": 0.0, "costUnknown": 0, "usageUnknown": 0,
            "durationMs": 0}


def session_usage(trailers: dict[str, str]) -> dict[str, Any] | None:
    """One commit's session usage from its trailers, or None when it is no session's commit."""
    if "Specflux-Stop" not in trailers or "Specflux-Task" not in trailers:
        return None
    if trailers.get("Specflux-Usage") == "unknown":
        return {"unknown": True}
    out: dict[str, Any] = {key: _int(trailers.get(name)) for key, name in TOKENS}
    cost = trailers.get("Specflux-Cost-Usd")
    try:
        out["costUsd"] = float(cost) if cost else None
    except ValueError:
        out["costUsd"] = None
    out["model"] = trailers.get("Specflux-Model")
    out["durationMs"] = _int(trailers.get("Specflux-Duration-Ms"))
    return out


def add(sums: dict[str, Any], usage: dict[str, Any]) -> None:
    sums["sessions"] += 1
    if usage.get("unknown"):
        sums["usageUnknown"] += 1
        return
    for key, _ in TOKENS:
        sums[key] += usage[key]
    if usage["costUsd"] is None:
        sums["costUnknown"] += 1
    else:
        sums["costUsd"] = round(sums["costUsd"] + usage["costUsd"], 6)
    sums["durationMs"] += usage.get("durationMs", 0)


def usage_stats(manager: "TaskStateManager") -> dict[str, Any]:
    """{"tasks": {id: sums}, "runs": {run id: sums}, "models": {model: sums}, "total": sums}, from
    one `git log` of the repository's session commits."""
    out: dict[str, Any] = {"tasks": {}, "runs": {}, "models": {}, "total": empty()}
    git = manager.git
    if git is None:
        return out
    from specflux.store.history import kept_revs
    from specflux.vcs.process import run_git

    done = run_git(("log", *kept_revs(git.root), "--no-show-signature", "--grep=^Specflux-Stop: ", _FORMAT), git.root)
    if done.returncode:
        return out  # no commits yet
    for record in done.stdout.split("\x1e")[1:]:
        _, trailer_text = record.split("\x1f", 1)
        trailers: dict[str, str] = {}
        for line in trailer_text.splitlines():
            key, colon, value = line.partition(":")
            if colon:
                trailers[key.strip()] = value.strip()
        usage = session_usage(trailers)
        if usage is None:
            continue
        groups = [out["total"], out["tasks"].setdefault(trailers["Specflux-Task"], empty())]
        if trailers.get("Specflux-Run"):
            groups.append(out["runs"].setdefault(trailers["Specflux-Run"], empty()))
        if usage.get("model"):
            groups.append(out["models"].setdefault(usage["model"], empty()))
        for sums in groups:
            add(sums, usage)
    from specflux.store.workspace import natural_key

    out["tasks"] = dict(sorted(out["tasks"].items(), key=lambda item: natural_key(item[0])))
    out["runs"] = dict(sorted(out["runs"].items()))
    return out


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0
