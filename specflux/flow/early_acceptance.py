"""A task accepted in its reviewer's own commit: one commit where there were two.

A reviewer's verdict is known when its session ends, before the session's commit; the run's
decision on it is a pure function of the state, the step's result and the decision's `now` and
seed (decisions.py), for specflux's own specs (workflow files' edges, flow.patterns). So the
engine makes that decision there, with the `now` and seed it then records for the step: where it
accepts the task, the task's completion (chain output, status, dependents wired) is written
before the commit and goes into it, and the decision carried out after the step is that same
decision, whose `accepted:<id>` finds the task complete in that commit and writes nothing more
(engine.py `_task_effect`). The reviewer's commit then carries `Specflux-Status: complete`.

What a crash at any moment leaves stays whole: before the commit, the step runs again (its
attempt committed as crashed, the completion with it, and the next review completes it again);
after it, the step's verdict, the acceptance and the decision's moment were written down before
the commit (`<try>.early.json` in the step's folder), so the resumed run takes the result from the
commit with them (steps/crashed.py) and decides as it did. A user's own spec (Python) may keep
state between decisions: its runs keep the two commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specflux.base.records import record
from specflux.flow.decisions import AgentResponse, Annotate, Decision, DecisionContext
from specflux.flow.state import fold, task_by_id

if TYPE_CHECKING:
    from specflux.flow.steps.roles import StepResult
    from specflux.store.manager import TaskStateManager


@record
class Accepted:
    """A task completed before its reviewer's commit: whom it wired, and the decision's moment."""

    task_id: str
    wired: list[str]
    moment: tuple[int, int]


class InCommit:
    """The engine's side: `__call__` decides on a reviewer's result before its commit (and
    completes the task when the decision accepts it); `take` hands that decision to the engine
    when the step's result is recorded, so that it is made once."""

    def __init__(self, engine: Any):
        self.engine = engine  # (flow/engine.py's Engine, which makes one for itself)
        self._made: tuple[str, dict[str, Any], int, int, Decision] | None = None

    def __call__(self, step: dict[str, Any], result: "StepResult") -> Accepted | None:
        e = self.engine
        state = e.run.state()
        task_id = step.get("taskId")
        task = task_by_id(state, task_id) if task_id else None
        if task is None or task["status"] == "complete":
            return None
        key = e.try_key(step)
        now, seed = e._moment(key)
        finished = {"type": "step_finished", "seq": state.get("lastSeq", 0) + 1, "stepId": step["stepId"],
                    "kind": step["kind"], "taskId": task_id, "now": now, "seed": seed, **result.to_event()}
        response = AgentResponse(step["stepId"], step["kind"], "OK", result.output, e.run.id, task_id)
        try:
            decision = e.spec.on_agent_completed(dict(fold([finished], state)), response, DecisionContext(now, seed))
        except Exception:  # noqa: BLE001 - the engine decides again after the step, and says why it failed
            return None
        if not any(isinstance(a, Annotate) and a.key == f"accepted:{task_id}" for a in decision.actions):
            return None
        chain = chain_output(state, e.manager, e.run.id, task_id)
        outcome = e.manager.complete(task_id, chain["summary"], chain.get("downstream") or None, commit=False)
        for notice in outcome.notices:
            e.say(notice)
        self._made = (key, _compared(result.output), now, seed, decision)
        return Accepted(task_id, list(outcome.wired), (now, seed))

    def take(self, key: str, output: dict[str, Any] | None) -> tuple[int, int, Decision] | None:
        """The decision made for this try of the step before its commit, if its result is the one
        it was made on (the engine may have refused the step since: its branch rewritten)."""
        made, self._made = self._made, None
        if made is None or made[0] != key or made[1] != _compared(output):
            return None
        return made[2], made[3], made[4]


def _compared(output: dict[str, Any] | None) -> dict[str, Any]:
    """A reviewer's output as the decision reads it (the narrative's notices aside)."""
    return {k: v for k, v in (output or {}).items() if k != "notices"}


def chain_output(state: dict[str, Any], manager: "TaskStateManager", run_id: str, task_id: str) -> dict[str, str]:
    """What an accepted task hands downstream: the coder's last chain output in this run, else the
    chain output already in its file, else its last session's account."""
    if state["chainOutputs"].get(task_id):
        return state["chainOutputs"][task_id]
    out = manager.load(task_id).chain_output()
    if out is not None and out.summary:
        return {"summary": out.summary, "downstream": out.downstream}
    did = state["coderAccounts"].get(task_id)
    return {"summary": "; ".join(did) if did else f"Task {task_id} was accepted by run {run_id}.",
            "downstream": ""}
