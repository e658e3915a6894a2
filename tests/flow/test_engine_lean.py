"""The engine's lean path: one fsync per step, of the event log alone, the chain of the log kept when
another process appends between the engine's own appends, and a spec from outside specflux
never able to change the run behind the engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from specflux.flow import runs
from specflux.flow.decisions import Decision, RequestWork
from specflux.flow.engine import Engine
from specflux.flow.record.events import FORGED, EventLog
from specflux.flow.record.run import Run
from specflux.flow.steps.roles import Agents, StepResult
from specflux.flow.workflow.edges import spec_for
from specflux.flow.workflow.workflow_file import load_workflow
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace


class Instant:
    """Roles that answer at once: the coder hands over a chain output, the reviewer approves."""

    def perform(self, step: dict[str, Any], state: dict[str, Any], resumed: bool = False, key: str = "",
                stamp: str | None = None) -> StepResult:
        task_id = step["taskId"]
        if step["kind"] == "coder":
            return StepResult("OK", {"taskId": task_id, "code": "", "status": "complete",
                                     "selfValidation": {"passed": True, "issues": [], "claimedByAgent": True}},
                              chain_output={"summary": f"task {task_id} done", "downstream": ""})
        return StepResult("OK", {"taskId": task_id, "approved": True, "issues": [],
                                 "criteriaResults": [{"criterion": "1", "met": True}]})


def workspace(tmp_path: Path, tasks: int) -> TaskStateManager:
    from specflux.cli.main import main

    assert main(["init", str(tmp_path)]) == 0
    for i in range(tasks):
        assert main(["--root", str(tmp_path), "new", f"task {i + 1}", "--ac", "it works"]) == 0
    return TaskStateManager(Workspace.find(explicit=str(tmp_path)), git=False)


def test_one_fsync_of_the_event_log_per_step(tmp_path, monkeypatch, capsys):
    manager = workspace(tmp_path, 3)
    run = runs.start(manager, agents=Agents(kind="command", cmd="true"))
    events = str(run.events.path)
    synced: list[str] = []
    real = os.fsync

    def counted(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else "?")
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    engine = Engine(manager, run, spec_for(load_workflow("queue", manager.ws.dir), manager.ws.root), Instant())
    state = engine.drive()
    monkeypatch.undo()
    assert state["status"] == "completed" and state["iteration"] == 6
    if synced[0] != "?":  # only the log is fsynced (the accepted task files are in its journal), once
        assert synced == [events] * len(synced), synced  # per step, plus the run's status twice and
        assert len(synced) == state["iteration"] + 3  # the first step's start (nothing is before it)
    assert not run.events._unsynced  # the run stopped: every event is on the disk
    assert [e["seq"] for e in run.events.read()] == list(range(1, len(run.events.read()) + 1))


def test_the_chain_goes_on_after_another_process_appends(tmp_path):
    path = tmp_path / "events.jsonl"
    key = b"k" * 32
    engine_side, other = EventLog(path, key=key), EventLog(path, key=key)
    engine_side.append({"type": "a"}, sync=False)
    engine_side.append({"type": "b"}, sync=False)
    other.append({"type": "control", "action": "pause"})  # `flow pause` from another terminal
    engine_side.append({"type": "c"}, sync=False)
    engine_side.sync()
    events, _, _ = EventLog(path, key=key).read_verified_from(0, "")
    assert [e.get("type") for e in events] == ["a", "b", "control", "c"]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert not any(FORGED in e for e in events)


def test_a_torn_line_is_cut_before_the_next_append(tmp_path):
    path = tmp_path / "events.jsonl"
    log = EventLog(path, key=b"k" * 32)
    log.append({"type": "a"}, sync=False)
    with open(path, "ab") as f:  # a kill in the middle of someone's write
        f.write(b'{"seq":2,"type":"to')
    log.append({"type": "b"}, sync=False)
    events, _, _ = EventLog(path, key=b"k" * 32).read_verified_from(0, "")
    assert [(e["seq"], e["type"]) for e in events] == [(1, "a"), (2, "b")]


class Meddler:
    """A spec from outside specflux that changes the state it is given."""

    def on_agent_completed(self, state, response, ctx):
        state["tasks"][0]["status"] = "complete"
        state["metrics"]["totalAttempts"] = 999
        if response.work_kind == "BOOT":
            return Decision("d-boot", (RequestWork("coder", {"taskId": state["tasks"][0]["id"]}),))
        return Decision(f"d-{response.step_id}", (), finalize=True)

    def on_agent_error(self, state, work_kind, error, attempt):
        return Decision("d-error", (), finalize=True)


def test_a_spec_from_outside_specflux_cannot_change_the_run(tmp_path, capsys):
    manager = workspace(tmp_path, 1)
    run = runs.start(manager, agents=Agents(kind="command", cmd="true"))
    spec = Meddler()
    assert not type(spec).__module__.startswith("specflux.")
    Engine(manager, run, spec, Instant()).drive()
    state = Run(manager.ws, run.id).state()
    assert state["metrics"]["totalAttempts"] == 1
    assert state["tasks"][0]["status"] == "pending"  # no task_status event: what the spec wrote stayed in its copy


def test_the_state_copy_is_deep_keeps_its_shapes_and_takes_anything():
    """`copied` (what a Python spec and an early acceptance get): nothing of the original is
    reachable from the copy, a tuple stays a tuple and an output met twice stays one object (as
    the folded state has it); a value marshal cannot write is deep-copied all the same."""
    from specflux.flow.state import copied

    output = {"summary": "did it", "files": ["a.py"]}
    state = {"tasks": [{"id": "1", "status": "pending"}], "bootMoment": (1, 2), "coderOutput": output,
             "laneOutputs": {"1": {"coderOutput": output}}, "metrics": {"totalAttempts": 1, "costUsd": 0.5}}
    copy_ = copied(state)
    assert copy_ == state and type(copy_["bootMoment"]) is tuple
    copy_["tasks"][0]["status"] = "complete"
    copy_["coderOutput"]["files"].append("b.py")
    copy_["metrics"]["totalAttempts"] = 999
    assert state["tasks"][0]["status"] == "pending" and output["files"] == ["a.py"]
    assert state["metrics"]["totalAttempts"] == 1
    assert copy_["laneOutputs"]["1"]["coderOutput"] is copy_["coderOutput"]  # one object, as in the state

    class Odd:
        def __init__(self):
            self.items = [1]

    odd = {"odd": Odd()}
    again = copied(odd)
    again["odd"].items.append(2)
    assert odd["odd"].items == [1]
