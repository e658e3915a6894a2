"""A task's history, read back from git: the commits that touched its files, with their trailers."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from specflux.store.workspace import STATE_FILE, check_id

_ARCHIVE_FILE = re.compile(r"task-([A-Za-z0-9][A-Za-z0-9._-]*)-archive\.md")

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager


KEPT = "refs/heads/specflux/stopped/"  # where a run that ended keeps its lanes' unfinished work


def kept_revs(root) -> tuple[str, ...]:
    """What `git log` reads besides HEAD so that sessions kept on `specflux/stopped/*` branches (a
    parallel run that ended before merging them, flow/lanes/stopped.py) count: () when there are none."""
    from specflux.vcs.process import run_git as _run

    if not _run(("for-each-ref", "--count=1", "--format=%(refname)", KEPT), root).stdout.strip():
        return ()
    return ("HEAD", f"--glob={KEPT}*")


def task_history(manager: "TaskStateManager", task_id: str) -> list[dict[str, Any]]:
    """Newest first: commit, date, session, status, subject, and usage where the session had any."""
    task_id = check_id(task_id)
    git = manager.git
    if git is None:
        return []
    paths = [manager.path(task_id), manager.ws.archive_path(task_id)]
    out = []
    for c in git.history(paths, kept_revs(git.root)):
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


def all_histories(manager: "TaskStateManager", keep: int | None = None) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Every task's `task_history`, from one `git log` over the task and archive folders instead of
    one per task (tests check the two agree): task id -> its entries, newest first (the newest
    `keep` of them), and how many older ones were left off."""
    git = manager.git
    if git is None:
        return {}, {}
    from specflux.vcs.process import run_git as _run

    ws = manager.ws
    folders = [ws.relative(ws.states_dir), ws.relative(ws.archives_dir)]
    if ws.root != git.root:
        folders = [os.path.relpath(ws.root / f, git.root) for f in folders]
    fmt = "--format=%x1e%H%x1f%aI%x1f%s%x1f%(trailers:only,unfold)%x1f"
    done = _run(("log", "--no-show-signature", "--no-renames", "-c", "--name-only", fmt, "--", *folders), git.root)
    if done.returncode:
        return {}, {}  # no commits yet, or git refused: the page shows no history
    out: dict[str, list[dict[str, Any]]] = {}
    more: dict[str, int] = {}
    for record in done.stdout.split("\x1e")[1:]:
        sha, date, subject, trailer_text, names = record.split("\x1f", 4)
        trailers: dict[str, str] = {}
        for line in trailer_text.splitlines():
            key, colon, value = line.partition(":")
            if colon:
                trailers[key.strip()] = value.strip()
        owner = trailers.get("Specflux-Task")
        ids = {m.group(1) for name in names.split("\n")
               if (m := STATE_FILE.fullmatch(name.rpartition("/")[2]) or _ARCHIVE_FILE.fullmatch(name.rpartition("/")[2]))}
        entry: dict[str, Any] | None = None
        for task_id in ids:
            if owner not in (None, task_id):
                continue  # a commit of another task that only wired this one
            if entry is None:
                session = trailers.get("Specflux-Session")
                entry = {"commit": sha, "date": date, "session": int(session) if session and session.isdigit() else None,
                         "status": trailers.get("Specflux-Status"), "subject": subject}
                usage = {k[len("Specflux-"):].lower().replace("-", "_"): _number(v) for k, v in trailers.items()
                         if k.startswith("Specflux-") and k not in ("Specflux-Task", "Specflux-Session", "Specflux-Status")}
                if usage:
                    entry["usage"] = usage
            entries = out.setdefault(task_id, [])
            if keep is None or len(entries) < keep:
                entries.append(entry)
            else:
                more[task_id] = more.get(task_id, 0) + 1
    return out, more


def _number(value: str):
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value
