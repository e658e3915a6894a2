"""The run state: a fold of the run's events, under the seed's own field names.

`fold(events)` is pure: the same events give the same state, so `state.json` is only a cache
(rebuilt when it is missing or behind the log) and a resumed or replayed run sees exactly what
the crashed or recorded one saw. The field names are CONTRACT section 5's (seed 000's), so the
seed's JSONata conditions work on it verbatim.
"""

from __future__ import annotations

import copy
import marshal
from typing import Any, Iterable, Mapping

RUN_STATUSES = ("created", "running", "paused", "completed", "failed", "user_exit")
FINISHED = ("completed", "failed", "user_exit")
TOKEN_KEYS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
# What a token budget counts: cache reads re-read tokens counted once already (Usage.budgeted).
BUDGET_KEYS = ("inputTokens", "outputTokens", "cacheWriteTokens")
# Money: `costUsd` sums what the sessions cost where it is known; `costUnknown` counts sessions whose
# model the pricing table does not know, `usageUnknown` those whose agent printed no usage at all.
COST_KEYS = ("costUsd", "costUnknown", "usageUnknown")


def empty_metrics() -> dict[str, int]:
    return {"tasksCompleted": 0, "tasksFailed": 0, "totalAttempts": 0, "totalReviews": 0,
            **{k: 0 for k in TOKEN_KEYS}, "costUsd": 0.0, "costUnknown": 0, "usageUnknown": 0, "durationMs": 0}


def add_usage(metrics: dict[str, Any], usage: Mapping[str, Any]) -> None:
    """Add one session's usage (a step's `usage`: tokens, `costUsd`, `model`; or `{"unknown": true}`)."""
    if not usage:
        return  # a step that was no session (validate, merge)
    if usage.get("unknown"):
        metrics["usageUnknown"] = metrics.get("usageUnknown", 0) + 1
        return
    for key in TOKEN_KEYS:
        metrics[key] = metrics.get(key, 0) + usage.get(key, 0)
    cost = usage.get("costUsd")
    if cost is None:
        metrics["costUnknown"] = metrics.get("costUnknown", 0) + 1
    else:
        metrics["costUsd"] = round(metrics.get("costUsd", 0.0) + cost, 6)


def task_metrics() -> dict[str, int]:
    return {"attempts": 0, "reviews": 0, "steps": 0, **{k: 0 for k in TOKEN_KEYS}, "costUsd": 0.0, "costUnknown": 0,
            "usageUnknown": 0, "durationMs": 0}


def fold(events: Iterable[dict[str, Any]], state: dict[str, Any] | None = None, *,
         in_place: bool = False) -> dict[str, Any]:
    """The state after `events`, starting from `state` (not changed, unless `in_place`: the run's
    own cache folds each new event into itself) or from nothing."""
    if state is None:
        state = {}
    elif not in_place:
        state = copied(state)
    for event in events:
        handler = _HANDLERS.get(event["type"])
        if handler is not None:
            handler(state, event)
        state["lastSeq"] = event["seq"]
        state["updatedAt"] = event.get("at")
    return state


def copied(value: Any) -> Any:
    """A deep copy of the run's state, which is JSON-shaped (dicts, lists, tuples, strings, numbers):
    marshal's round trip in C, ~0.3 ms for the ~90 KB state of a 100-step run against ~0.7 ms for a
    copy in Python and ~1.3 ms for copy.deepcopy (an early acceptance copies it every review, a
    Python spec every decision). Like deepcopy it keeps an object met twice one object; a state
    holding anything marshal cannot write is deep-copied."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:  # not marshal's kind of value
        return copy.deepcopy(value)


def current_task(state: dict[str, Any]) -> dict[str, Any] | None:
    tasks = state.get("tasks") or []
    i = state.get("currentTaskIndex", 0)
    return tasks[i] if 0 <= i < len(tasks) else None


def task_by_id(state: dict[str, Any], task_id: str) -> dict[str, Any] | None:
    return next((t for t in state.get("tasks", []) if t["id"] == task_id), None)


def in_flight(state: dict[str, Any]) -> dict[str, Any] | None:
    """The step that was started and never finished (the engine died during it), if any."""
    return next((s for s in state.get("openSteps", {}).values() if s["status"] == "RUNNING"), None)


def waiting(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Steps requested and not started yet, in the order they were requested."""
    return [s for s in state.get("openSteps", {}).values() if s["status"] == "WAITING"]


