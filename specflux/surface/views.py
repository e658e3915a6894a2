"""How tasks look from outside: the `--json` shapes of CONTRACT section 3, and plain-text tables."""

from __future__ import annotations

from specflux.base.records import as_dict
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from specflux.agent.context import SessionContext
    from specflux.store.chain import Graph
    from specflux.format.model import TaskState
    from specflux.store.values import Outcome, TaskSummary
    from specflux.store.workspace import Workspace


def error_json(error) -> dict[str, Any] | None:
    if error is None:
        return None
    return {"path": error.path, "line": error.line, "message": error.message}


def summary_json(row: "TaskSummary") -> dict[str, Any]:
    return {
        "id": row.id,
        "title": row.title,
        "status": "broken" if row.error else row.status,
        "criteria": {"done": row.done, "total": row.total},
        "sessions": row.sessions,
        "size_bytes": row.size,
        "dependencies": row.dependencies,
        "path": row.path,
        "error": error_json(row.error),
        "warnings": row.warnings,
    }


def task_json(state: "TaskState", rel_path: str, size: int, usage: dict[int, dict] | None = None) -> dict[str, Any]:
    out = {
        "id": state.id,
        "title": state.title,
        "status": state.status,
        "path": rel_path,
        "size_bytes": size,
        "metadata": state.metadata,
        "dependencies": state.dependencies,
        "epic": state.epic,
        "repository": state.repository,
        "requirements": state.requirements,
        "criteria": [{"index": c.index, "text": c.text, "checked": c.checked} for c in state.criteria],
        "chain_inputs": [{"task_id": c.task_id, "title": c.title, "body": c.body} for c in state.chain_inputs],
        "sessions": [
            {"number": s.number, "timestamp": s.timestamp, "did": s.did, "issues": s.issues, "next": s.next, "usage": s.usage}
            for s in state.sessions
        ],
        "archived_summary": _without_line(as_dict(state.archived_summary)) if state.archived_summary else None,
        "chain_output": as_dict(state.chain_output) if state.chain_output else None,
    }
    return out


def ready_json(graph: "Graph") -> list[dict[str, Any]]:
    """`ready --json`: the tasks whose dependencies are all complete, in dependency order, each
    the same object as its `list --json` row (`summary_json`)."""
    return [summary_json(graph.rows[t]) for t in graph.ready()]


def graph_json(graph: "Graph") -> dict[str, Any]:
    """`graph --json`: every readable task as a node, one edge per dependency (from the dependency
    to the task that waits on it), dependencies on tasks that do not exist, cycles, and the
    problems `graph` reports on stderr (unreadable files among them)."""
    from specflux.store.workspace import natural_key

    ids = sorted(graph.deps, key=natural_key)
    return {
        "nodes": [{"id": t, "title": graph.titles[t], "status": graph.status[t], "dependencies": graph.deps[t]}
                  for t in ids],
        "edges": [{"from": d, "to": t} for t in ids for d in graph.deps[t]],
        "missing": sorted({d for _, d in graph.unknown()}, key=natural_key),
        "cycles": graph.cycles(),
        "problems": graph.problems(),
    }


def context_json(ctx: "SessionContext") -> dict[str, Any]:
    """`context --json`: what an agent session on the task receives."""
    return {"system": ctx.system, "context": ctx.user, "tokens": ctx.tokens, "links": ctx.links}


def outcome_json(outcome: "Outcome", ws: "Workspace") -> dict[str, Any]:
    """What a write (check, session, complete, set) did, as the MCP tools return it."""
    return {
        "id": outcome.task_id,
        "status": outcome.status,
        "changed": [ws.relative(p) for p in outcome.changed],
        "commit": outcome.commit or None,
        "session": outcome.session,
        "criteria": [{"index": i, "text": text, "changed": changed} for i, text, changed in outcome.criteria],
        "fields": outcome.fields,
        "wired": outcome.wired,
        "archived": outcome.archived,
        "notices": outcome.notices,
    }


def _without_line(fields: dict[str, Any]) -> dict[str, Any]:
    del fields["line"]  # a place in the file, not part of the value
    return fields


def money(cost: float | None) -> str:
    """`$0.0123`, `$12.34`; None (not known) as `unknown`."""
    if cost is None:
        return "unknown"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


