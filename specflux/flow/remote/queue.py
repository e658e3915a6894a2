"""Seeing the whole queue from any clone: the claims on the remote (who holds which task, the lease
left, which are stale), each task's status on the remote branch, and the metrics of every worker's
runs added up, all read from what the remote has (the runs' `state.json` files that workers
integrated), so that every clone sees the same numbers.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from specflux.flow.remote.claims import Claims
from specflux.flow.remote.transport import Remote

_METRICS = ("tasksCompleted", "tasksFailed", "totalAttempts", "totalReviews", "inputTokens", "outputTokens",
            "durationMs")
_TASK_FILE = re.compile(r"(?:^|/)task-states/task-(.+)-state\.md$")


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


def release(claims: Claims, task: str) -> dict[str, Any] | None:
    """Free the claim on `task` (whatever its lease): the claim that was released, None when there was none."""
    found = claims.read().get(task)
    if found is None:
        return None
    if not claims.release(task, found.sha):
        from specflux.base.errors import UsageError

        raise UsageError(f"the claim on task {task} changed while releasing it (renewed or taken over); look again")
    return found.as_json(claims.skew_s)


def queue_state(claims: Claims) -> dict[str, Any]:
    """{branch, claims, tasks: {id: status}, workers: {worker: [task]}, metrics, runs} from the remote."""
    rows = claim_rows(claims)  # (fetches the branch too)
    remote = claims.remote
    tip = remote.rev(remote.tracking)
    tasks: dict[str, str] = {}
    metrics = {k: 0 for k in _METRICS}
    runs: dict[str, dict[str, Any]] = {}
    if tip:
        listed = remote.git("ls-tree", "-r", "--name-only", tip).stdout.splitlines()
        wanted = [p for p in listed if _TASK_FILE.search(p) or (p.endswith("/state.json") and "/runs/" in p)]
        for path, text in _read_blobs(remote, tip, wanted).items():
            task = _TASK_FILE.search(path)
            if task:
                tasks[task.group(1)] = _status(text, path)
                continue
            try:
                state = json.loads(text)
            except ValueError:
                continue
            m = state.get("metrics") or {}
            for key in _METRICS:
                metrics[key] += int(m.get(key) or 0)
            runs[state.get("runId", path)] = {"status": state.get("status"),
                                              "tasks": [t.get("id") for t in state.get("tasks") or []]}
    workers: dict[str, list[str]] = {}
    for row in rows:
        workers.setdefault(row["worker"], []).append(row["task"])
    return {"remote": remote.name, "branch": remote.branch, "tip": tip, "claims": rows, "workers": workers,
            "tasks": tasks, "metrics": metrics, "runs": runs}


def _status(text: str, path: str) -> str:
    from specflux.base.errors import SpecfluxError
    from specflux.format.document import TaskDocument

    try:
        return TaskDocument(text, path).status
    except SpecfluxError:  # a file a person broke on the remote: shown, not a reason to show nothing
        return "broken"


def _read_blobs(remote: Remote, tip: str, paths: list[str]) -> dict[str, str]:
    """The text of `paths` at `tip`, through one `git cat-file --batch` (sizes in bytes, so read as bytes)."""
    import subprocess

    if not paths:
        return {}
    done = subprocess.run(["git", "cat-file", "--batch"], cwd=remote.root, capture_output=True,
                          input="".join(f"{tip}:{p}\n" for p in paths).encode())
    data, pos, out = done.stdout, 0, {}
    for path in paths:
        end = data.find(b"\n", pos)
        if end < 0:
            break
        header = data[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        out[path] = data[pos:pos + size].decode("utf-8", "replace")
        pos += size + 1
    return out