# --------------------------------------------------------------------- one function per event


def _created(state: dict, e: dict) -> None:
    state.update({
        "runId": e["runId"],
        "status": "created",
        "workflow": e["workflow"]["name"],
        "workflowVersion": e["workflow"].get("version"),
        "workflowHash": e["workflow"].get("hash"),
        "tasks": [dict(t) for t in e["tasks"]],
        "currentTaskIndex": 0,
        "taskAttempts": {},
        "currentAttempts": 0,
        "coderOutput": None,
        "reviewerOutput": None,
        "validation": None,
        "approvalOutput": None,
        "plannerOutput": None,
        "metrics": empty_metrics(),
        "taskMetrics": {t["id"]: task_metrics() for t in e["tasks"]},
        "iteration": 0,
        "maxIterations": e.get("maxIterations"),
        "tokenBudget": e.get("tokenBudget"),
        "budgetUsd": e.get("budgetUsd"),  # US dollars the run may spend (None: no money budget)
        "taskStepLimit": e.get("taskStepLimit"),  # steps one task may take (edge workflows; None: no limit)
        "stallRounds": e.get("stallRounds"),  # rounds without a change that end the run as stalled
        "stall": {},  # task id -> {"sig": the last coder round's outcome, "rounds": how often in a row}
        "artifacts": {},
        "openSteps": {},
        "edgeIterations": {},
        "baseCommit": e.get("baseCommit"),
        "branch": e.get("branch"),  # the branch the run commits on (None: detached or no git)
        "agent": e.get("agent"),
        "createdAt": e.get("at"),
        "controls": [],
        "stepTries": {},  # step id -> how often it finished (a retry runs the same step again)
        "stepErrors": {},  # step id -> how often it finished with an error
        "lastDecision": None,  # the last decision event, for its effects after a crash
        "requestedByLast": [],  # the step ids it requested so far (done ones leave openSteps)
        "booted": False,
        "chainOutputs": {},  # task id -> the last chain output its coder handed over
        "coderAccounts": {},  # task id -> the last coder's `did`, when it handed over no chain output
        "parallel": e.get("parallel") or 1,  # lanes: tasks worked on at once, each in its own worktree
        "targetBranch": e.get("targetBranch"),  # where a parallel run merges its lanes
        "lanes": {},  # task id -> its latest attempt's worktree, branch and base (parallel runs)
        "laneOutputs": {},  # task id -> {coderOutput, reviewerOutput, ...}: each task's own last outputs
        "mergeOutput": None,
        # a run created before this existed keeps an acceptance commit of its own (its resume and
        # its replay then take the same steps it took): flow/early_acceptance.py
        "acceptInCommit": bool(e.get("acceptInCommit")),
    })


def _status(state: dict, e: dict) -> None:
    state["status"] = e["status"]
    for key in ("pausedFor", "failureReason", "failureDetail"):
        if e.get(key) is not None:
            state[key] = e[key]
        elif key in state and not (key in ("failureReason", "failureDetail") and e["status"] == "failed"):
            del state[key]


def _control(state: dict, e: dict) -> None:
    state["controls"].append({"seq": e["seq"], "action": e["action"], "note": e.get("note")})


def _control_handled(state: dict, e: dict) -> None:
    state["controls"] = [c for c in state["controls"] if c["seq"] != e["control"]]


def _step_requested(state: dict, e: dict) -> None:
    state["openSteps"][e["stepId"]] = {
        "stepId": e["stepId"], "kind": e["kind"], "status": "WAITING", "payload": e.get("payload"),
        "taskId": e.get("taskId"), "requestedBy": e.get("decision"),
    }
    last = state.get("lastDecision")
    if last is not None and e.get("decision") == last["seq"]:
        state.setdefault("requestedByLast", []).append(e["stepId"])


