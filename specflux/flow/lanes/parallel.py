"""Parallel lanes: the engine working on up to N tasks at once, each coder attempt in its own git
worktree on its own branch (`worktrees.py`), merged back into the user's branch by the run.

What stays as in the sequential engine (`engine.py`): every event is appended by this thread
alone, and decisions are made one at a time, in the order results arrive, each on the state as it
is then. What runs in other threads is only a step's work (an agent session, the tests), in its
lane's worktree, through a `Roles` of its own. Merges are done here too, one at a time: a merge
is a step whose result (`mergeOutput`: merged, or the paths that conflict) the decision logic
sees like any other.

Control: `flow pause` lets the steps in flight finish and then pauses; `flow stop` and Ctrl-C stop
the agents of every lane (a command agent is killed; an API session is waited for a little). After
`kill -9`, `flow resume` finds each lane's worktree where it was, runs the steps that were in
flight again as the sequential engine does, and removes worktrees and branches nothing needs.
When the run ends, all of its worktrees and branches are removed.
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specflux.base.durability import synced_together
from specflux.base.errors import SpecfluxError
from specflux.flow.decisions import AgentErrorInfo, Decision
from specflux.flow.engine import Engine
from specflux.flow.record.stop_watch import POLL_S
from specflux.flow.steps.roles import Interrupted, StepResult
from specflux.flow.state import FINISHED, lane_view, waiting
from specflux.flow.lanes.shares import Share, Shares
from specflux.flow.lanes.worktrees import UserBusy, Worktrees

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager
    from specflux.flow.decisions import Spec
    from specflux.flow.steps.roles import Roles
    from specflux.flow.record.run import Run

STOP_WAIT_S = 15.0  # how long `flow stop` waits for the lanes' agents to stop before ending the run
MERGE_TRIES = 3  # merges tried again when the user's branch moved under one
MERGE_AGAIN_S = 2.0  # while lanes run, how often a merge the user's busy git refused is tried again


class ParallelEngine(Engine):
    accepts_in_commit = False  # a lane's task is accepted once its change is merged: its own commit

    def __init__(self, manager: "TaskStateManager", run: "Run", spec: "Spec", roles: "Roles", *,
                 worktrees: Worktrees, order: list[str] | None = None, **options: Any):
        """`order`: a replay's step ids in the order the recorded run took their results."""
        super().__init__(manager, run, spec, roles, **options)
        self.order = list(order or [])
        self.early: dict[str, tuple[dict[str, Any], Any]] = {}  # results that came before their turn
        self.worktrees = worktrees
        self.width = max(1, int(run.state().get("parallel") or 1))
        self.cancel = roles.cancel or threading.Event()
        roles.cancel = self.cancel
        self.results: queue.Queue = queue.Queue()
        self.running: dict[str, threading.Thread] = {}
        self._tidied = False
        self._merge_again_at = 0.0
        self.shares = Shares()  # what the sessions in flight hold of the run's budgets

    def drive(self) -> dict[str, Any]:
        try:
            return super().drive()
        except KeyboardInterrupt:  # Ctrl-C outside the wait for results: the same as inside it
            self.cancel.set()
            self._drain(record=False)
            if self.run.state()["status"] == "running":
                self._record({"type": "status", "status": "paused", "pausedFor": "user"})
            self.run.save()
            return self.run.state()
        finally:
            if self.run.state()["status"] in FINISHED and not self.running:
                self.worktrees.clean()

    # ----------------------------------------------------------------- the loop

    def _advance(self) -> bool:
        if not self._tidied:
            self._tidy()
        if self.run.state().get("tampered") and self.run.state()["status"] not in FINISHED:
            self._stop_lanes("the run's event log was tampered with")
            return not self._tampered()
        state = self.run.state()
        if state["status"] != "running":
            return False
        wanted = {c["action"] for c in state["controls"]}
        if "stop" in wanted:
            self._stop_lanes("stopped by `flow stop`")
            self._handled("stop", "pause")
            self._finish("user_exit", None)
            return False
        if self._holds_lost():
            return False
        pausing = "pause" in wanted
        if pausing and not self.running:
            self._handled("pause")
            self._record({"type": "status", "status": "paused", "pausedFor": "user"})
            return False
        if not pausing and not self._start_steps():
            return False
        if not self.running:
            state = self.run.state()
            if state["status"] != "running":
                return False
            approval = next((s for s in waiting(state) if s["kind"] == "approval"), None)
            if approval is not None:
                return self._approval(approval)
            if not waiting(state):
                if not state.get("finalized"):
                    self._finish("failed", "stalled: the workflow asked for no more work and did not finish")
                return False
            return True
        return self._collect()

    def _start_steps(self) -> bool:
        """Start what can start: steps a crash left in flight, merges, answered approvals, and
        waiting steps while lanes are free. False when the run stopped for now (paused, ended)."""
        progressed, held = True, None
        while progressed:
            progressed, held = False, None
            state = self.run.state()
            if state["status"] != "running":
                return False
            for step in state["openSteps"].values():
                if step["status"] == "RUNNING" and step["stepId"] not in self.running:
                    share = self.shares.take(step, state, self.width - len(self.running))  # (None: by the lanes)
                    self._launch(step, resumed=True, share=share)
                    progressed = True
            answered = any(c["action"] in ("approve", "reject") for c in state["controls"])
            for step in waiting(state):
                if step["kind"] == "approval":
                    if answered:
                        self._approval(step)
                        progressed = True
                        break
                    continue
                if step["kind"] == "merge":
                    if self.running and time.monotonic() < self._merge_again_at:
                        continue  # the user's git was busy a moment ago: asked again in a while
                    busy = self._merge(step)
                    if busy is None:
                        progressed = True
                        break
                    held = busy  # the other lanes go on meanwhile
                    self._merge_again_at = time.monotonic() + MERGE_AGAIN_S
                    continue
                if len(self.running) >= self.width:
                    continue
                limit = self._limit_reached(state, step)
                share = None if limit else self.shares.take(step, state, self.width - len(self.running))
                if share is None:  # the budget is spent, or spoken for by the sessions in flight
                    if not self.running:
                        self._finish("failed", limit or self._limit_reached(state) or
                                     "budget_usd: what is left of the run's budget is too little to start a session")
                        return False
                    continue
                self._launch(step, resumed=False, share=share)
                progressed = True
                break
        if held and not self.running:  # nothing else can go on: wait for the user
            return self._pause_for_git(held)
        return True

    def _collect(self) -> bool:
        """Wait for one lane's result (a little: controls are read between waits) and decide on it."""
        try:
            step, result = self._next_result()
        except queue.Empty:
            return True
        except KeyboardInterrupt:  # Ctrl-C: stop every lane's agent; `flow resume` runs them again
            self.cancel.set()
            self._drain(record=False)
            self._record({"type": "status", "status": "paused", "pausedFor": "user"})
            return False
        self.running.pop(step["stepId"]).join()
        self.shares.give_back(step["stepId"])
        if result == "interrupted":  # an agent stopped without `flow stop`: pause; `flow resume` runs it again
            self.cancel.set()
            self._drain(record=False)
            self._record({"type": "status", "status": "paused", "pausedFor": "user"})
            return False
        self._finish_step(step, result)
        return True

    def _next_result(self) -> tuple[dict[str, Any], Any]:
        """The next lane's result: whichever comes first, or, in a replay, the one whose turn it is
        (queue.Empty when there is none yet)."""
        if not self.order:
            return self.results.get(timeout=POLL_S)
        want = self.order[0]
        while want not in self.early:
            step, result = self.results.get(timeout=POLL_S)
            self.early[step["stepId"]] = (step, result)
        self.order.pop(0)
        return self.early.pop(want)

    def _holds_lost(self) -> bool:
        """As the sequential engine's; the lanes' agents are stopped first (their steps run again
        on `flow resume`, as after Ctrl-C)."""
        why = self.recheck() if self.recheck is not None else None
        if not why:
            return False
        if self.running:
            self.cancel.set()
            self._drain(record=False)
        self._record({"type": "status", "status": "paused", "pausedFor": why})
        self.say(f"paused: {why}")
        return True

    # ----------------------------------------------------------------- one lane's step

    def _launch(self, step: dict[str, Any], resumed: bool, share: Share | None = None) -> None:
        task_id = step.get("taskId")
        if not task_id:
            raise SpecfluxError(f"step {step['stepId']} ({step['kind']}) names no task: parallel lanes run tasks")
        lane, note = self._lane_for(step, resumed)
        if not resumed:
            self._record({"type": "step_started", "stepId": step["stepId"], "kind": step["kind"], "taskId": task_id})
        else:
            self.say(f"resuming step {step['stepId']} ({step['kind']} on task {task_id}), interrupted before")
        self.say(f"{step['kind']} on task {task_id} (step {step['stepId']}, lane {lane['branch']})")
        key, stamp = self._try_of(step)
        roles = self.roles.in_lane(self._lane_manager(Path(lane["worktree"])), note, lanes=self.width, share=share)
        view = lane_view(self.run.state(), task_id)
        thread = threading.Thread(target=self._work, args=(step, roles, view, resumed, key, stamp, Path(lane["worktree"])),
                                  name=f"lane-{task_id}", daemon=True)
        self.running[step["stepId"]] = thread
        thread.start()

    def _work(self, step, roles, view, resumed, key, stamp, worktree: Path) -> None:
        """In the lane's thread: prepare the worktree, do the step, hand the result to the loop."""
        started = time.monotonic()
        result: Any
        try:
            problem = self.worktrees.prepare(worktree)
            if problem:
                result = StepResult("ERROR", None, error=AgentErrorInfo("ERROR", problem))
            else:
                delay = (step.get("payload") or {}).get("delay_s")
                if delay and not resumed and not self.moments:  # (a replay does not wait out a backoff)
                    self.cancel.wait(float(delay))
                with synced_together():  # the step's writes made durable at once (base/durability.py)
                    result = roles.perform(step, view, resumed=resumed, key=key, stamp=stamp)
                result.stamp = stamp
        except (Interrupted, KeyboardInterrupt):
            result = "interrupted"
        except SpecfluxError as e:
            result = StepResult("ERROR", None, error=AgentErrorInfo("ERROR", str(e)))
        except Exception as e:  # a bug in one lane ends that step, not the run's bookkeeping
            result = StepResult("ERROR", None, error=AgentErrorInfo("ERROR", f"{type(e).__name__}: {e}"))
        if isinstance(result, StepResult) and not result.duration_ms:
            result.duration_ms = int((time.monotonic() - started) * 1000)
        self.results.put((step, result))

    def _lane_for(self, step: dict[str, Any], resumed: bool) -> tuple[dict[str, Any], str]:
        """The lane a step works in, and the note its coder gets. A coder step opens a new lane
        (worktree and branch): on the task's last attempt, or, after a conflicted merge or for a
        task's first attempt, on the user's branch as it is now."""
        state = self.run.state()
        task_id, step_id = step["taskId"], step["stepId"]
        current = (state.get("lanes") or {}).get(task_id)
        if current is not None and (step["kind"] != "coder" or current["stepId"] == step_id):
            path, _ = self.worktrees.open(task_id, current["stepId"], current["base"])  # (again, after a crash)
            if step["kind"] != "coder":
                return current, ""
            if current.get("previous") and not resumed:  # a crash cut the carrying over short
                self._carry_log(task_id, current["previous"], path, why="its change conflicted with work merged meanwhile")
            return current, self._conflict_note(current)
        after_conflict = (step.get("payload") or {}).get("after") == "conflict"
        target = state["targetBranch"]
        start = self.worktrees.tip(current["branch"]) if current and not after_conflict else \
            self.worktrees.tip(f"refs/heads/{target}")
        lane = {"stepId": step_id, "worktree": str(self.worktrees.path_of(step_id)),
                "branch": self.worktrees.branch_of(task_id, step_id), "base": start}
        previous = None
        if after_conflict and current is not None:
            merge = (state.get("laneOutputs") or {}).get(task_id, {}).get("mergeOutput") or {}
            previous = {"branch": current["branch"], "base": current["base"], "conflicts": merge.get("conflicts", [])}
        self._record({"type": "lane_opened", "taskId": task_id, **lane, "previous": previous})
        lane = self.run.state()["lanes"][task_id]
        path, _ = self.worktrees.open(task_id, step_id, start)
        if previous is not None:
            self._carry_log(task_id, previous, path, why="its change conflicted with work merged meanwhile")
        if current is not None and current["stepId"] != step_id:
            self.worktrees.retire(Path(current["worktree"]))
        return lane, self._conflict_note(lane)

    def _conflict_note(self, lane: dict[str, Any]) -> str:
        previous = lane.get("previous")
        if not previous:
            return ""
        change = self.worktrees.changed_since(previous["base"], previous["branch"])
        conflicts = ", ".join(previous.get("conflicts") or []) or "(git named no paths)"
        return "\n".join([
            "## Why this attempt starts again on the current code",
            f"The last attempt's change could not be merged: it conflicts in {conflicts} with work other tasks "
            "merged meanwhile. This attempt starts from the branch with that work merged. Make this task's change "
            "again on top of it, keeping what the other tasks did. The last attempt's change was:",
            "```diff", change.rstrip(), "```"])

    def _lane_manager(self, worktree: Path) -> "TaskStateManager":
        from specflux.store.manager import TaskStateManager
        from specflux.store.workspace import Workspace

        inside = self.manager.ws.root.resolve().relative_to(self.worktrees.root.resolve())
        return TaskStateManager(Workspace(worktree / inside), git=self.manager.git is not None)

    # ----------------------------------------------------------------- merging a lane

    def _merge(self, step: dict[str, Any]) -> str | None:
        """Merge the task's lane into the user's branch, and decide on the result (merged, or the
        paths that conflict). Why it could not be tried, when the user's git is busy (a merge or
        rebase in progress, their uncommitted changes in the way): then nothing is recorded."""
        state = self.run.state()
        task_id = step["taskId"]
        lane = state["lanes"][task_id]
        target = state["targetBranch"]
        task = next(t for t in state["tasks"] if t["id"] == task_id)
        message = f"Merge task {task_id}: {task['title']} (run {self.run.id})\n\nSpecflux-Run: {self.run.id}\n" \
                  f"Specflux-Task: {task_id}\nSpecflux-Role: engine"
        started = time.monotonic()
        for _ in range(MERGE_TRIES):
            try:
                result = self.worktrees.merge(lane["branch"], target, message)
            except UserBusy as e:
                return str(e)
            if result.merged or result.conflicts or "moved during the merge" not in result.reason:
                break
        if not result.merged and not result.conflicts:
            return result.reason
        self.say(f"task {task_id}: lane merged into {target}" if result.merged else
                 f"task {task_id}: merge conflicts in {', '.join(result.conflicts)}")
        output = {**result.to_output(task_id, lane["branch"]), "target": target}
        self._finish_step(step, StepResult("OK", output, duration_ms=int((time.monotonic() - started) * 1000)))
        return None

    def _pause_for_git(self, why: str) -> bool:
        self.say(f"paused: {why}")
        self._record({"type": "status", "status": "paused", "pausedFor": f"git: {why}"})
        return False

    def _carry_log(self, task_id: str, previous: dict[str, Any], into: Path, why: str) -> None:
        """Bring the progress log a lane wrote into the task file at `into` (a new lane's worktree,
        or the user's), merged by parts, and commit it there: no session is lost with a branch."""
        from specflux.format.merge import merge_task
        from specflux.vcs.git import Git
        from specflux.vcs.process import run_git as _run

        manager = self._lane_manager(into)
        path = manager.path(task_id)
        rel = path.resolve().relative_to(into.resolve()).as_posix()
        repo = Git(self.worktrees.root)

        def at(ref: str) -> str | None:  # the file's exact text (its line endings kept) at `ref`
            done = repo._git_raw("show", f"{ref}:{rel}")
            return _utf8(done.stdout) if done.returncode == 0 else None

        fork = _run(("merge-base", previous["branch"], "HEAD"), into)  # where the task's lanes left this branch
        base, theirs = (at(fork.stdout.strip()) if fork.returncode == 0 else None), at(previous["branch"])
        ours = _utf8(path.read_bytes()) if path.is_file() else None
        if base is None or theirs is None or ours is None:
            return
        merged, clean = merge_task(base, ours, theirs)
        if not clean or merged == ours:
            return
        from specflux.base.files import atomic_write

        atomic_write(path, merged)
        Git(into).commit([path], f"task {task_id}: the log of its last attempt carried over ({why})",
                         {"Specflux-Run": self.run.id, "Specflux-Task": task_id, "Specflux-Role": "engine"})

    def _task_effect(self, action, state: dict[str, Any]) -> None:
        verb, _, task_id = action.key.partition(":")
        lane = (state.get("lanes") or {}).get(task_id)
        task = next((t for t in state["tasks"] if t["id"] == task_id), None)
        if verb == "failed" and lane is not None and task is not None and task["status"] != "failed" \
                and self.manager.git is not None:
            self._carry_log(task_id, lane, self.worktrees.root, why="the task failed; its change is not merged")
        super()._task_effect(action, state)

    # ----------------------------------------------------------------- decisions

    def _view(self) -> dict[str, Any]:
        """As the sequential engine's, but a failed step's retry sees only its own failed step
        (other lanes may have failed steps of the same kind)."""
        view = super()._view()
        f = self._deciding
        if f is not None and f.get("status", "OK") != "OK":
            view["openSteps"] = {k: s for k, s in view["openSteps"].items()
                                 if not (s["status"] == "FAILED" and s["kind"] == f["kind"] and k != f["stepId"])}
        return view

    def _settle_last_decision(self) -> None:
        """As the sequential engine's; a decision that ends the run as failed (an agent error it
        gives up on, a broken workflow) also stops the other lanes."""
        super()._settle_last_decision()
        last = self.run.state().get("lastDecision")
        if last is None or self.run.state()["status"] in FINISHED:
            return
        decision = Decision.from_json(last["decision"])
        if decision.finalize and decision.failure_reason:
            self._stop_lanes(f"the run fails: {decision.why or decision.failure_reason}")
            self._finish("failed", decision.failure_reason)

    # ----------------------------------------------------------------- stopping and tidying

    def _stop_lanes(self, why: str) -> None:
        """Stop every lane's agent and record its step as interrupted."""
        if not self.running:
            return
        self.cancel.set()
        for step in self._drain(record=True):
            self._record({"type": "step_finished", "stepId": step["stepId"], "kind": step["kind"],
                          "taskId": step.get("taskId"), "status": "ERROR",
                          "error": {"type": "INTERRUPTED", "message": why}})

    def _drain(self, record: bool) -> list[dict[str, Any]]:
        """Wait (up to STOP_WAIT_S) for the lanes to report; the steps that were in flight."""
        steps = []
        deadline = time.monotonic() + STOP_WAIT_S
        pending = dict(self.running)
        while pending and time.monotonic() < deadline:
            try:
                step, _ = self.results.get(timeout=0.2)
            except queue.Empty:
                continue
            pending.pop(step["stepId"], None)
            steps.append(step)
        state = self.run.state()
        steps += [state["openSteps"][step_id] for step_id in pending]  # still running: given up on
        self.running.clear()
        self.shares.clear()
        return steps if record else []

    def _tidy(self) -> None:
        """Worktrees and branches of this run that no open step needs (a crash left them)."""
        self._tidied = True
        state = self.run.state()
        open_tasks = {s.get("taskId") for s in state["openSteps"].values() if s["status"] in ("WAITING", "RUNNING")}
        needed = [lane for task_id, lane in (state.get("lanes") or {}).items() if task_id in open_tasks]
        keep = {Path(lane["worktree"]) for lane in needed}
        branches = {lane["branch"] for lane in needed} | {lane["previous"]["branch"] for lane in needed if lane.get("previous")}
        removed = self.worktrees.clean(keep=keep, keep_branches=branches)
        from specflux.base.leftovers import remove_stale_temps_in

        states = self.manager.ws.states_dir.resolve().relative_to(self.worktrees.root.resolve())
        lanes = [Path(lane["worktree"]) / states for lane in needed]
        for folder in (self.run.dir, self.run.dir / "steps", self.manager.ws.states_dir, *lanes):
            remove_stale_temps_in(folder)  # a kill mid-write left a temp file (in a lane, the crashed
            # session's commit would take it into the branch, and the merge into the user's)
        if removed:
            self.say(f"removed {len(removed)} worktree(s) and branch(es) no step needs")

    def _finish(self, status: str, reason: str | None) -> None:
        """As the sequential engine's, the lanes' worktrees and branches removed first: a kill
        while they are removed leaves a run that has not ended, which `flow resume` tidies and ends.
        However the run ends (a limit, `flow stop`, an error), each unfinished lane's work is kept
        on `specflux/stopped/<run>/<task>` before its branch goes (stopped.py)."""
        self._keep_stopped()
        if not self.running:
            self.worktrees.clean()
        super()._finish(status, reason)

    def _keep_stopped(self) -> None:
        """The unfinished lanes' work, kept on `specflux/stopped/<run>/<task>` before the lanes go."""
        from specflux.flow.lanes.stopped import keep_lanes

        for task_id, branch in keep_lanes(self.worktrees.root, self.run).items():
            self.say(f"task {task_id}: its unfinished work is kept on {branch}")

    def _handled(self, *actions: str) -> None:
        for control in list(self.run.state()["controls"]):
            if control["action"] in actions:
                self._record({"type": "control_handled", "control": control["seq"]})


def _utf8(data: bytes) -> str | None:
    """Bytes as text, nothing translated (CRLF stays CRLF); None when they are not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
