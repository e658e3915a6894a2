"""Declarative edges (seed 000) as one implementation of the decision protocol.

After a role's step, the edges leaving that role are tried in file order; the first whose JSONata
`when` holds (or that has none) fires, unless it already fired `max_iterations` times for this
task: then the task has run out of tries, is failed, and the queue moves on. An approving verdict
of the reviewer (or of a person, `approval`) completes the task before any edge is read, as seed
000's state transitions say: the edge that fires then only names the role that goes on, with the
next task. `task = "next"` says so explicitly on any edge. When no edge fires, the run ends,
accepting the current task if its last verdict approved it. Whatever the edges say, a closed task
is never worked on again, and a task that has taken the steps its workflow allows it
(`taskStepLimit`, limits.py) fails rather than go round again.

Tasks whose dependencies in the run failed are marked blocked, never started.

With lanes (`parallel` > 1, `flow start --parallel N`) up to N tasks whose dependencies in the run
are complete are worked on at once, each in its own worktree. Every decision about a task reads
that task's own outputs (`state.lane_view`), so the seed's conditions hold per lane unchanged. A
task the workflow accepts is not complete yet: the engine first merges its lane into the user's
branch (a `merge` step). Merged, the task is accepted; conflicted, the task gets a new coder
attempt on top of the merged branch with the conflict in its context (`merge-conflict`, at most
MERGE_RETRIES times), and then fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from specflux.flow.decisions import (
    AgentErrorInfo,
    AgentResponse,
    Annotate,
    Decision,
    DecisionContext,
    RequestApproval,
    RequestWork,
    SpecContext,
    load_spec,
    retry_or_give_up,
)
from specflux.flow.state import lane_view
from specflux.flow.workflow.workflow_file import Workflow

DONE = ("complete", "failed", "blocked")
VERDICT_ROLES = ("reviewer", "approval")  # roles whose approving verdict completes the task (seed 000)
MERGE_RETRIES = 2  # new attempts after a conflicted merge, per task


class EdgeSpec:
    name = "edges"

    def __init__(self, workflow: Workflow, parallel: int = 1):
        self.workflow = workflow
        self.parallel = max(1, parallel)

    def on_agent_completed(self, state: Mapping[str, Any], response: AgentResponse, ctx: DecisionContext) -> Decision:
        did = f"dec-{ctx.now}-{response.step_id}"
        if response.work_kind == "BOOT":
            return self._boot(state, did)
        task_id = response.task_id
        if self.parallel > 1:
            state = lane_view(state, task_id)
            if response.work_kind == "merge":
                return self._merged(state, did, task_id, response.content or {})
        verdict = response.work_kind in VERDICT_ROLES and _approved_by(state, response.work_kind, task_id)
        for edge in self.workflow.edges_from(response.work_kind):
            if not edge.fires(state):
                continue
            used = (state.get("edgeIterations") or {}).get(edge.id, {}).get(task_id or "*", 0)
            if edge.max_iterations is not None and used >= edge.max_iterations:
                why = f"{edge.id} reached its max_iterations ({edge.max_iterations})"
                return self._move_on(state, did, task_id, accepted=False, why=why,
                                     reason=f"max_iterations: {why}")
            # Seed 000: an approving verdict completes the task before any edge is read; the edge
            # that fires then only says which role goes on, with the next task (`task = "next"`
            # says the same explicitly). A person's approval gate after the reviewer waits for it.
            if edge.task == "next" or (verdict and edge.to != "approval"):
                if self.parallel > 1:
                    return self._merge(did, task_id, edge.id)
                return self._move_on(state, did, task_id, accepted=True, why=f"{edge.id}: task {task_id} accepted",
                                     to=edge.to, edge=edge.id)
            if task_id and _status_of(state, task_id) in DONE:  # never work on a closed task again
                return self._move_on(state, did, None, accepted=False, to=edge.to, edge=edge.id,
                                     why=f"{edge.id}: task {task_id} is {_status_of(state, task_id)} already")
            over = _over_task_limit(state, task_id)
            if over:
                return self._move_on(state, did, task_id, accepted=False, why=over, reason=f"max_iterations: {over}")
            return Decision(did, (_work(edge.to, task_id),), based_on={"stepId": response.step_id, "edge": edge.id},
                            why=f"{edge.id}: {edge.to} on task {task_id}")
        approved = _approved(state, task_id)
        if approved and self.parallel > 1:
            return self._merge(did, task_id, None)
        return self._move_on(state, did, task_id, accepted=approved, to=None,
                             why=f"no edge from {response.work_kind}: " + ("accepted" if approved else "not accepted"),
                             reason=None if approved else f"the workflow has no way on from {response.work_kind}")

    def on_agent_error(self, state: Mapping[str, Any], work_kind: str, error: AgentErrorInfo, attempt: int) -> Decision:
        return retry_or_give_up(state, work_kind, error, attempt)

    # ----------------------------------------------------------------- the queue

    def _boot(self, state: Mapping[str, Any], did: str) -> Decision:
        start = self.workflow.start
        if start == "planner" and not state.get("tasks"):
            return Decision(did, (RequestWork("planner"),), why="plan the tasks")
        if start == "planner":  # tasks exist already: the planner has nothing to do
            start = next((e.to for e in self.workflow.edges_from("planner")), "coder")
        if self.parallel > 1:
            return self._fill_lanes(state, did, [], None, start, why="start")
        blocked, index = _next_runnable(state, -1)
        if index is None:
            return Decision(did, tuple(blocked), finalize=True, why="no task to run")
        task = state["tasks"][index]
        return Decision(did, (*blocked, _work(start, task["id"])), why=f"start: {start} on task {task['id']}")

    def _move_on(self, state: Mapping[str, Any], did: str, task_id: str | None, *, accepted: bool, why: str,
                 to: str | None = "start", edge: str | None = None, reason: str | None = None) -> Decision:
        """Close the current task (accepted or failed) and start the next runnable one, or finish."""
        actions: list = []
        closed = dict(state)
        if task_id:
            key = f"accepted:{task_id}" if accepted else f"failed:{task_id}"
            actions.append(Annotate(key, {"reason": reason} if reason else {"edge": edge}))
            closed = _with_status(state, task_id, "complete" if accepted else "failed")
        if self.parallel > 1:
            role = self.workflow.start if to in ("start", None) else to
            return self._fill_lanes(closed, did, actions, task_id, "coder" if role == "planner" else role, why=why,
                                    edge=edge)
        index = _index_of(state, task_id)
        blocked, nxt = _next_runnable(closed, index if index is not None else -1)
        actions += blocked
        if to is None or nxt is None:
            return Decision(did, tuple(actions), finalize=True, based_on={"edge": edge} if edge else None, why=why)
        role = self.workflow.start if to == "start" else to
        if role == "planner":
            role = "coder"
        next_id = closed["tasks"][nxt]["id"]
        return Decision(did, (*actions, _work(role, next_id)), based_on={"edge": edge} if edge else None,
                        why=f"{why}; {role} on task {next_id}")


    # ----------------------------------------------------------------- lanes

    def _merge(self, did: str, task_id: str | None, edge: str | None) -> Decision:
        """The workflow accepts the task: merge its lane into the user's branch first."""
        return Decision(did, (RequestWork("merge", {"taskId": task_id}),), based_on={"edge": edge} if edge else None,
                        why=f"task {task_id} accepted by the workflow; merging its lane")

    def _merged(self, state: Mapping[str, Any], did: str, task_id: str | None, out: Mapping[str, Any]) -> Decision:
        if out.get("merged"):
            return self._move_on(state, did, task_id, accepted=True, edge="merge",
                                 why=f"task {task_id}'s lane merged")
        used = (state.get("edgeIterations") or {}).get("merge-conflict", {}).get(task_id or "*", 0)
        conflicts = ", ".join(out.get("conflicts") or []) or "(no paths named)"
        if used >= MERGE_RETRIES:
            why = f"merge-conflict reached its limit ({MERGE_RETRIES}): conflicts in {conflicts}"
            return self._move_on(state, did, task_id, accepted=False, why=why, reason=f"merge_conflict: {why}")
        over = _over_task_limit(state, task_id)
        if over:
            return self._move_on(state, did, task_id, accepted=False, why=over, reason=f"max_iterations: {over}")
        return Decision(did, (RequestWork("coder", {"taskId": task_id, "after": "conflict"}),),
                        based_on={"edge": "merge-conflict"},
                        why=f"merge-conflict: task {task_id} conflicts in {conflicts}; a new attempt on the merged branch")

    def _fill_lanes(self, state: Mapping[str, Any], did: str, actions: list, closing: str | None, role: str, *,
                    why: str, edge: str | None = None) -> Decision:
        """Start `role` on as many ready tasks as lanes are free; finish when nothing is left."""
        tasks = list(state.get("tasks") or [])
        status = {t["id"]: t["status"] for t in tasks}
        busy = {s.get("taskId") for s in (state.get("openSteps") or {}).values()
                if s.get("status") in ("WAITING", "RUNNING") and s.get("taskId")} - {closing}
        actions = list(actions)
        for task in tasks:  # a dependency failed: never started
            if status[task["id"]] in DONE or task["id"] in busy:
                continue
            bad = [d for d in task.get("dependencies", []) if status.get(d) in ("failed", "blocked")]
            if bad:
                actions.append(Annotate(f"blocked:{task['id']}", {"reason": f"dependency {bad[0]} {status[bad[0]]}"}))
                status[task["id"]] = "blocked"
        started = []
        for task in tasks:
            if len(busy) + len(started) >= self.parallel:
                break
            tid = task["id"]
            if status[tid] in DONE or tid in busy or tid == closing:
                continue
            if all(status.get(d, "complete") == "complete" for d in task.get("dependencies", [])):
                started.append(tid)
        actions += [_work(role, tid) for tid in started]
        finish = not started and not busy
        if started:
            why = f"{why}; {role} on task{'s' if len(started) > 1 else ''} {', '.join(started)}"
        elif busy:
            why = f"{why}; waiting for task{'s' if len(busy) > 1 else ''} {', '.join(sorted(busy))}"
        return Decision(did, tuple(actions), finalize=finish, based_on={"edge": edge} if edge else None, why=why)


