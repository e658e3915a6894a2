"""`specflux claims` (the shared queue's claims, `claims release ID`), and the remote side of the flow
commands: `flow start --remote` (this clone as one worker) and `flow status --remote` (the whole
queue). Arguments in, library calls (`specflux.flow.remote`), output."""

from __future__ import annotations

import os
import socket

from specflux.base.errors import NotFoundError, UsageError
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


def _who(claims) -> str:
    """The person at this clone, for what they do by hand on the remote: git's user, else user@host."""
    import getpass

    name = claims.remote.git("config", "user.name").stdout.strip()
    email = claims.remote.git("config", "user.email").stdout.strip()
    if name or email:
        return f"{name} <{email}>".strip()
    return f"{getpass.getuser()}@{socket.gethostname()}"


@command("claims")
def cmd_claims(args) -> int:
    from specflux.base.escape import safe
    from specflux.flow.remote import queue

    claims = _claims(args)
    ids = [i.lstrip("#") for i in args.ids]
    if args.action == "release":
        if len(ids) != 1:
            raise UsageError("claims release needs one task ID: `specflux claims release ID`")
        released = queue.release(claims, ids[0], _who(claims), force=args.force)
        if released is None:
            raise NotFoundError(f"no claim on task {ids[0]} on {claims.remote.name}")
        live = "" if released["stale"] else f"; its worker's work on the task is dropped (its lease had " \
                                            f"{released['leaseLeftS']:.0f} s left)"
        print(safe(f"released the claim of {released['worker']} (run {released['run']}) on task {released['task']}{live}"))
        return 0
    if args.action == "confirm":
        if not ids:
            raise UsageError("claims confirm needs the task IDs: `specflux claims confirm ID [ID...]`")
        for done in queue.confirm(claims, ids, _who(claims)):
            print(safe(f"confirmed task {done['task']}'s completion on {claims.remote.name}/{claims.remote.branch} "
                       f"(at {done['commit'][:12]}, by {done['confirmedBy']}): its dependents go ahead"))
        return 0
    if ids:
        raise UsageError(f"unknown claims action {args.ids[0]!r}: `specflux claims` lists, `claims release ID` frees "
                         "one, `claims confirm ID` vouches for a completion")
    cleared = queue.tidy(claims, _who(claims))
    rows = queue.claim_rows(claims)
    doubtful = queue.unconfirmed(claims)
    if args.json:
        emit_json(rows)
        return 0
    lines = [_claim_table(rows, claims.remote.name)]
    lines += _cleared_lines(cleared, claims.remote)
    lines += _unconfirmed_lines(doubtful, claims.remote)
    print("\n".join(lines))
    return 0


def _cleared_lines(cleared, remote) -> list[str]:
    from specflux.base.escape import safe

    return [safe(f"cleared the claim of {r['worker']} (run {r['run']}) on task {r['task']}: there is no task "
                 f"{r['task']} on {remote.name}/{remote.branch}") for r in cleared]


def _unconfirmed_lines(doubtful, remote) -> list[str]:
    from specflux.base.escape import safe

    if not doubtful:
        return []
    lines = [f"unconfirmed: {len(doubtful)} task(s) complete on {remote.name}/{remote.branch} that no integration "
             "completed; their dependents wait until you check and confirm them:"]
    lines += [safe(f"  task {task}: {why}") for task, why in sorted(doubtful.items())]
    lines.append(f"  confirm: specflux claims confirm {' '.join(sorted(doubtful))}   (or set a task pending to have it "
                 "done again)")
    return lines


def _claim_table(rows, remote: str) -> str:
    from specflux.base.escape import safe
    from specflux.surface.views import table

    if not rows:
        return f"no claims on {remote}"
    return safe(table(["TASK", "WORKER", "RUN", "CLAIMED", "LEASE", ""],
                      [[r["task"], r["worker"], r["run"], r["claimedAt"][:19].replace("T", " "), _left(r["leaseLeftS"]),
                        " ".join(x for x in ("stale" if r["stale"] else "", r.get("note", "")) if x)] for r in rows]))


def work(args, agents, say) -> int:
    """`flow start --all --remote NAME`: this clone as one worker of the shared queue. `agents`: the
    Agents, or what makes them (called when the first run starts)."""
    from pathlib import Path

    from specflux.base.escape import safe

    from specflux.flow.remote.warm import warm_up
    from specflux.flow.remote.worker import Options, Worker

    warm_up()  # the run engine loads while the worker fetches and claims (`agents` builds on it: made when needed)
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
                      workflow=args.workflow, max_iterations=args.max_iterations, token_budget=args.token_budget,
                      wait_s=None if args.wait is None else (cfg.give_up_s if args.wait < 0 else args.wait))
    root = Path(manager.git.root)
    if args.wait is not None and args.wait < 0 and args.wait != -1.0:
        raise UsageError("--wait takes a number of seconds (0 or more), or nothing for [remote] give_up_s")
    if args.parallel and args.parallel > 1:  # N workers in worktrees of this clone
        from specflux.flow.remote.crew import run_crew

        print(f"workers {options.worker}/1..{args.parallel} on {options.remote}", flush=True)
        report = run_crew(root, options, agents() if callable(agents) else agents, args.parallel, open_manager=lambda place: open_manager(str(place)),
                          say=say)
    else:
        worker = Worker(root, options, agents, open_manager=lambda: open_manager(args.root, git=manager.git), say=say)
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
    if report.stopped:
        print(safe(f"  stopped: {report.stopped}"))
    return 1 if report.lost or report.conflicts or report.unfinished or report.held_back else 0


def queue_status(args) -> int:
    """`flow status --remote NAME`: the queue on the remote, every worker's claims and runs."""
    from specflux.base.escape import safe
    from specflux.flow.remote.queue import queue_state, tidy
    from specflux.surface.views import cost_text, tokens_text

    claims = _claims(args)
    cleared = tidy(claims, _who(claims))
    state = queue_state(claims)
    if args.json:
        emit_json({**state, "cleared": cleared})
        return 0
    m = state["metrics"]
    counts: dict[str, int] = {}
    for status in state["tasks"].values():
        counts[status] = counts.get(status, 0) + 1
    lines = [safe(f"queue on {state['remote']}/{state['branch']} ({(state['tip'] or 'empty')[:12]}): "
                  + ", ".join(f"{n} {s}" + (f" ({len(state['unconfirmed'])} unconfirmed)" if s == "complete" and
                                             state["unconfirmed"] else "") for s, n in sorted(counts.items()))),
             f"  {len(state['runs'])} run(s) integrated: {m['tasksCompleted']} task(s) complete, {m['tasksFailed']} failed; "
             f"{m['totalAttempts']} coder attempt(s), {m['totalReviews']} review(s); {tokens_text(m)}, cost {cost_text(m)}"]
    for worker, tasks in state["workers"].items():
        lines.append(safe(f"  {worker}: task(s) {', '.join(tasks)}"))
    lines.append(_claim_table(state["claims"], state["remote"]))
    lines += _cleared_lines(cleared, claims.remote)
    lines += _unconfirmed_lines(state["unconfirmed"], claims.remote)
    lines += worker_lines(open_manager(args.root).ws.dir)
    print("\n".join(lines))
    return 0




def worker_lines(ws_dir) -> list[str]:
    """What the worker in this clone is doing (`flow status`), as lines; [] when none runs here."""
    from specflux.base.escape import safe
    from specflux.flow.remote.note import WorkerNote, describe

    note = WorkerNote(ws_dir).read()
    return [safe(f"  {describe(note)}")] if note else []
