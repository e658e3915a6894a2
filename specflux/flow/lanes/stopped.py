"""Stopping keeps work: what the lanes of a stopped parallel run had done is kept on branches.

`flow stop` ends a run now, and its lanes' worktrees and `specflux/<run>/` branches are removed
with it. Before that, each lane of a task the run had not completed keeps its work on
`specflux/stopped/<run>/<task>`: what its agent left uncommitted is committed there first, so
nothing is left only in a dangling commit for `git gc` to delete. The branches are named in the
narrative and in `flow status` (`stoppedBranches`); start again from one by merging it into your
branch and starting a new run over the task.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from specflux.vcs.process import run_git as _run

if TYPE_CHECKING:
    from specflux.flow.record.run import Run

PREFIX = "specflux/stopped/"


def keep_lanes(root: Path, run: "Run", only: Iterable[str] | None = None) -> dict[str, str]:
    """Keep the unfinished lanes' work of `run` (of the tasks `only`, when given) on branches;
    {task: branch} of those kept. A task this run completed has its lane merged: nothing to keep;
    one completed by another run meanwhile (`completedBy`) keeps this run's attempt too."""
    state = run.state()
    done = {t["id"] for t in state.get("tasks") or [] if t["status"] == "complete" and not t.get("completedBy")}
    wanted = None if only is None else set(only)
    kept = {}
    for task_id, lane in sorted((state.get("lanes") or {}).items()):
        if task_id in done or (wanted is not None and task_id not in wanted):
            continue
        if task_id in (state.get("stoppedBranches") or {}):
            continue  # kept already
        worktree = Path(lane.get("worktree") or "")
        if worktree.is_dir():
            _commit_leftovers(worktree, task_id, run.id)
        head = _run(("rev-parse", "--verify", "-q", f"{lane['branch']}^{{commit}}"), root).stdout.strip()
        if not head or head == lane.get("base"):
            continue  # the lane did nothing: nothing to keep
        name = f"{PREFIX}{run.id}/{re.sub(r'[^A-Za-z0-9_-]', '-', task_id)}"
        if _run(("branch", "-f", name, head), root).returncode == 0:
            kept[task_id] = name
    if kept:
        run.record({"type": "lanes_kept", "branches": kept})
    return kept


def _commit_leftovers(worktree: Path, task_id: str, run_id: str) -> None:
    """Commit what the lane's agent left uncommitted in its worktree (on the lane's branch)."""
    status = _run(("status", "--porcelain", "--untracked-files=all"), worktree)
    if status.returncode != 0 or not status.stdout.strip():
        return
    _run(("add", "-A"), worktree)
    _run(("-c", "user.name=specflux", "-c", "user.email=specflux@localhost", "commit", "-q", "--no-verify", "-m",
          f"task {task_id}: unfinished work kept when run {run_id} was stopped\n\nSpecflux-Run: {run_id}\n"
          f"Specflux-Task: {task_id}\nSpecflux-Role: engine"), worktree)


def how_to_go_on(branches: dict[str, str]) -> str:
    """What `flow resume` of a stopped run says."""
    listed = ", ".join(f"task {t}: {b}" for t, b in branches.items())
    first = next(iter(branches.values()))
    return (f"its unfinished work is kept on {listed}; to start again from it, merge a branch into yours "
            f"(`git merge {first}`) and start a new run over the task (`specflux flow start ID`)")
