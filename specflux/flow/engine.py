"""The engine: drives a run step by step, under control enforced in code.

Before every step it reads the run's control events (pause, stop, approve, reject from any
terminal) and its limits (the run's iteration cap and token budget). Each step is bracketed by
events appended before and after it (`step_started`, `step_finished`), and each decision is
recorded before its effects (tasks accepted or failed, new steps requested), so that after
`kill -9` at any moment `drive()` continues exactly where the run was: a finished step is never
run again, an interrupted one is run again once (its attempt committed as such first). The log
is fsynced once per step (SYNCED): at `step_started`, or when a decision's effects journal the
task files they write (flow/record/journal.py, which also writes back after a power loss).

The decision itself comes from a Spec (decisions.py): the engine gives it the state, the step's
response and a context whose `now` and `seed` are recorded in the step's event, so a replay of
the run, fed the recorded `now`/`seed`, gets the same decisions.
"""

from __future__ import annotations

import os
import random
import time
from typing import TYPE_CHECKING, Any, Callable

from specflux.base.crashpoint import ENV as CRASH_ENV
from specflux.base.crashpoint import crash_point
from specflux.base.errors import SpecfluxError
from specflux.base.durability import synced_together
from specflux.base.files import journaled
from specflux.format.render import now_stamp
from specflux.flow.early_acceptance import InCommit, chain_output
from specflux.flow.decisions import (AgentErrorInfo, AgentResponse, Annotate, Decision, DecisionContext,
                                     RequestApproval, RequestWork)
from specflux.flow.record.journal import FILES, UNDONE, RunJournal, redo_lost_writes
from specflux.flow.record.stop_watch import StopWatcher
from specflux.flow.steps.evidence import untested_acceptance
from specflux.flow.steps.roles import Interrupted, StepResult, failed_attempt
from specflux.flow.workflow.limits import limit_reached
from specflux.flow.state import FINISHED, copied, in_flight, task_by_id, waiting

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager
    from specflux.flow.decisions import Spec
    from specflux.flow.steps.roles import Roles
    from specflux.flow.record.run import Run

# The events after which the log is fsynced (with every event before them): a step's start, before
# its agent works, a change of the run's status, before the engine stops, and the journal of the
# task files a decision's effects write (flow/record/journal.py), before they are written. The
# rest of a step's events (its result, the decision, the steps requested) are written at once, so
# that `kill -9` loses none of them, and reach the disk with the next of these. A step whose
# effects were journaled had its fsync there: the next `step_started` waits for the next one.
# One fsync per step.
SYNCED = frozenset({"step_started", "status", FILES, UNDONE})