def _step_started(state: dict, e: dict) -> None:
    step = state["openSteps"][e["stepId"]]
    if step["status"] == "RUNNING":  # resumed after a crash: the same step again, counted once
        return
    step["status"] = "RUNNING"
    state["iteration"] += 1
    task_id = step.get("taskId")
    per_task = state["taskMetrics"].setdefault(task_id, task_metrics()) if task_id else None
    if per_task is not None:
        per_task["steps"] = per_task.get("steps", 0) + 1
    if step["kind"] == "coder":
        state["currentAttempts"] += 1
        state["taskAttempts"][task_id] = state["taskAttempts"].get(task_id, 0) + 1
        state["metrics"]["totalAttempts"] += 1
        if per_task is not None:
            per_task["attempts"] += 1
    elif step["kind"] == "reviewer":
        state["metrics"]["totalReviews"] += 1
        if per_task is not None:
            per_task["reviews"] += 1


_OUTPUT_FIELD = {"coder": "coderOutput", "reviewer": "reviewerOutput", "validate": "validation",
                 "approval": "approvalOutput", "planner": "plannerOutput", "merge": "mergeOutput"}
LANE_FIELDS = ("coderOutput", "reviewerOutput", "validation", "approvalOutput", "mergeOutput")


def _step_finished(state: dict, e: dict) -> None:
    step = state["openSteps"][e["stepId"]]
    step["status"] = "DONE" if e.get("status", "OK") == "OK" else "FAILED"
    step["result"] = e.get("output")
    state["lastFinished"] = e
    state["stepTries"][e["stepId"]] = state["stepTries"].get(e["stepId"], 0) + 1
    if e.get("status") == "ERROR":
        state["stepErrors"][e["stepId"]] = state["stepErrors"].get(e["stepId"], 0) + 1
    task_id = step.get("taskId")
    if step["kind"] == "coder" and e.get("status", "OK") == "OK" and task_id:
        if e.get("chainOutput"):
            state["chainOutputs"][task_id] = e["chainOutput"]
        elif (e.get("output") or {}).get("did"):
            state["coderAccounts"][task_id] = e["output"]["did"]
    field = _OUTPUT_FIELD.get(step["kind"])
    if field and e.get("status", "OK") == "OK" and e.get("output") is not None:
        state[field] = e["output"]
        if step["kind"] == "coder" and e.get("validation") is not None:
            state["validation"] = e["validation"]
        if task_id and field in LANE_FIELDS:
            own = state.setdefault("laneOutputs", {}).setdefault(task_id, {})
            own[field] = e["output"]
            if step["kind"] == "coder" and e.get("validation") is not None:
                own["validation"] = e["validation"]
    usage = e.get("usage") or {}
    per_task = state["taskMetrics"].get(step.get("taskId")) if step.get("taskId") else None
    add_usage(state["metrics"], usage)
    if per_task is not None:
        add_usage(per_task, usage)
    state["metrics"]["durationMs"] += e.get("durationMs", 0)
    if per_task is not None:
        per_task["durationMs"] += e.get("durationMs", 0)
    if step["kind"] == "coder" and task_id and e.get("status", "OK") == "OK":
        _count_round(state, task_id, e)
    if task_id and step["status"] == "DONE":
        del state["openSteps"][e["stepId"]]  # done: no longer open (its result is in the events)


def _count_round(state: dict, task_id: str, e: dict) -> None:
    """Stall detection: a coder round's outcome (the tree it left, what the tests said, what the
    last review on the task said); the same outcome again counts one more round without change.
    A round whose tree is not known (no git) never counts as unchanged."""
    out = e.get("output") or {}
    review = (state.get("laneOutputs") or {}).get(task_id, {}).get("reviewerOutput") or {}
    checked = out.get("selfValidation") or {}
    tests = (e.get("validation") or {}).get("failedTests") or checked.get("issues") or []
    sig = [e.get("tree"), bool(checked.get("passed")), sorted(map(str, tests)),
           sorted(str(i.get("description", "")) for i in review.get("issues") or [] if isinstance(i, dict))]
    stall = state.setdefault("stall", {})
    last = stall.get(task_id)
    if e.get("tree") and last is not None and last["sig"] == sig:
        last["rounds"] += 1
    else:
        stall[task_id] = {"sig": sig, "rounds": 0}


def _boot(state: dict, e: dict) -> None:
    state["bootMoment"] = (e["now"], e["seed"])


def _decision(state: dict, e: dict) -> None:
    state["lastDecision"] = e
    state["requestedByLast"] = []  # the steps it requested: never again, also once done and closed
    state["booted"] = True  # (a boot event without a decision after it: the boot is made again)
    for action in e["decision"].get("actions", []):
        if action["type"] == "ANNOTATE":
            state["artifacts"][action["key"]] = action.get("value")
    edge = e.get("edge")
    if edge:
        counts = state["edgeIterations"].setdefault(edge, {})
        key = e.get("taskId") or "*"
        counts[key] = counts.get(key, 0) + 1
    if e["decision"].get("finalize"):
        state["finalized"] = True


