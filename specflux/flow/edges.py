"""Declarative edges (seed 000) as one implementation of the decision protocol.

After a role's step, the edges leaving that role are tried in file order; the first whose JSONata
`when` holds (or that has none) fires, unless it already fired `max_iterations` times for this
task: then the task has run out of tries, is failed, and the queue moves on. An edge with
`task = "next"` accepts the current task and sends its `to` role to the next one. When no edge
fires, the run ends, accepting the current task if its last verdict approved it.

Tasks whose dependencies in the run failed are marked blocked, never started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from .decisions import (AgentErrorInfo, AgentResponse, Annotate, Decision, DecisionContext, RequestApproval,
                        RequestWork, SpecContext, load_spec, retry_or_give_up)
from .workflow import Workflow

DONE = ("complete", "failed", "blocked")


class EdgeSpec:
    name = "edges"

    def __init__(self, workflow: Workflow):
        self.workflow = workflow

    def on_agent_completed(self, state: Mapping[str, Any], response: AgentResponse, ctx: DecisionContext) -> Decision:
        did = f"dec-{ctx.now}-{response.step_id}"
        if response.work_kind == "BOOT":
            return self._boot(state, did)
        task_id = response.task_id
        for edge in self.workflow.edges_from(response.work_kind):
            if not edge.fires(state):
                continue
            used = (state.get("edgeIterations") or {}).get(edge.id, {}).get(task_id or "*", 0)
            if edge.max_iterations is not None and used >= edge.max_iterations:
                why = f"{edge.id} reached its max_iterations ({edge.max_iterations})"
                return self._move_on(state, did, task_id, accepted=False, why=why,
                                     reason=f"max_iterations: {why}")
            if edge.task == "next":
                return self._move_on(state, did, task_id, accepted=True, why=f"{edge.id}: task {task_id} accepted",
                                     to=edge.to, edge=edge.id)
            return Decision(did, (_work(edge.to, task_id),), based_on={"stepId": response.step_id, "edge": edge.id},
                            why=f"{edge.id}: {edge.to} on task {task_id}")
        approved = _approved(state, task_id)
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


def spec_for(workflow: Workflow, root: Path | None = None):
    """The decision logic of a workflow: its edges, or the Python spec it names."""
    if workflow.spec:
        return load_spec(workflow.spec).create(SpecContext(config={}, root=root))
    return EdgeSpec(workflow)