def _work(role: str, task_id: str | None):
    if role == "approval":
        return RequestApproval({"taskId": task_id})
    return RequestWork(role, {"taskId": task_id} if task_id else None)


def _approved(state: Mapping[str, Any], task_id: str | None) -> bool:
    """The task's last verdict: the reviewer's, else a person's, else the tests'."""
    for key, field in (("reviewerOutput", "approved"), ("approvalOutput", "approved")):
        out = state.get(key) or {}
        if out and out.get("taskId", task_id) == task_id:
            return bool(out.get(field))
    coder = state.get("coderOutput") or {}
    return coder.get("taskId") == task_id and bool((coder.get("selfValidation") or {}).get("passed"))


def _approved_by(state: Mapping[str, Any], role: str, task_id: str | None) -> bool:
    """Whether `role`'s verdict just handed in approves the task."""
    out = state.get("reviewerOutput" if role == "reviewer" else "approvalOutput") or {}
    return bool(out) and out.get("taskId", task_id) == task_id and out.get("approved") is True


def _status_of(state: Mapping[str, Any], task_id: str) -> str | None:
    return next((t["status"] for t in state.get("tasks") or [] if t["id"] == task_id), None)


def _over_task_limit(state: Mapping[str, Any], task_id: str | None) -> str | None:
    """Why another step on `task_id` would pass the steps its workflow allows one task, if it would."""
    limit = state.get("taskStepLimit")
    if not limit or not task_id:
        return None
    steps = ((state.get("taskMetrics") or {}).get(task_id) or {}).get("steps", 0)
    if steps < limit:
        return None
    return f"task {task_id} took {steps} steps, the most its workflow allows one task (taskStepLimit {limit})"