def tokens_text(metrics: dict[str, Any], cache: bool = False) -> str:
    """Tokens of sessions (a run's `metrics`, a task's `taskMetrics`): `1200 input, 340 output`
    (and cache reads and writes with `cache`), with how many sessions' usage is unknown, or
    `unknown` when no session's usage could be read."""
    keys = [("inputTokens", "input"), ("outputTokens", "output")]
    keys += [("cacheReadTokens", "cache-read"), ("cacheWriteTokens", "cache-write")] if cache else []
    unknown = metrics.get("usageUnknown", 0)
    if unknown and not any(metrics.get(k) for k in ("inputTokens", "outputTokens", "cacheReadTokens",
                                                     "cacheWriteTokens")):
        return "tokens unknown"
    text = ", ".join(f"{metrics.get(k, 0)} {name}" for k, name in keys) + " tokens"
    return text + (f" (+ {unknown} session{'s' if unknown > 1 else ''} unknown)" if unknown else "")


def cost_text(metrics: dict[str, Any]) -> str:
    """What sessions cost (a run's `metrics`, a task's `taskMetrics`, `stats`' rows): the money
    where it is known, and how many sessions it leaves out; `unknown` when none was priced."""
    unknown = metrics.get("costUnknown", 0) + metrics.get("usageUnknown", 0)
    tokens = sum(metrics.get(k, 0) for k in ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens"))
    cost = metrics.get("costUsd") or 0.0
    if unknown and not cost and not tokens:
        return "unknown"
    text = money(cost)
    if unknown:
        text += f" + {unknown} session{'s' if unknown > 1 else ''} of unknown cost"
    return text


def spent_text(usage: dict[str, Any] | None) -> str:
    """What one session spent, from its commit's trailers as `log --json` gives them (`usage`):
    `12,345 tok $0.0123`, `12,345 tok` (cost not known), `unknown`, or `-` (no agent session)."""
    if not usage:
        return "-"
    if usage.get("usage") == "unknown":
        return "unknown"
    if "input_tokens" not in usage:
        return "-"
    tokens = sum(usage.get(k, 0) for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
                 if isinstance(usage.get(k), int))
    cost = usage.get("cost_usd")
    return f"{tokens:,} tok" + (f" {money(cost)}" if isinstance(cost, (int, float)) else "")


def human_size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], last_wide: bool = True, *,
          status_column: int | None = None, colour: bool | None = None) -> str:
    """An aligned table; the last column is left unpadded. Plain text unless a `status_column` is
    named: then, on a terminal (`colour`, default: `terminal.colour()`), the headers are bold and
    that column's cells are in their status's colour. Such a table's cells must already be safe to
    print (`escape.safe`), and the table must not be escaped again (that would show the colour
    codes as text); a plain table may be."""
    cells = [list(headers), *([str(c) for c in r] for r in rows)]
    if status_column is None:
        return _aligned(cells)
    if colour is None:
        from specflux.base.terminal import colour as decide

        colour = decide()
    if not colour:
        return _aligned(cells)
    from specflux.base import terminal

    for r in cells[1:]:
        r[status_column] = terminal.status(r[status_column])
    cells[0] = [terminal.paint(h, terminal.BOLD) for h in cells[0]]
    return _painted(cells)


def _aligned(cells: list[list[str]]) -> str:
    """Rows of strings as lines, each column but the last padded to its widest cell."""
    widths = [max(map(len, column)) for column in zip(*cells)][:-1]
    line = "  ".join([*(f"{{:<{w}}}" for w in widths), "{}"])
    return "\n".join([line.format(*r).rstrip() for r in cells])


def _painted(cells: list[list[str]], sizes: list[list[int]] | None = None) -> str:
    """`_aligned` for cells holding colour codes: widths are what the terminal shows (`sizes`, the
    visible width of each cell, when the caller knows them)."""
    if sizes is None:
        from specflux.base.terminal import width

        sizes = [[width(c) for c in r] for r in cells]
    widths = [max(column) for column in zip(*sizes)][:-1]
    lines = []
    for r, s in zip(cells, sizes):
        padded = [c + " " * (w - n) for c, n, w in zip(r, s, widths)]
        lines.append("  ".join([*padded, r[-1]]).rstrip())
    return "\n".join(lines)


