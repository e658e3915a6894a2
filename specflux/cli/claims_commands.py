"""`specflux claims` (the shared queue's claims, `claims release ID`), and the remote side of the flow
commands: `flow start --remote` (this clone as one worker) and `flow status --remote` (the whole
queue). Arguments in, library calls (`specflux.flow.remote`), output."""

from __future__ import annotations

import os
import socket

from specflux.base.errors import UsageError
from specflux.cli import command
from specflux.cli.output import emit_json
from specflux.surface.tasks import open_manager


def _claims(args):
    from pathlib import Path

    from specflux.flow.remote.queue import open_claims

    manager = open_manager(args.root)
    if manager.git is None:
        raise UsageError("claims live on a git remote: run this in a clone")
    cfg = manager.ws.config.remote
    return open_claims(Path(manager.git.root), args.remote or "origin", cfg.lease_s, cfg.skew_s)


def _left(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 0 else f"{-seconds:.0f} s ago"


@command("claims")
def cmd_claims(args) -> int:
    from specflux.base.escape import safe
    from specflux.flow.remote import queue

    claims = _claims(args)
    if args.action == "release":
        if not args.id:
            raise UsageError("claims release needs the task's ID")
        released = queue.release(claims, args.id.lstrip("#"))
        if released is None:
            raise UsageError(f"no claim on task {args.id} on {claims.remote.name}")
        print(safe(f"released the claim of {released['worker']} (run {released['run']}) on task {released['task']}"))
        return 0
    if args.id:
        raise UsageError(f"unknown claims action {args.id!r}: `specflux claims` lists, `claims release ID` frees one")
    rows = queue.claim_rows(claims)
    if args.json:
        emit_json(rows)
        return 0
    print(_claim_table(rows, claims.remote.name))
    return 0


def _claim_table(rows, remote: str) -> str:
    from specflux.base.escape import safe
    from specflux.surface.views import table

    if not rows:
        return f"no claims on {remote}"
    return safe(table(["TASK", "WORKER", "RUN", "CLAIMED", "LEASE", ""],
                      [[r["task"], r["worker"], r["run"], r["claimedAt"][:19].replace("T", " "), _left(r["leaseLeftS"]),
                        "stale" if r["stale"] else ""] for r in rows]))


def work(args, agents, say) -> int:
    """`flow start --all --remote NAME`: this clone as one worker of the shared queue."""
    from pathlib import Path

    from specflux.flow.remote.worker import Options, Worker

    if args.ids or args.prd:
        raise UsageError("a worker takes its tasks from the shared queue: `flow start --all --remote NAME`, no IDs")
    manager = open_manager(args.root)
    if manager.git is None:
        raise UsageError("--remote needs a git clone of the shared repository")
    cfg = manager.ws.config.remote
    lease = args.lease if args.lease is not None else cfg.lease_s
    if lease <= 0:
        raise UsageError("--lease must be a positive number of seconds")
    options = Options(remote=args.remote, worker=args.worker or f"{socket.gethostname()}:{os.getpid()}",
                      lease_s=lease, skew_s=cfg.skew_s, poll_s=cfg.poll_s, give_up_s=cfg.give_up_s,
                      workflow=args.workflow, max_iterations=args.max_iterations, token_budget=args.token_budget)
    root = Path(manager.git.root)
    if args.parallel and args.parallel > 1:  # N workers in worktrees of this clone
        from specflux.flow.remote.crew import run_crew

        print(f"workers {options.worker}/1..{args.parallel} on {options.remote}", flush=True)
        report = run_crew(root, options, agents, args.parallel, open_manager=lambda place: open_manager(str(place)),
                          say=say)
    else:
        worker = Worker(root, options, agents, open_manager=lambda: open_manager(args.root), say=say)
        print(f"worker {options.worker} on {options.remote}/{worker.home}", flush=True)
        report = worker.run()
    done = ", ".join(f"{t} {s}" for t, s in report.integrated.items()) or "none"
    print(f"worker {options.worker}: integrated {len(report.integrated)} task(s) ({done})")
    for task, why in report.lost.items():
        print(f"  task {task}: result dropped ({why})")
    for task, branch in report.conflicts.items():
        print(f"  task {task}: blocked by a merge conflict; the work is on {branch}")
    for task, status in report.unfinished.items():
        print(f"  task {task}: its run ended {status}; the work is on the local branch specflux/work/{task}")
    return 1 if report.lost or report.conflicts or report.unfinished else 0


def queue_status(args) -> int:
    """`flow status --remote NAME`: the queue on the remote, every worker's claims and runs."""
    from specflux.base.escape import safe
    from specflux.flow.remote.queue import queue_state

    claims = _claims(args)
    state = queue_state(claims)
    if args.json:
        emit_json(state)
        return 0
    m = state["metrics"]
    counts: dict[str, int] = {}
    for status in state["tasks"].values():
        counts[status] = counts.get(status, 0) + 1
    lines = [safe(f"queue on {state['remote']}/{state['branch']} ({(state['tip'] or 'empty')[:12]}): "
                  + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))),
             f"  {len(state['runs'])} run(s) integrated: {m['tasksCompleted']} task(s) complete, {m['tasksFailed']} failed; "
             f"{m['totalAttempts']} coder attempt(s), {m['totalReviews']} review(s); "
             f"tokens: {m['inputTokens']} input, {m['outputTokens']} output"]
    for worker, tasks in state["workers"].items():
        lines.append(safe(f"  {worker}: task(s) {', '.join(tasks)}"))
    lines.append(_claim_table(state["claims"], state["remote"]))
    lines += worker_lines(open_manager(args.root).ws.dir)
    print("\n".join(lines))
    return 0




def worker_lines(ws_dir) -> list[str]:
    """What the worker in this clone is doing (`flow status`), as lines; [] when none runs here."""
    from specflux.base.escape import safe
    from specflux.flow.remote.note import WorkerNote, describe

    note = WorkerNote(ws_dir).read()
    return [safe(f"  {describe(note)}")] if note else []
