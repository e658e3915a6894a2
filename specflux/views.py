"""How tasks look from outside: the `--json` shapes of CONTRACT section 3, and plain-text tables."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from .model import TaskState
    from .store import TaskSummary


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
        "archived_summary": _without_line(asdict(state.archived_summary)) if state.archived_summary else None,
        "chain_output": asdict(state.chain_output) if state.chain_output else None,
    }
    return out


def _without_line(fields: dict[str, Any]) -> dict[str, Any]:
    del fields["line"]  # a place in the file, not part of the value
    return fields


def human_size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KB"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], last_wide: bool = True) -> str:
    """A plain aligned table; the last column is left unpadded."""
    return _aligned([list(map(str, r)) for r in [headers, *rows]])


def _aligned(cells: list[list[str]]) -> str:
    """Rows of strings as lines, each column but the last padded to its widest cell."""
    widths = [max(map(len, column)) for column in zip(*cells)][:-1]
    line = "  ".join([*(f"{{:<{w}}}" for w in widths), "{}"])
    return "\n".join([line.format(*r).rstrip() for r in cells])


def list_table(rows: Sequence["TaskSummary"]) -> str:
    cells = [["ID", "STATUS", "DONE", "SESSIONS", "SIZE", "DEPS", "TITLE"]]
    for r in rows:
        if r.error:
            cells.append([r.id, "BROKEN", "-", "-", human_size(r.size), "-", str(r.error)])
        else:
            size = human_size(r.size) + " !" if r.warnings else human_size(r.size)
            cells.append([r.id, r.status, f"{r.done}/{r.total}", str(r.sessions), size, ",".join(r.dependencies) or "-", r.title])
    notes = [f"! {r.id}: {w}" for r in rows for w in r.warnings]
    return _aligned(cells) + ("\n\n" + "\n".join(notes) if notes else "")


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
