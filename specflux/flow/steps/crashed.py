"""A step's session that the engine's crash (a kill, a power cut) cut short, met again on resume:
either it had committed (its result is taken from that commit, and from what the step wrote down
before committing), or it had not (its attempt gets a progress-log entry saying so, and what it
changed is committed as that attempt, from the baseline the step saved).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager


def finished_commit(manager: "TaskStateManager", run_id: str, step: dict[str, Any],
                    before_commit: Path | None = None) -> dict[str, Any] | None:
    """A session of this step that committed before the crash (and was not interrupted), as the
    step's summary; `before_commit`: what the step wrote down just before that commit (a
    reviewer's verdict, the task it accepted in the commit and the decision's moment:
    flow/early_acceptance.py), if it did."""
    git = manager.git
    if git is None:
        return None
    found = [c for c in git.find_commits({"Specflux-Run": run_id, "Specflux-Step": step["stepId"]})
             if c.trailers.get("Specflux-Stop") not in ("interrupted", "crashed")]
    if not found:
        return None
    c = found[0]
    t = c.trailers
    stop = t.get("Specflux-Stop", "end_session")
    done = {"stop": stop, "ok": stop in ("end_session", "end_turn"), "session": int(t.get("Specflux-Session", 0) or 0),
            "commit": c.sha, "error": None, "usage": usage_of_trailers(t), "code": f"commit {c.sha[:12]}",
            "review": None,
            "handoff": {"did": [c.subject], "chainOutput": None} if stop in ("end_session", "end_turn") else None}
    if before_commit is not None and before_commit.is_file():
        try:
            noted = json.loads(before_commit.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            noted = {}
        if noted.get("session") == done["session"]:  # (written for this very session)
            done.update({k: noted[k] for k in ("review", "accepted", "wired", "moment") if k in noted})
    return done


def commit_crashed(manager: "TaskStateManager", step: dict[str, Any], steps: Path,
                   run_trailers: dict[str, str]) -> list[str]:
    """The engine died during this step's session: give that attempt its progress-log entry and
    commit what it changed (from the baseline it saved in `steps`), so nothing is lost or mixed
    up. Returns the lines to say."""
    from specflux.format.model import SessionInput
    from specflux.store.manager import commit_subject

    task_id = step["taskId"]
    said = []
    baseline_file = steps / f"{step['stepId']}.baseline.json"
    baseline = None
    if baseline_file.is_file() and manager.git is not None:
        from specflux.agent.restore import restore_after_crash
        from specflux.vcs.values import Baseline

        baseline = Baseline.from_json(json.loads(baseline_file.read_text(encoding="utf-8")))
        said += [f"task {task_id}: {line}" for line in restore_after_crash(manager, baseline)]
    done = manager.append_session(task_id, SessionInput(
        did=["Session ended without a hand-off: the run's engine stopped during this session (a crash or kill)"],
        issues="Its partial work, if any, is committed with this entry.",
        next="The run starts this step again."), commit=False)
    git = manager.git
    if git is None:
        return said
    trailers = {"Specflux-Task": task_id, "Specflux-Session": str(done.session), "Specflux-Status": done.status or "",
                "Specflux-Stop": "crashed", **run_trailers}
    subject = commit_subject(task_id, done.session, "engine stopped during the session")
    if baseline is not None:
        git.commit_session(baseline, None, subject, trailers)
    else:
        git.commit([manager.path(task_id)], subject, trailers)
    return said


def usage_of_trailers(t: dict[str, str]) -> dict[str, Any]:
    """A committed session's usage, from its trailers (as roles.py `_usage` gives it)."""
    if t.get("Specflux-Usage") == "unknown":
        return {"unknown": True}
    out: dict[str, Any] = {key: int(t.get(f"Specflux-{name}-Tokens", 0) or 0) for key, name in (
        ("inputTokens", "Input"), ("outputTokens", "Output"), ("cacheReadTokens", "Cache-Read"),
        ("cacheWriteTokens", "Cache-Write"))}
    cost = t.get("Specflux-Cost-Usd")
    out["costUsd"] = float(cost) if cost else None
    if t.get("Specflux-Model"):
        out["model"] = t["Specflux-Model"]
    return out
