"""How a run driven in the foreground ends, whatever ends it, and the last line it says.

A run is never left `running` with no process driving it by an ordinary accident: when its drive
is cut short outside a step (Ctrl-C between steps, a closed terminal, a closed pipe, a full disk,
any error), `pause_left_running` records it paused with the reason, so that `flow status` says
why and `flow resume` goes on from where it was. When even that cannot be written (the disk is
full), `next_step` still says what happened and what to do.

`next_step` is the last line of every run that ends other than `completed`: why, and the command
that goes on (`flow resume`, `flow approve`, `flow start` again, and where the work is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specflux.base.errors import SpecfluxError

if TYPE_CHECKING:
    from specflux.flow.record.run import Run
    from specflux.store.manager import TaskStateManager


def pause_left_running(manager: "TaskStateManager", run: "Run", why: str) -> bool:
    """Record `run` paused with `why` if it is still `running` with no process driving it; whether
    it did. Raises what the file system raises when even that cannot be written."""
    state = run.state()
    if state["status"] != "running" or run.engine_running():
        return False
    run.record({"type": "status", "status": "paused", "pausedFor": "user", "failureDetail": why})
    run.save()
    git = manager.git
    if git is not None:
        try:
            run.commit(git, f"run {run.id}: paused ({why})")
        except SpecfluxError:
            pass  # the history is on disk; the next drive commits it
    return True


def cut_short(manager: "TaskStateManager", run: "Run", why: str) -> str | None:
    """After the drive of `run` was cut short by `why`: the line saying so and what to do next (the
    run paused if it was left running), or None when the run was not left running (the error
    that cut it short says it all: it was refused before it drove anything)."""
    try:
        if not pause_left_running(manager, run, why):
            return None
    except (OSError, SpecfluxError) as e:  # a full disk refuses the pause too: say so, never a traceback
        return (f"run {run.id} stopped ({why}) and could not record its pause ({e}): it shows `running` "
                f"until `specflux flow resume {run.id}`, which goes on from where it was once this is fixed")
    state = run.state()
    return f"run {run.id}: {state['status']} ({why}); {next_step(run, state) or ''}".rstrip("; ")


def next_step(run: "Run", state: dict[str, Any]) -> str | None:
    """What to do now that the run stopped for now or ended other than `completed` (None then)."""
    status, rid = state["status"], run.id
    if status == "completed":
        return None
    if status == "paused":
        if state.get("pausedFor") == "approval":
            return f"waiting for approval: specflux flow approve {rid}  (or: specflux flow reject {rid} --note ...)"
        if str(state.get("pausedFor") or "").startswith("git:"):
            return f"paused: {state['pausedFor'][4:].strip()}"
        return f"paused: `specflux flow resume {rid}` goes on from here; `specflux flow stop {rid}` ends it"
    if status == "running":
        return f"left running: `specflux flow resume {rid}` goes on from where it was"
    branch = state.get("branch")
    failed = [t["id"] for t in state.get("tasks") or [] if t["status"] != "complete"]
    kept = state.get("stoppedBranches") or {}
    where = (f"task {', '.join(f'{t} on {b}' for t, b in kept.items())}" if kept
             else f"the attempts' commits are on branch {branch}" if branch else "the attempts are in the run's history")
    again = f"`specflux flow start {' '.join(failed)}`" if failed else "`specflux flow start`"
    if status == "user_exit":
        return f"stopped: {where}; {again} starts again"
    why = state.get("failureReason") or "failed"
    return f"failed ({why}): {where}; `specflux flow log {rid}` says what each step did; fix that, then {again}"