def _task_status(state: dict, e: dict) -> None:
    task = next((t for t in state["tasks"] if t["id"] == e["taskId"]), None)
    if task is None:
        return
    before = task["status"]
    task["status"] = e["status"]
    if e.get("reason"):
        task["reason"] = e["reason"]
    if e["status"] in ("complete", "failed", "blocked"):  # closed: its steps are no longer open
        for step_id in [k for k, s in state["openSteps"].items()
                        if s.get("taskId") == e["taskId"] and s["status"] in ("DONE", "FAILED")]:
            del state["openSteps"][step_id]
    for status, metric in (("complete", "tasksCompleted"), ("failed", "tasksFailed")):
        if before != status and e["status"] == status:
            state["metrics"][metric] += 1
        if before == status and e["status"] != status:
            state["metrics"][metric] -= 1


def _task_reconciled(state: dict, e: dict) -> None:
    """A task completed since by another run or a person (flow/steps/reconcile.py): closed, not
    counted as this run's, its open steps dropped; with nothing left in flight, the run asks its
    workflow again what to do, as at its start (a new boot)."""
    task = next((t for t in state["tasks"] if t["id"] == e["taskId"]), None)
    if task is None:
        return
    task["status"] = e["status"]
    task["reason"] = task["completedBy"] = e.get("by") or "outside this run"
    for step_id in [k for k, s in state["openSteps"].items() if s.get("taskId") == e["taskId"]]:
        del state["openSteps"][step_id]
    if not any(s["status"] in ("WAITING", "RUNNING") for s in state["openSteps"].values()):
        state["booted"] = False
        state.pop("bootMoment", None)
        state.pop("finalized", None)


def _lane_opened(state: dict, e: dict) -> None:
    state.setdefault("lanes", {})[e["taskId"]] = {k: e.get(k) for k in ("stepId", "worktree", "branch", "base", "previous")}


def _lanes_kept(state: dict, e: dict) -> None:
    state.setdefault("stoppedBranches", {}).update(e.get("branches") or {})


def _task_changed(state: dict, e: dict) -> None:
    """The queue moved on to another task: its attempt count and the coder's output start over."""
    state["currentTaskIndex"] = e["index"]
    state["currentAttempts"] = state["taskAttempts"].get(state["tasks"][e["index"]]["id"], 0)
    state["coderOutput"] = None


_HANDLERS = {
    "run_created": _created,
    "boot": _boot,
    "status": _status,
    "control": _control,
    "control_handled": _control_handled,
    "step_requested": _step_requested,
    "step_started": _step_started,
    "step_finished": _step_finished,
    "decision": _decision,
    "task_status": _task_status,
    "task_changed": _task_changed,
    "lane_opened": _lane_opened,
    "lanes_kept": _lanes_kept,
    "task_reconciled": _task_reconciled,
}


def lane_view(state: Mapping[str, Any], task_id: str | None) -> dict[str, Any]:
    """The state as one lane of a parallel run sees it: the outputs, the attempts and the queue
    position of task `task_id` under the seed's names, so that the seed's conditions
    (`coderOutput.selfValidation.passed`, `currentTaskIndex`) read that task's own values."""
    own = (state.get("laneOutputs") or {}).get(task_id) or {}
    index = next((i for i, t in enumerate(state.get("tasks") or []) if t["id"] == task_id), 0)
    return {**state, **{f: own.get(f) for f in LANE_FIELDS}, "currentTaskIndex": index,
            "currentAttempts": (state.get("taskAttempts") or {}).get(task_id, 0)}


def public(state: dict[str, Any]) -> dict[str, Any]:
    """The state as `flow status --json` prints it (without the engine's bookkeeping)."""
    hidden = {"controls", "lastSeq", "finalized", "agent", "stepTries", "stepErrors", "lastDecision", "booted",
              "chainOutputs", "coderAccounts", "eventsOffset", "lastFinished", "bootMoment", "laneOutputs", "stall",
              "lastMac", "stateMac"}
    return {k: v for k, v in state.items() if k not in hidden}