def _index_of(state: Mapping[str, Any], task_id: str | None) -> int | None:
    return next((i for i, t in enumerate(state.get("tasks") or []) if t["id"] == task_id), None)


def _with_status(state: Mapping[str, Any], task_id: str, status: str) -> dict[str, Any]:
    tasks = [dict(t, status=status) if t["id"] == task_id else t for t in state.get("tasks") or []]
    return {**state, "tasks": tasks}


def _next_runnable(state: Mapping[str, Any], after: int) -> tuple[list[Annotate], int | None]:
    """Blocked annotations for tasks whose dependencies in the run failed, and the index of the
    next task after `after` that can run (None when none is left)."""
    tasks = list(state.get("tasks") or [])
    status = {t["id"]: t["status"] for t in tasks}
    blocked: list[Annotate] = []
    for i in range(after + 1, len(tasks)):
        task = tasks[i]
        if status[task["id"]] in DONE:
            continue
        bad = [d for d in task.get("dependencies", []) if status.get(d) in ("failed", "blocked")]
        if bad:
            blocked.append(Annotate(f"blocked:{task['id']}", {"reason": f"dependency {bad[0]} {status[bad[0]]}"}))
            status[task["id"]] = "blocked"
            continue
        return blocked, i
    return blocked, None


def spec_for(workflow: Workflow, root: Path | None = None, parallel: int = 1):
    """The decision logic of a workflow: its edges, or the Python spec it names."""
    if workflow.spec:
        return load_spec(workflow.spec).create(SpecContext(config={}, root=root))
    return EdgeSpec(workflow, parallel)