def list_table(rows: Sequence["TaskSummary"], colour: bool | None = None) -> str:
    """`specflux list`: one row per task, text from the files escaped. On a terminal (`colour`,
    default: `terminal.colour()`) statuses are coloured and criteria get a progress bar."""
    from specflux.base.escape import safe

    if colour is None:
        from specflux.base.terminal import colour as decide

        colour = decide()
    if colour:
        return _list_painted(rows)
    cells = [["ID", "STATUS", "DONE", "SESSIONS", "SIZE", "DEPS", "TITLE"]]
    for r in rows:
        if r.error:
            cells.append([r.id, "BROKEN", "-", "-", human_size(r.size), "-", safe(str(r.error))])
        else:
            size = human_size(r.size) + " !" if r.warnings else human_size(r.size)
            cells.append([r.id, r.status, f"{r.done}/{r.total}", str(r.sessions), size, ",".join(r.dependencies) or "-",
                          safe(r.title)])
    notes = [safe(f"! {r.id}: {w}") for r in rows for w in r.warnings]
    return _aligned(cells) + ("\n\n" + "\n".join(notes) if notes else "")


def _list_painted(rows: Sequence["TaskSummary"]) -> str:
    from specflux.base import terminal
    from specflux.base.escape import safe

    bars = terminal.bars_fit()
    headers = ("ID", "STATUS", "DONE", "SESSIONS", "SIZE", "DEPS", "TITLE")
    cells = [[terminal.paint(h, terminal.BOLD) for h in headers]]
    sizes = [[len(h) for h in headers]]  # what the terminal shows of each cell: computed, not measured
    painted: dict = {}  # statuses and bars, each painted once
    for r in rows:
        size = human_size(r.size)
        if r.error:
            error = safe(str(r.error))
            cells.append([r.id, terminal.status("BROKEN"), "-", "-", size, "-", terminal.paint(error, terminal.RED)])
            sizes.append([len(r.id), 6, 1, 1, len(size), 1, len(error)])
            continue
        count, deps, title = f"{r.done}/{r.total}", ",".join(r.dependencies) or "-", safe(r.title)
        status = painted.get(r.status) or painted.setdefault(r.status, terminal.status(r.status))
        done = painted.get((r.done, r.total)) or painted.setdefault((r.done, r.total), terminal.bar(r.done, r.total))
        cells.append([r.id, status, done if bars else count, str(r.sessions),
                      size + terminal.paint(" !", terminal.YELLOW) if r.warnings else size, deps, title])
        sizes.append([len(r.id), len(r.status), len(count) + 6 if bars else len(count), len(cells[-1][3]),
                      len(size) + 2 if r.warnings else len(size), len(deps), len(title)])
    notes = [terminal.paint("!", terminal.YELLOW) + safe(f" {r.id}: {w}") for r in rows for w in r.warnings]
    return _painted(cells, sizes) + ("\n\n" + "\n".join(notes) if notes else "")


def show_text(state: "TaskState", rel_path: str, size: int) -> str:
    lines = [f"Task #{state.id}: {state.title}", f"  status: {state.status}   file: {rel_path} ({human_size(size)})"]
    if state.epic:
        lines.append(f"  epic: {state.epic}")
    if state.repository:
        lines.append(f"  repository: {state.repository}")
    if state.dependencies:
        lines.append(f"  depends on: {', '.join('#' + d for d in state.dependencies)}")
    if state.requirements:
        lines += ["", "Requirements:", *("  " + ln for ln in state.requirements.splitlines())]
    lines += ["", f"Acceptance criteria ({state.done}/{len(state.criteria)}):"]
    lines += [f"  {c.index}. [{'x' if c.checked else ' '}] {'  ' * c.depth}{c.text}" for c in state.criteria]
    for c in state.chain_inputs:
        lines += ["", f"From task #{c.task_id}: {c.title}", *("  > " + ln for ln in c.body.splitlines())]
    if state.archived_summary:
        a = state.archived_summary
        lines += ["", f"Archived sessions {a.first}-{a.last}: {a.archive or ''}"]
    lines += ["", f"Sessions ({len(state.sessions)} in the log, {state.metadata.get('total_sessions', '?')} in all):"]
    for s in state.sessions:
        did = "; ".join(s.did) or "-"
        lines.append(f"  {s.number}. {s.timestamp or ''}  {did}")
        if s.next:
            lines.append(f"     next: {s.next.splitlines()[0]}")
    if state.chain_output:
        lines += ["", "Chain output:", *("  " + ln for ln in state.chain_output.summary.splitlines())]
    return "\n".join(lines)