class Engine:
    accepts_in_commit = True  # a task accepted in its reviewer's commit (early_acceptance.py)

    def __init__(self, manager: "TaskStateManager", run: "Run", spec: "Spec", roles: "Roles", *,
                 say: Callable[[str], None] = lambda line: None,
                 moments: dict[str, tuple[int, int]] | None = None,
                 stamps: dict[str, str] | None = None,
                 clock: Callable[[], float] = time.time,
                 stamp_clock: Callable[[], str] = now_stamp):
        """`moments` and `stamps`: for a replay, the recorded (now, seed) of each decision and the
        session time of each step's try (keys `s8#1`)."""
        self.manager, self.run, self.spec, self.roles = manager, run, spec, roles
        self.say, self.moments, self.stamps, self.clock = say, moments or {}, stamps or {}, clock
        self.stamp_clock = stamp_clock
        self._deciding: dict[str, Any] | None = None  # the finished step being decided on
        self._watcher: StopWatcher | None = None  # one for every step of a drive
        self._journaled = False  # this step's effects were journaled: the log was fsynced then
        self.recheck: Callable[[], str | None] | None = None  # why its holds are lost (holds_check.py)
        own_spec = type(spec).__module__.startswith("specflux.")  # (pure: decided once before a commit)
        fold = own_spec and self.accepts_in_commit and run.state().get("acceptInCommit")
        self.in_commit = InCommit(self) if fold else None
        roles.accept_in_commit = self.in_commit  # a reviewer's acceptance goes into its commit

    # ----------------------------------------------------------------- driving

    def drive(self) -> dict[str, Any]:
        """Run until the run completes, fails, pauses or waits for approval; returns the state."""
        with self.run.engine_lock():
            state = self.run.state()
            if state["status"] in FINISHED:
                return state
            for line in redo_lost_writes(self.run, self.manager.ws.root, self.manager.git):
                self.say(line)
            self._settle_last_decision()  # the effects a crash cut short, the end of the run included
            if self.run.state()["status"] in FINISHED:
                self._save_history()
                return self.run.state()
            if self.run.state()["status"] != "running":
                self._record({"type": "status", "status": "running"})
            if not self.run.state().get("booted"):
                self._boot()
            self._decide_undecided()
            try:
                while self._advance():
                    pass
            finally:
                if self._watcher is not None:
                    self._watcher.close()
                    self._watcher = None
                self._save_history()
            return self.run.state()

    def _save_history(self) -> None:
        """state.json and narrative.md brought up to date, and, once the run stops for now
        (finished or paused), its history committed."""
        self.run.events.sync()  # the last step's events, whatever made the run stop
        state = self.run.state()
        git = self.manager.git
        if git is None or state["status"] == "running":
            self.run.save()
            return
        why = state.get("pausedFor") or state.get("failureReason")
        subject = f"run {self.run.id}: {state['status']}" + (f" ({why})" if why else "")
        try:
            self.run.commit(git, subject)
        except SpecfluxError as e:
            self.say(f"could not commit the run's history: {e}")

    def _boot(self) -> None:
        now, seed = self.run.state().get("bootMoment") or self._moment("boot#1")
        response = AgentResponse(step_id="boot", work_kind="BOOT", run_id=self.run.id)
        decision = self.spec.on_agent_completed(self._view(), response, DecisionContext(now, seed))
        self._record({"type": "boot", "now": now, "seed": seed})
        self._apply(decision, step_id="boot", task_id=None)

    def _advance(self) -> bool:
        """One step of the run; False when the run stops for now (finished, paused, waiting)."""
        if self._tampered():
            return False
        if not self._obey_controls():
            return False
        state = self.run.state()
        if state["status"] != "running" or self._holds_lost():
            return False
        step = in_flight(state) or next(iter(waiting(state)), None)
        if step is None:
            if not state.get("finalized"):
                self._finish("failed", "stalled: the workflow asked for no more work and did not finish")
            return False
        if step["status"] == "WAITING":
            limit = self._limit_reached(state, step)
            if limit:
                self._finish("failed", limit)
                return False
        if step["kind"] == "approval":
            return self._approval(step)
        self._perform(step)
        return True

    def _limit_reached(self, state: dict[str, Any], step: dict[str, Any] | None = None) -> str | None:
        """The limit starting `step` would pass, as `reason: what, with the numbers` (limits.py)."""
        return limit_reached(state, step, events=self.run.events.read)

    def _holds_lost(self) -> bool:
        """Another run took this run's tasks, or their holds are gone: pause, saying who and what to do."""
        why = self.recheck() if self.recheck is not None else None
        if why:
            self._record({"type": "status", "status": "paused", "pausedFor": why})
            self.say(f"paused: {why}")
        return bool(why)

    def _tampered(self) -> bool:
        """A line of the event log that specflux did not write (its chain does not verify): the
        run's record cannot be trusted, so it ends here, saying which line."""
        state = self.run.state()
        if not state.get("tampered") or state["status"] in FINISHED:
            return False
        self._finish("failed", f"tampered: {state['tampered']}")
        return True

    def _try_of(self, step: dict[str, Any]) -> tuple[str, str]:
        """This try of `step`: its key and the time its session entry carries (a replay's recorded one)."""
        key = self.try_key(step)
        return key, self.stamps.get(key) or self.stamp_clock()

    def try_key(self, step: dict[str, Any]) -> str:
        """The key of `step`'s try now in flight (`s8#2`): its recording, its moment, its files are named by it."""
        return f"{step['stepId']}#{self.run.state()['stepTries'].get(step['stepId'], 0) + 1}"

    # ----------------------------------------------------------------- control from any terminal

    def _obey_controls(self) -> bool:
        """Apply the pause/stop/resume requests recorded since the last step; False to stop."""
        for control in list(self.run.state()["controls"]):
            action = control["action"]
            if action in ("approve", "reject"):
                continue  # answered at the approval step
            self._record({"type": "control_handled", "control": control["seq"]})
            if action == "stop":
                self._finish("user_exit", None)
                return False
            if action == "pause":
                self._record({"type": "status", "status": "paused", "pausedFor": "user"})
                return False
        return True

    def _approval(self, step: dict[str, Any]) -> bool:
        """A person answers with `flow approve` / `flow reject`; until then the run waits."""
        answer = next((c for c in self.run.state()["controls"] if c["action"] in ("approve", "reject")), None)
        if answer is None:
            if self.run.state().get("pausedFor") != "approval":
                self._record({"type": "status", "status": "paused", "pausedFor": "approval"})
                self.say(f"waiting for approval: specflux flow approve {self.run.id} (or reject --note ...)")
            return False
        self._record({"type": "control_handled", "control": answer["seq"]})
        self._record({"type": "step_started", "stepId": step["stepId"], "kind": "approval", "taskId": step.get("taskId")})
        output = {"taskId": step.get("taskId"), "approved": answer["action"] == "approve", "note": answer.get("note") or ""}
        self._finish_step(step, StepResult("OK", output))
        return True

    # ----------------------------------------------------------------- one step

    def _perform(self, step: dict[str, Any]) -> None:
        resumed = step["status"] == "RUNNING"
        task_id = step.get("taskId")
        state = self.run.state()
        if task_id and (cur := state["tasks"][state["currentTaskIndex"]] if state["tasks"] else None) \
                and cur["id"] != task_id:
            index = next(i for i, t in enumerate(state["tasks"]) if t["id"] == task_id)
            self._record({"type": "task_changed", "index": index, "taskId": task_id})
        if not resumed:
            self._record({"type": "step_started", "stepId": step["stepId"], "kind": step["kind"], "taskId": task_id})
        else:
            self.say(f"resuming step {step['stepId']} ({step['kind']} on task {task_id}), interrupted before")
        self.say(f"{step['kind']} on task {task_id} (step {step['stepId']})" if task_id else f"{step['kind']}")
        delay = (step.get("payload") or {}).get("delay_s")
        if delay and not self.moments and not resumed:  # a retry's backoff (not in a replay)
            self.say(f"waiting {delay:g}s before retrying {step['kind']}")
            time.sleep(float(delay))
        key, stamp = self._try_of(step)
        before = self._branch_before(step)
        if before is False:
            return
        watcher = self._watcher = self._watcher or StopWatcher(self.run)
        watcher.start()
        try:
            with synced_together():  # the step's writes made durable at once, before it is recorded
                result = self.roles.perform(step, self.run.state(), resumed=resumed, key=key, stamp=stamp)
                result.stamp = stamp
                if before is not None:
                    result = self._branch_after(step, before, result)
        except (Interrupted, KeyboardInterrupt):
            watcher.stop()
            self._interrupted(step, watcher.stopped)
            return
        except SpecfluxError as e:
            if getattr(e, "out_of_space", False):  # a full disk is no failed attempt: paused, resumed once freed
                self._record({"type": "status", "status": "paused", "pausedFor": "user", "failureDetail": str(e)})
                return
            result = StepResult("ERROR", None, error=AgentErrorInfo("ERROR", str(e)))
        finally:
            watcher.stop()
        self._finish_step(step, result)

    def _branch_before(self, step: dict[str, Any]):
        """Where the run's branch is before an agent step (None outside git); False when it is not
        checked out: a person switched branches, and the run pauses rather than commit elsewhere."""
        git = self.manager.git
        if git is None or step["kind"] not in ("coder", "reviewer"):
            return None
        from specflux.flow.steps.branch_guard import where

        here = where(git.root)
        wanted = self.run.state().get("branch")
        if here is not None and wanted and here.branch != wanted:
            self._record({"type": "status", "status": "paused",
                          "pausedFor": f"git: the run's branch {wanted} is not checked out ({here.branch or 'a detached HEAD'} "
                                       f"is); check it out and `specflux flow resume {self.run.id}`"})
            return False
        return here

    def _branch_after(self, step: dict[str, Any], before, result: StepResult) -> StepResult:
        """The step's result, failed when its agent rewrote or switched the run's branch (put back)."""
        from specflux.flow.steps.branch_guard import check, restore

        root = self.manager.git.root
        problem = check(root, before)
        if problem is None:
            return result
        try:
            done = restore(root, before, f"specflux/rejected/{self.run.id}/{step['stepId']}")
        except RuntimeError as e:
            done = f"NOT put back: {e}"
        why = f"{problem}; {done}"
        self.say(f"the branch is the run's: {why}")
        return failed_attempt(step, result, why)

    def _interrupted(self, step: dict[str, Any], by_stop: bool) -> None:
        """`flow stop` (or Ctrl-C) during a step: the session recorded its interruption; the run
        ends as `user_exit` (stop) or pauses (Ctrl-C), and `flow resume` runs the step again."""
        stop = by_stop or any(c["action"] == "stop" for c in self.run.state()["controls"])
        if stop:
            for control in self.run.state()["controls"]:
                if control["action"] == "stop":
                    self._record({"type": "control_handled", "control": control["seq"]})
            self._record({"type": "step_finished", "stepId": step["stepId"], "kind": step["kind"],
                          "taskId": step.get("taskId"), "status": "ERROR",
                          "error": {"type": "INTERRUPTED", "message": "stopped by `flow stop`"}})
            self._finish("user_exit", None)
        else:  # Ctrl-C, or what interrupts as it does (the terminal or the output closed): said with the pause
            from specflux.base.interrupts import why
            self._record({"type": "status", "status": "paused", "pausedFor": "user", **({"failureDetail": why} if why else {})})

    def _finish_step(self, step: dict[str, Any], result: StepResult) -> None:
        key = self.try_key(step)
        made = self.in_commit.take(key, result.output) if self.in_commit is not None else None
        now, seed = made[:2] if made else (result.moment or self._moment(key))  # (moment: before its commit)
        self._record({"type": "step_finished", "stepId": step["stepId"], "kind": step["kind"],
                      "taskId": step.get("taskId"), "now": now, "seed": seed, **result.to_event()})
        self._decide(self.run.state()["lastFinished"], made[2] if made else None)  # (made before its commit)

    def _decide_undecided(self) -> None:
        """A crash between a step's `step_finished` and its decision: make the decision now, from
        the recorded result, `now` and seed (it is a pure function of them: the same decision)."""
        state = self.run.state()
        finished, decided = state.get("lastFinished"), state.get("lastDecision")
        if finished is not None and (decided is None or decided["seq"] < finished["seq"]) \
                and finished.get("error", {}).get("type") != "INTERRUPTED" and "now" in finished:
            self._decide(finished)

    def _decide(self, finished: dict[str, Any], made: Decision | None = None) -> None:
        """The spec's decision on a finished step (its event), recorded and carried out; `made`:
        the one made on it already, before the reviewer's commit (early_acceptance.py)."""
        self._deciding = finished
        try:
            if made is None:
                self._decide_on(finished)
            else:
                self._apply(made, step_id=finished["stepId"], task_id=finished.get("taskId"))
        finally:
            self._deciding = None

    def _decide_on(self, finished: dict[str, Any]) -> None:
        ctx = DecisionContext(finished["now"], finished["seed"])
        step_id, task_id = finished["stepId"], finished.get("taskId")
        try:
            if finished.get("status", "OK") == "OK":
                response = AgentResponse(step_id, finished["kind"], "OK", finished.get("output"), self.run.id, task_id)
                decision = self.spec.on_agent_completed(self._view(), response, ctx)
            else:
                error = finished.get("error") or {}
                info = AgentErrorInfo(error.get("type", "ERROR"), error.get("message", ""), error.get("retryAfterS"))
                attempt = self.run.state()["stepErrors"].get(step_id, 0)
                decision = self.spec.on_agent_error(self._view(), finished["kind"], info, attempt)
        except Exception as e:  # the workflow's own logic broke: the run fails, saying where
            decision = Decision(f"dec-spec-error-{step_id}", finalize=True, failure_reason="error",
                                why=f"the workflow's decision logic failed: {type(e).__name__}: {e}")
        self._apply(decision, step_id=step_id, task_id=task_id)

    # ----------------------------------------------------------------- decisions and their effects

    def _apply(self, decision: Decision, step_id: str, task_id: str | None) -> None:
        based_on = dict(decision.based_on or {})
        self._record({"type": "decision", "stepId": step_id, "taskId": task_id, "edge": based_on.get("edge"),
                      "decision": decision.to_json()})
        if decision.why:
            self.say(f"decision: {decision.why}")
        self._settle_last_decision()

    def _settle_last_decision(self) -> None:
        """Carry out the last decision's effects that are not recorded yet (all of them, or the
        rest after a crash): accept or fail tasks, request steps, finish the run."""
        last = self.run.state().get("lastDecision")
        if last is None:
            return
        decision = Decision.from_json(last["decision"])
        state = self.run.state()
        with journaled(RunJournal(self.manager.ws.root, last["seq"], self._record)):
            for action in decision.actions:
                if isinstance(action, Annotate):
                    self._task_effect(action, state)
        for i, action in enumerate(a for a in decision.actions if isinstance(a, (RequestWork, RequestApproval))):
            step_id = action.step_id or f"s{last['seq']}" + (f"-{i + 1}" if i else "")
            if step_id in self.run.state().get("requestedByLast", ()):
                continue  # requested already, before a crash (and perhaps done since)
            existing = self.run.state()["openSteps"].get(step_id)
            if existing is not None and (existing.get("requestedBy") == last["seq"] or existing["status"] != "FAILED"):
                continue  # requested already (before a crash), or alive: a FAILED one is asked again (a retry)
            if isinstance(action, RequestWork):
                payload = dict(action.payload or {})
                self._record({"type": "step_requested", "stepId": step_id, "kind": action.work_kind, "payload": payload,
                              "taskId": payload.get("taskId") or last.get("taskId"), "decision": last["seq"]})
            else:
                self._record({"type": "step_requested", "stepId": step_id, "kind": "approval",
                              "payload": dict(action.payload or {}), "taskId": last.get("taskId"),
                              "decision": last["seq"]})
        if decision.finalize and self.run.state()["status"] not in FINISHED:
            state = self.run.state()
            if not waiting(state) and not in_flight(state):
                self._finish(*self._outcome(decision, state))

    def _task_effect(self, action: Annotate, state: dict[str, Any]) -> None:
        """`accepted:<id>` completes a task (chain output written, wired downstream, committed),
        `failed:<id>` / `blocked:<id>` set its status; each once."""
        verb, _, task_id = action.key.partition(":")
        if verb not in ("accepted", "failed", "blocked") or not task_id:
            return
        task = task_by_id(state, task_id)
        if task is None:
            return
        wanted = {"accepted": "complete", "failed": "failed", "blocked": "blocked"}[verb]
        if task["status"] == wanted:
            return
        reason = action.value.get("reason") if isinstance(action.value, dict) else (action.value or None)
        trailers = {"Specflux-Run": self.run.id, "Specflux-Role": "engine"}
        if verb == "accepted":
            finished = state.get("lastFinished") or {}  # completed in its reviewer's commit, or now:
            wired, notices = finished.get("wired") or [], []
            if finished.get("accepted") != task_id or self.manager.load(task_id).status != "complete":
                chain = chain_output(self.run.state(), self.manager, self.run.id, task_id)
                outcome = self.manager.complete(task_id, chain["summary"], chain.get("downstream") or None,
                                                commit=self.manager.git is not None, trailers=trailers)
                wired, notices = outcome.wired, outcome.notices
            for target in wired:
                self.say(f"task {task_id} complete; wired into task {target}")
            for notice in notices:
                self.say(notice)
            untested = untested_acceptance(state, task_id, self.manager)
            if untested:
                self.say(f"task {task_id} accepted untested: {untested}")
                reason = f"accepted untested: {untested}"
        else:
            from specflux.flow.steps.reconcile import kept_complete

            if kept_complete(self.manager, self.run.id, task, wanted, self.say, self._record):
                return  # another run's (or a person's) result is never overwritten
            if verb == "failed":
                from specflux.flow.steps.settle import withdraw_claims

                withdrawn = withdraw_claims(self.manager, task)
                if withdrawn:
                    self.say(f"task {task_id} failed: {'; '.join(withdrawn)}")
                    reason = f"{reason}; {'; '.join(withdrawn)}" if reason else "; ".join(withdrawn)
            self.manager.set_status(task_id, wanted, commit=self.manager.git is not None, trailers=trailers,
                                    reason=reason)
        self._record({"type": "task_status", "taskId": task_id, "status": wanted, "reason": reason})

    def _outcome(self, decision: Decision, state: dict[str, Any]) -> tuple[str, str | None]:
        if decision.failure_reason:
            return "failed", decision.failure_reason
        failed = [t for t in state["tasks"] if t["status"] in ("failed", "blocked")]
        if failed:
            reason = failed[0].get("reason") or "tasks_failed"
            return "failed", reason.split(":", 1)[0].strip() or "tasks_failed"
        return "completed", None

    def _finish(self, status: str, reason: str | None) -> None:
        """End the run. `reason` is a failureReason, or `reason: detail` (the numbers, for people).
        No task is left `in_progress` or `review` in its file: each goes back to where it was."""
        detail = None
        if reason and ": " in reason:
            reason, detail = reason.split(": ", 1)
        from specflux.flow.steps.settle import settle_tasks

        for line in settle_tasks(self.manager, self.run):
            self.say(line)
        self._record({"type": "status", "status": status, **({"failureReason": reason} if reason else {}),
                      **({"failureDetail": detail} if detail else {})})
        self.say(f"run {status}" + (f" ({reason}: {detail})" if detail else f" ({reason})" if reason else ""))

    # ----------------------------------------------------------------- plumbing

    def _record(self, event: dict[str, Any]) -> None:
        """Append `event`, fsynced only when it is one of SYNCED (with every event before it: one
        fsync per step). `SPECFLUX_CRASH_AT=event:TYPE[:WHAT]` kills the process just before it
        is appended, `recorded:TYPE[:WHAT]` just after (tests of `kill -9` between an effect and
        its record; WHAT: the step's kind, the status, or for a decision the kind decided on)."""
        sync = event["type"] in SYNCED
        if event["type"] in (FILES, UNDONE):
            self._journaled = True
        elif event["type"] == "step_started":
            sync, self._journaled = sync and not self._journaled, False
        if not os.environ.get(CRASH_ENV):
            self.run.record(event, sync)
            return
        what = event.get("kind") or event.get("status") or \
            ((self._deciding or {}).get("kind") if event["type"] == "decision" else None)
        crash_point(f"event:{event['type']}" + (f":{what}" if what else ""))
        self.run.record(event, sync)
        crash_point(f"recorded:{event['type']}" + (f":{what}" if what else ""))

    def _view(self) -> dict[str, Any]:
        """The state a spec sees: a copy, so that a spec cannot change the run behind the engine.
        specflux's own specs (workflow files' edges, `flow.patterns`) never change what they are
        given: they get a copy of the top level only (no deep copy of the whole state per step)."""
        if type(self.spec).__module__.startswith("specflux."):
            return dict(self.run.state())
        return copied(self.run.state())

    def _moment(self, step_id: str) -> tuple[int, int]:
        """(now in ms, a random seed) for a decision: recorded ones in a replay, else fresh."""
        if step_id in self.moments:
            return self.moments[step_id]
        return int(self.clock() * 1000), random.SystemRandom().randrange(2**32)

