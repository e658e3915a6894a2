"""Seeing the whole queue from any clone: the claims on the remote (who holds which task, the lease
left, which are stale), each task's status on the remote branch, the completions no integration
made (records.py), and the metrics of every worker's runs added up, all read from what the remote
has (the runs' `state.json` files that workers integrated), so that every clone sees the same
numbers. And what a person does to the queue by hand: release a claim, confirm a completion, clear
the claims of tasks that do not exist.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from specflux.flow.remote.claims import Claims
from specflux.flow.remote.transport import Remote
from specflux.flow.remote.tree import read_blobs, status_of, task_files

_METRICS = ("tasksCompleted", "tasksFailed", "totalAttempts", "totalReviews", "inputTokens", "outputTokens",
            "cacheReadTokens", "cacheWriteTokens", "costUsd", "costUnknown", "usageUnknown", "durationMs")


def open_claims(root: Path, remote: str, lease_s: float = 60.0, skew_s: float = 5.0) -> Claims:
    """The claims of the queue on `remote` as the clone at `root` talks to it (its current branch
    names the queue's branch; a detached HEAD reads the remote's default)."""
    from specflux.flow.lanes.worktrees import current_branch

    branch = current_branch(root) or "HEAD"
    handle = Remote(root, remote, branch, give_up_s=0.0)
    if handle.git("remote", "get-url", remote).returncode:
        from specflux.base.errors import UsageError

        raise UsageError(f"no git remote {remote!r} here (see `git remote -v`)")
    return Claims(handle, lease_s, skew_s)


def claim_rows(claims: Claims) -> list[dict[str, Any]]:
    """Every claim on the remote now, oldest first, as `specflux claims --json` prints them."""
    now = time.time()
    found = claims.read()
    return sorted((c.as_json(claims.skew_s, now) for c in found.values()), key=lambda row: (row["claimedAt"], row["task"]))


_RENEWALS = 5  # tries of a release whose claim's worker keeps renewing it under the release


def release(claims: Claims, task: str, by: str, *, force: bool = False) -> dict[str, Any] | None:
    """Free the claim on `task`: the claim that was released, None when there was none. A live claim
    (its worker renews it) only with `force`: releasing it drops that worker's work on the task."""
    from specflux.base.errors import SpecfluxError

    found = claims.read().get(task)
    if found is None:
        return None
    row = found.as_json(claims.skew_s)
    if not force and not row["stale"]:
        raise SpecfluxError(f"task {task}'s claim is live: {found.worker} (run {found.run}) holds it, its lease renewed "
                            f"until {found.lease_until} ({row['leaseLeftS']:.0f} s left). Releasing it drops that "
                            "worker's work on the task: its result will not be integrated (it keeps it on a local "
                            f"branch). If that worker will not come back: `specflux claims release {task} --force`")
    for _ in range(_RENEWALS):  # a live claim's worker may renew it between the read and the drop
        if claims.drop(found, by, "released by hand (`specflux claims release`)"):
            return row
        now = claims.read().get(task)
        if now is None:  # released (or given up) meanwhile by another hand
            return None
        if (now.worker, now.run) != (found.worker, found.run):
            raise SpecfluxError(f"the claim on task {task} was taken over by {now.worker} (run {now.run}) while "
                                "releasing it; look again (`specflux claims`)")
        if not force:  # a stale claim its worker renewed: live again, released only with --force
            raise SpecfluxError(f"the claim on task {task} was renewed by {now.worker} (run {now.run}) while releasing "
                                f"it: its worker is live; look again, or `specflux claims release {task} --force`")
        found, row = now, now.as_json(claims.skew_s)  # renewed by the same run: released as it now stands
    raise SpecfluxError(f"the claim on task {task} was renewed {_RENEWALS} times while releasing it; try again")


def tidy(claims: Claims, by: str) -> list[dict[str, Any]]:
    """Clear the claims for tasks the branch does not have (a task deleted or renamed while claimed, a
    claim made by hand): nothing can ever integrate them. The claims cleared, as rows (fetches first)."""
    found = claims.read()
    tip = claims.remote.rev(claims.remote.tracking)
    if not found or not tip:
        return []
    files = task_files(claims.remote, tip)
    cleared = []
    for task, claim in sorted(found.items()):
        if task not in files and claims.drop(claim, by, f"no task {task} on {claims.remote.name}/{claims.remote.branch}"):
            cleared.append(claim.as_json(claims.skew_s))
    return cleared


def unconfirmed(claims: Claims, statuses: dict[str, str] | None = None) -> dict[str, str]:
    """{task: why} for each task complete on the fetched branch that no integration completed and no
    person confirmed (records.py)."""
    from specflux.flow.remote.records import Verifier

    tip = claims.remote.rev(claims.remote.tracking)
    if not tip:
        return {}
    if statuses is None:
        files = task_files(claims.remote, tip)
        texts = read_blobs(claims.remote, [f"{tip}:{p}" for p in files.values()])
        statuses = {t: status_of(texts.get(f"{tip}:{p}"), p) for t, p in files.items()}
    return Verifier(claims.remote).unconfirmed(tip, sorted(statuses), statuses)


def confirm(claims: Claims, tasks: list[str], by: str) -> list[dict[str, Any]]:
    """A person's word that each of `tasks`, complete on the branch, is done: its completion record
    (records.py); its dependents go ahead. The records written."""
    from specflux.flow.remote.records import confirm as record

    claims.read()
    return [record(claims.remote, task, by) for task in tasks]


def queue_state(claims: Claims) -> dict[str, Any]:
    """{branch, claims, tasks: {id: status}, unconfirmed: {id: why}, workers: {worker: [task]}, metrics,
    runs} from the remote."""
    rows = claim_rows(claims)  # (fetches the branch too)
    remote = claims.remote
    tip = remote.rev(remote.tracking)
    tasks: dict[str, str] = {}
    metrics: dict[str, Any] = {k: 0 for k in _METRICS}
    runs: dict[str, dict[str, Any]] = {}
    if tip:
        files = task_files(remote, tip)
        listed = remote.git("ls-tree", "-r", "--name-only", tip).stdout.splitlines()
        wanted = [p for p in listed if p.endswith("/state.json") and "/runs/" in p]
        blobs = read_blobs(remote, [f"{tip}:{p}" for p in [*files.values(), *wanted]])
        for task, path in files.items():
            tasks[task] = status_of(blobs.get(f"{tip}:{path}"), path)
        for path in wanted:
            try:
                state = json.loads(blobs.get(f"{tip}:{path}", ""))
            except ValueError:
                continue
            if not isinstance(state, dict):
                continue
            m = state.get("metrics") or {}
            for key in _METRICS:
                metrics[key] += _number(m.get(key))
            runs[state.get("runId", path)] = {"status": state.get("status"),
                                              "tasks": [t.get("id") for t in state.get("tasks") or []]}
    doubtful = unconfirmed(claims, tasks) if tip else {}
    workers: dict[str, list[str]] = {}
    for row in rows:
        workers.setdefault(row["worker"], []).append(row["task"])
    return {"remote": remote.name, "branch": remote.branch, "tip": tip, "claims": rows, "workers": workers,
            "tasks": tasks, "unconfirmed": doubtful, "metrics": metrics, "runs": runs}


def _number(value: Any) -> int | float:
    """A metric as a number (a run's state is data from another machine: anything else counts 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (float("inf"), -float("inf")):
        return 0
    return max(0, value)
