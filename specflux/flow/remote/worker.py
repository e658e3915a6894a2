"""A worker of a shared queue: this clone, one of many, taking tasks from a git remote.

Round and round: fetch; read the queue as the remote branch has it; take the first ready task (its
dependencies complete on the remote, in the queue's order) that no one claims, else one whose claim
is stale (a takeover); only with the claim made, check once more that the task is still to do,
then run it (the run engine of `flow start`, on a local branch `specflux/work/<task>` started
from the remote branch) while the lease is renewed; and integrate the result. A dependency counts
as complete only when its completion is confirmed (records.py): one that a push made round the
queue holds its dependents back until a person confirms it. When nothing is ready the worker says
why and waits, or stops (idle.py).

What a worker leaves when it cannot integrate stays on a local branch: `specflux/dropped/<task>/<run>`
when its claim was lost, `specflux/work/<task>` when the run did not finish.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specflux.base.errors import UsageError
from specflux.base.records import Factory, record
from specflux.flow.remote.claims import Claim, Claims
from specflux.flow.remote.integrate import Integrated, integrate, keep_conflicted
from specflux.flow.remote.lease import Lease
from specflux.flow.remote.idle import Idle
from specflux.flow.remote.note import WorkerNote
from specflux.flow.remote.records import Verifier
from specflux.flow.remote.transport import Remote, backoff

if TYPE_CHECKING:
    from specflux.flow.steps.roles import Agents
    from specflux.store.manager import TaskStateManager

WORKABLE = ("pending", "in_progress", "review")  # what the remote may still need done


@record
class Options:
    remote: str = "origin"
    worker: str = ""
    lease_s: float = 60.0
    skew_s: float = 5.0
    poll_s: float = 1.0
    give_up_s: float = 3600.0
    workflow: str = "queue"
    max_iterations: int | None = None
    token_budget: int | None = None
    wait_s: float | None = None  # --wait: how long to wait for a chain to open when nothing is claimable


@record
class Report:
    worker: str
    integrated: dict[str, str] = Factory(dict)  # task -> its status on the remote
    lost: dict[str, str] = Factory(dict)  # task -> why its result was dropped
    conflicts: dict[str, str] = Factory(dict)  # task -> the branch its work is on
    unfinished: dict[str, str] = Factory(dict)  # task -> the run's status
    runs: list[str] = Factory(list)
    stopped: str = ""  # why the worker stopped, in words
    held_back: dict[str, dict[str, str]] = Factory(dict)  # task -> {unconfirmed upstream: why}
    timings: dict[str, list[float]] = Factory(lambda: {"claim": [], "renew": [], "integrate": []})

    def as_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "integrated": self.integrated, "lost": self.lost, "conflicts": self.conflicts,
                "unfinished": self.unfinished, "runs": self.runs, "stopped": self.stopped, "heldBack": self.held_back,
                "timings": self.timings}


def new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(3).hex()}"


# Workers started at once all try the queue's first ready task; each that lost it tries one of the
# next SPREAD ready tasks at random rather than the next, where the others that lost it go too
# (every lost race is a push round trip: the last of four lost three, ~0.2 s before its agent).
SPREAD = 4


def _spread(candidates: list[str], start: int, free: int) -> None:
    """Bring one of the next SPREAD free candidates from `start` on (of the first `free`, the
    ready ones; takeovers stay after them) to `start`, at random; the rest keep their order."""
    pick = start + random.randrange(max(1, min(SPREAD, free - start)))
    if start < pick < free:
        candidates.insert(start, candidates.pop(pick))


class Worker:
    def __init__(self, root: Path, options: Options, agents: "Agents | Callable[[], Agents]", *,
                 open_manager: Callable[[], "TaskStateManager"], say: Callable[[str], None] = lambda line: None,
                 branch: str | None = None, track_as: str | None = None):
        """`agents`: the Agents, or what makes them when the first run starts (the engine they need
        loads meanwhile: warm.py); `branch`: the queue's branch (default: the one checked out);
        `track_as`: the worker's own tracking refs, for one of several workers in worktrees of one
        clone (which goes home to no branch)."""
        from specflux.flow.lanes.worktrees import current_branch

        self.root, self.options, self.open_manager, self.say = root, options, open_manager, say
        self._agents = agents
        branch = branch or current_branch(root)
        if not branch:
            raise UsageError("a worker works from a branch: check out the queue's branch (not a detached HEAD)")
        self.home = None if track_as else branch
        self.note = WorkerNote(open_manager().ws.dir)
        self.remote = Remote(root, options.remote, branch, give_up_s=options.give_up_s, say=say,
                             on_wait=lambda since: self.note.write(waitingSince=None if since is None else
                                                                   time.strftime("%H:%M:%S", time.localtime(since))),
                             track_as=track_as)
        if self.remote.url() is None:
            raise UsageError(f"no git remote {options.remote!r} here (see `git remote -v`)")
        self.claims = Claims(self.remote, options.lease_s, options.skew_s)
        self.verifier = Verifier(self.remote)
        self._tasks: set[str] = set()  # the tasks the branch has, as last read
        self.report = Report(options.worker)
        self._at: str | None = None  # the commit this worker last checked out detached, while HEAD stays there

    @property
    def agents(self) -> "Agents":
        if callable(self._agents):
            self._agents = self._agents()
        return self._agents

    # ------------------------------------------------------------------ the loop

    def run(self) -> Report:
        if self.home is None:  # one of a crew: the crew holds the clone's worker lock
            return self._loop()
        from specflux.flow.remote.one_worker import only_worker

        with only_worker(self.root, self.options.worker, self.remote.name, self.remote.branch):
            return self._loop()

    def _loop(self) -> Report:
        dirty = self.remote.git("status", "--porcelain", "--untracked-files=no").stdout.strip()
        if dirty:
            raise UsageError("a worker needs a clean tree (it checks out what the remote has): commit or put away "
                             f"{', '.join(line[3:] for line in dirty.splitlines()[:5])}")
        self.note.write(worker=self.options.worker, remote=self.remote.name, branch=self.remote.branch,
                        doing="looking for a task")
        idle = Idle(self.say, f"{self.remote.name}/{self.remote.branch}", poll_s=self.options.poll_s,
                    wait_s=self.options.wait_s)
        fruitless = 0  # claim rounds in a row that got nothing
        try:
            while True:
                self.remote.fetch()
                self._checkout_tip()
                claims = self.claims.fetched()
                ready, held_back, rest = self._ready()
                self._clear_missing(claims)
                free = [t for t in ready if t not in claims]
                stale = [t for t in ready if t in claims and self.claims.stale(claims[t])]
                if not free and not stale:
                    self.report.held_back = held_back
                    held = {t: claims[t] for t in ready if t in claims}
                    if not idle.waits(held, held_back, rest):
                        self.report.stopped = idle.why
                        break
                    self._nap(held)
                    continue
                idle.reset()
                self.agents  # made (an agent CLI that is not there said) before the first claim, not after it
                got = self._claim(free, stale, claims)
                if got is None:  # the branch moved, or every candidate was taken: look again
                    fruitless += 1
                    if fruitless > 1:  # a remote that refuses for another reason is not hammered
                        time.sleep(backoff(fruitless - 1, base=0.05, cap=2.0))
                    continue
                fruitless = 0
                task, claim, run_id, checked = got
                self.say(f"task {task}: claimed by {self.options.worker} (run {run_id}, lease {self.options.lease_s:g} s)")
                self.note.write(doing=f"working (run {run_id})", task=task)
                self._work(task, claim, run_id, checked)
                self.note.write(doing="looking for a task", task=None)
                from specflux.base import interrupts

                if interrupts.pressed:  # Ctrl-C: the run paused, its claim released; no next task
                    self.report.stopped = "its run was stopped or interrupted (Ctrl-C, a lost claim): no next task"
                    break
        finally:
            self._go_home()
            self.note.clear()
        return self.report

    def _nap(self, held: dict[str, Claim]) -> None:
        """A poll interval; and, while this worker waits only on other workers' claims, more of them
        for as long as the remote's refs are the ones last fetched and none of those claims has run
        out: each look a `git ls-remote` (one round trip) instead of a fetch and a read of every task
        file. A renewal, an integration, a release or a push to the branch ends the nap."""
        while True:
            time.sleep(self.options.poll_s * random.uniform(0.5, 1.5))
            if not held or any(self.claims.stale(c) for c in held.values()) or self.remote.moved():
                return

    def _claim(self, free: list[str], stale: list[str], claims: dict[str, Claim]) -> tuple[str, Claim, str, bool] | None:
        """Claim the first task of `free` (then of `stale`: a takeover) that this worker gets, in the
        queue's order, judged from the last fetch: a task lost to another worker moves this one on to
        one of the next few at once (`_spread`; no sleep, no fetch: that task is known taken, the
        next may not be). Each
        claim is pushed with the lease that the branch is still at the tip it was judged from, so a
        claim made needs no second look (`checked`). (task, claim, run id, checked), or None when
        the branch moved (what is to do may have changed) or every candidate was taken."""
        tip = self.remote.tip()
        candidates = [*free, *stale]
        for at, task in enumerate(candidates):
            run_id = new_run_id()
            began = time.monotonic()
            if task in free:
                claim = self.claims.create(task, self.options.worker, run_id, tip=tip)
            else:
                old = claims[task]
                self.say(f"task {task}: the claim of {old.worker} (run {old.run}) is stale "
                         f"(lease until {old.lease_until}); taking it over")
                claim = self.claims.swap(old, self.options.worker, run_id, tip=tip)
            if claim is not None:
                self.report.timings["claim"].append(time.monotonic() - began)
                return task, claim, run_id, tip is not None
            if tip is not None and self.claims.lost_to_branch:
                return None
            self.say(f"task {task}: another worker claimed it first")
            _spread(candidates, at + 1, len(free))
        return None

    def _checkout_tip(self) -> None:
        tip = self.remote.tip()
        if tip is not None and tip == self._at:
            return  # HEAD is there already (this worker put it there and moved it nowhere since)
        done = self.remote.git("checkout", "-q", "--detach", self.remote.tracking)
        if done.returncode:
            raise UsageError(f"cannot check out {self.remote.name}/{self.remote.branch}: {done.stderr.strip()}")
        self._at = tip

    def _ready(self) -> tuple[list[str], dict[str, dict[str, str]], dict[str, str]]:
        """Tasks still to do on the remote whose dependencies are complete there and confirmed
        (records.py), in the queue's order; {task: why} of those held back by a completion no
        integration made; and the other tasks still to do (waiting for their chains)."""
        from specflux.store.chain import Graph

        graph = Graph.load(self.open_manager())
        self._tasks = set(graph.status)
        todo = [t for t in graph.order() if graph.status[t] in WORKABLE]
        open_ = [t for t in todo if all(graph.status.get(d) == "complete" for d in graph.deps[t])]
        upstream = sorted({d for t in open_ for d in graph.deps[t]})
        tip = self.remote.rev(self.remote.tracking)
        doubtful = self.verifier.unconfirmed(tip, upstream, {d: "complete" for d in upstream}) if tip and upstream else {}
        held_back = {t: {d: doubtful[d] for d in graph.deps[t] if d in doubtful}
                     for t in open_ if any(d in doubtful for d in graph.deps[t])}
        rest = {t: ", ".join(f"task {d} ({graph.status.get(d, 'missing')})" for d in graph.deps[t]
                             if graph.status.get(d) != "complete") for t in todo if t not in open_}
        return [t for t in open_ if t not in held_back], held_back, rest

    def _clear_missing(self, claims: dict[str, Claim]) -> None:
        """Clear the stale claims of tasks the branch does not have (`specflux claims` clears live ones too)."""
        for task, claim in claims.items():
            if task not in self._tasks and self.claims.stale(claim) and self.claims.drop(
                    claim, self.options.worker, f"no task {task} on {self.remote.name}/{self.remote.branch}"):
                self.say(f"cleared the stale claim of {claim.worker} (run {claim.run}) on task {task}: there is no "
                         f"task {task} on {self.remote.name}/{self.remote.branch}")

    def _go_home(self) -> None:
        """Back on the branch the worker started on, brought up to the remote where it can be."""
        if self.home is None:
            return
        self.remote.git("checkout", "-q", self.home)
        self.remote.git("-c", "maintenance.auto=false", "merge", "-q", "--ff-only", self.remote.tracking)
        self.remote.maintain()  # what the fetches left undone, once, now that no run waits on it

    # ------------------------------------------------------------------ one task

    def _work(self, task: str, claim: Claim, run_id: str, checked: bool = False) -> None:
        self._at = None  # HEAD moves onto the task's branch
        if not checked:  # claimed: is it still to do? (another worker may have integrated it just now)
            seen = self.remote.tip()
            self.remote.fetch()
            if self.remote.tip() != seen:
                self._checkout_tip()
                self._at = None
                if task not in self._ready()[0]:
                    self.claims.release(task, claim.sha)
                    self.say(f"task {task}: done on the remote already; claim released")
                    return
        branch = f"specflux/work/{task}"
        made = self.remote.git("checkout", "-q", "-b", branch)
        if made.returncode and self.remote.rev(f"refs/heads/{branch}"):
            # a worker killed before it left this: kept, not overwritten
            self.remote.git("branch", "-m", branch, f"specflux/kept/{task}/{time.strftime('%Y%m%d-%H%M%S')}")
            made = self.remote.git("checkout", "-q", "-b", branch)
        if made.returncode:
            raise UsageError(f"cannot start the branch {branch}: {made.stderr.strip()}")
        current: dict[str, Any] = {}

        def on_lost(why: str) -> None:
            run = current.get("run")
            self.say(f"task {task}: {why}; stopping its run")
            if run is not None:
                from specflux.flow import runs

                runs.control(run, "stop", note=f"lost the claim on task {task}: {why}")

        with Lease(self.claims, claim, self.options.worker, run_id, on_lost=on_lost, say=self.say) as lease:
            try:
                state = self._run(task, run_id, current)
            except BaseException:  # the run could not start or was cut short: the claim is not left behind
                with lease.held() as held:
                    lease.stop_renewing()
                    self.claims.release(task, held.sha)
                raise
            renewals = lease.renewals
            if lease.lost is None and state is not None and state["status"] in ("completed", "failed"):
                self.note.write(doing=f"integrating (run {run_id}) into {self.remote.name}/{self.remote.branch}")
                result = integrate(self.remote, lease, task, say=self.say)
            else:
                result = None
        self.report.runs.append(run_id)
        if renewals:
            self.report.timings["renew"].append(lease.renew_seconds / max(1, renewals))
        if result is None and lease.lost is None:
            status = state["status"] if state else "not started"
            self.claims.release(task, lease.claim.sha)
            self.report.unfinished[task] = status
            self.say(f"task {task}: its run ended {status}; claim released, the work is kept on the local branch {branch}")
            return
        if result is None or result.outcome == "lost":
            why = lease.lost or (result.detail if result else "its claim was lost")
            kept = f"specflux/dropped/{task}/{run_id}"
            self.remote.git("branch", "-m", branch, kept)
            self.report.lost[task] = why
            self.say(f"task {task}: {why}; its result is dropped, not integrated (kept on the local branch {kept})")
            return
        self.report.timings["integrate"].append(result.seconds)
        if result.outcome == "conflict":
            self._blocked(task, run_id, branch, result)
            return
        status = (state or {}).get("tasks", [{}])[0].get("status", "?")
        self.report.integrated[task] = status
        self._checkout_tip()
        self.remote.git("branch", "-D", branch)
        self.say(f"task {task}: {status}, integrated into {self.remote.name}/{self.remote.branch}"
                 + (f" after {result.tries} tries" if result.tries > 1 else ""))

    def _run(self, task: str, run_id: str, current: dict) -> dict[str, Any] | None:
        from specflux.flow import runs

        manager = self.open_manager()
        o = self.options
        run = runs.start(manager, [task], workflow=o.workflow, agents=self.agents, max_iterations=o.max_iterations,
                         token_budget=o.token_budget, parallel=1, say=self.say, run_id=run_id,
                         checked_out=True)  # the remote's tip, into the tree `_loop` found clean
        run.maintain = False  # git's upkeep runs once, as the worker stops (`_go_home`), not after every task
        current["run"] = run
        return runs.drive(manager, run, self.agents, say=self.say)

    def _blocked(self, task: str, run_id: str, branch: str, result: Integrated) -> None:
        """A real conflict: the work onto `specflux/conflict/<task>`, the task `blocked` on the remote."""
        kept = keep_conflicted(self.remote, task)
        note = f"{result.detail}; the work is on the branch {kept}: merge it by hand, then set the task pending"
        self.say(f"task {task}: {note}")
        self.report.conflicts[task] = kept
        self.remote.git("branch", "-m", branch, f"specflux/dropped/{task}/{run_id}")
        for _ in range(3):  # the claim is still ours: mark the task blocked, integrated like any result
            claim = self.claims.read().get(task)
            self._checkout_tip()
            if claim is None or claim.worker != self.options.worker:
                self.say(f"task {task}: the claim is no longer ours; not marking it blocked")
                return
            self.remote.git("checkout", "-q", "-B", branch)
            self._at = None
            self.open_manager().set_status(task, "blocked", commit=True, reason=note,
                                           trailers={"Specflux-Run": run_id})
            with Lease(self.claims, claim, self.options.worker, run_id) as lease:
                done = integrate(self.remote, lease, task, say=self.say)
            self._checkout_tip()
            self.remote.git("branch", "-D", branch)
            if done.outcome != "conflict":
                return
