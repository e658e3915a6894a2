"""A task's history, read back from git: the commits that touched its files, with their trailers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .workspace import check_id

if TYPE_CHECKING:
    from .store import TaskStateManager


def task_history(manager: "TaskStateManager", task_id: str) -> list[dict[str, Any]]:
    """Newest first: commit, date, session, status, subject, and usage where the session had any."""
    task_id = check_id(task_id)
    git = manager.git
    if git is None:
        return []
    paths = [manager.path(task_id), manager.ws.archive_path(task_id)]
    out = []
    for c in git.history(paths):
        t = c.trailers
        if t.get("Specflux-Task") not in (None, task_id):
            continue  # a commit of another task that only wired this one
        session = t.get("Specflux-Session")
        entry: dict[str, Any] = {
            "commit": c.sha,
            "date": c.date,
            "session": int(session) if session and session.isdigit() else None,
            "status": t.get("Specflux-Status"),
            "subject": c.subject,
        }
        usage = {k[len("Specflux-"):].lower().replace("-", "_"): v for k, v in t.items() if k.startswith("Specflux-") and k not in
                 ("Specflux-Task", "Specflux-Session", "Specflux-Status")}
        if usage:
            entry["usage"] = {k: _number(v) for k, v in usage.items()}
        out.append(entry)
    return out


def _number(value: str):
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value
