"""The seed's four decision patterns (specflux.flow.patterns), driven by a tiny in-test engine,
and loading specs by reference and by entry point (specflux.flow.decisions.load_spec)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

import specflux.flow.patterns as patterns
from specflux.flow.decisions import (
    AgentErrorInfo,
    AgentResponse,
    Annotate,
    Decision,
    DecisionContext,
    RequestApproval,
    RequestWork,
    SpecContext,
    SpecError,
    load_spec,
)
from specflux.flow.patterns import BranchingFactory, LinearFactory, MapReduceFactory, ParallelFactory

# An agent: (step id, work kind, payload) -> (status, content), or an AgentErrorInfo for a failure.
Agent = Callable[[str, str, Any], "tuple[str, Any] | AgentErrorInfo"]


def ok(content: Any = None) -> Agent:
    return lambda step_id, kind, payload: ("OK", content if content is not None else {"did": step_id})


def drive(factory, agent: Agent, config=None, lifo=False):
    """The fake engine: BOOT, then run requested steps one at a time (oldest first, or newest
    first with `lifo`), mark them DONE or FAILED, ask the spec, apply its decision. Returns
    (decisions, work kinds run in order, final state)."""
    spec = factory.create(SpecContext(config=config or {}))
    state: dict[str, Any] = {"openSteps": {}, "artifacts": {}}
    queue: list[str] = []
    attempts: dict[str, int] = {}
    decisions: list[Decision] = []
    kinds: list[str] = []

    def apply(decision: Decision) -> None:
        decisions.append(decision)
        for action in decision.actions:
            if isinstance(action, RequestWork):
                step_id = action.step_id or f"auto-{len(state['openSteps'])}"
                state["openSteps"][step_id] = {"kind": action.work_kind, "status": "WAITING",
                                               "payload": action.payload, "result": None}
                queue.append(step_id)
            elif isinstance(action, Annotate):
                state["artifacts"][action.key] = action.value

    apply(spec.on_agent_completed(state, AgentResponse("boot", "BOOT", run_id="r1"), ctx(0)))
    while queue and not decisions[-1].finalize:
        assert len(kinds) < 100, f"the run does not end: {kinds[-5:]}"
        step_id = queue.pop() if lifo else queue.pop(0)
        step = state["openSteps"][step_id]
        kinds.append(step["kind"])
        outcome = agent(step_id, step["kind"], step["payload"])
        if isinstance(outcome, AgentErrorInfo):
            step["status"] = "FAILED"
            attempts[step_id] = attempts.get(step_id, 0) + 1
            apply(spec.on_agent_error(state, step["kind"], outcome, attempts[step_id]))
        else:
            step["status"], step["result"] = "DONE", outcome[1]
            response = AgentResponse(step_id, step["kind"], outcome[0], outcome[1], run_id="r1")
            apply(spec.on_agent_completed(state, response, ctx(len(decisions))))
    return decisions, kinds, state


def ctx(i: int) -> DecisionContext:
    return DecisionContext(now=1_700_000_000_000 + 1000 * i, seed=42)


def work(decision: Decision) -> list[tuple[str, str | None]]:
    return [(a.work_kind, a.step_id) for a in decision.actions if isinstance(a, RequestWork)]


# -- linear -------------------------------------------------------------------------------------

def test_linear_runs_the_steps_in_order_then_finalizes():
    decisions, kinds, _ = drive(LinearFactory(), ok(), {"steps": ["STEP_A", "STEP_B", "STEP_C"]})
    assert kinds == ["STEP_A", "STEP_B", "STEP_C"]
    assert [work(d) for d in decisions] == [[("STEP_A", "step-0")], [("STEP_B", "step-1")],
                                            [("STEP_C", "step-2")], []]
    assert decisions[-1].finalize and decisions[-1].failure_reason is None
    assert not any(d.finalize for d in decisions[:-1])


def test_linear_may_repeat_a_work_kind():
    _, kinds, _ = drive(LinearFactory(), ok(), {"steps": ["CODE", "REVIEW", "CODE", "REVIEW"]})
    assert kinds == ["CODE", "REVIEW", "CODE", "REVIEW"]


def test_an_error_response_ends_the_run_as_failed():
    agent = lambda step_id, kind, payload: ("ERROR", {"why": "broken"}) if kind == "B" else ("OK", {})
    decisions, kinds, _ = drive(LinearFactory(), agent, {"steps": ["A", "B", "C"]})
    assert kinds == ["A", "B"]
    assert decisions[-1].finalize and decisions[-1].failure_reason == "error"
    assert decisions[-1].actions == ()


@pytest.mark.parametrize("config", [{}, {"steps": []}, {"steps": "A"}, {"steps": ["A", ""]}])
def test_linear_needs_steps(config):
    with pytest.raises(SpecError, match="steps"):
        LinearFactory().create(SpecContext(config=config))


def test_a_response_for_work_the_spec_never_requested_is_a_spec_error():
    spec = LinearFactory().create(SpecContext(config={"steps": ["A"]}))
    with pytest.raises(SpecError, match="'Z'"):
        spec.on_agent_completed({"openSteps": {}}, AgentResponse("step-0", "Z"), ctx(1))


# -- branching ----------------------------------------------------------------------------------

@pytest.mark.parametrize("analysis, expected", [
    ({"refactorNeeded": True, "smells": 3}, ["ANALYZE", "REFACTOR", "GENERATE_TESTS"]),
    ({"refactorNeeded": False}, ["ANALYZE", "GENERATE_TESTS"]),
    ({}, ["ANALYZE", "GENERATE_TESTS"]),
    ({"refactorNeeded": "yes"}, ["ANALYZE", "GENERATE_TESTS"]),  # only a JSON true counts
])
def test_branching_refactors_only_when_the_analysis_says_so(analysis, expected):
    outputs = {"ANALYZE": analysis, "REFACTOR": {"refactored": True}, "GENERATE_TESTS": {"tests": 5}}
    agent = lambda step_id, kind, payload: ("OK", outputs[kind])
    decisions, kinds, state = drive(BranchingFactory(), agent)
    assert kinds == expected
    assert decisions[-1].finalize and decisions[-1].failure_reason is None
    # each next step gets the output of the one before it
    tests_payload = next(s["payload"] for s in state["openSteps"].values() if s["kind"] == "GENERATE_TESTS")
    assert tests_payload == outputs[expected[-2]]


# -- parallel -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lifo", [False, True])
def test_parallel_starts_every_part_at_once_and_joins_on_the_last(lifo):
    decisions, kinds, _ = drive(ParallelFactory(), ok(), lifo=lifo)
    assert work(decisions[0]) == [("GENERATE_CODE", "code"), ("GENERATE_TESTS", "tests"),
                                  ("GENERATE_DOCS", "docs")]
    assert sorted(kinds) == ["GENERATE_CODE", "GENERATE_DOCS", "GENERATE_TESTS"]
    # one decision per completion: two waits (no actions, no finalize), then the join
    assert len(decisions) == 4
    for waiting in decisions[1:3]:
        assert waiting.actions == () and not waiting.finalize
    assert decisions[3].finalize and decisions[3].failure_reason is None


def test_parallel_parts_and_work_kinds_come_from_the_config():
    config = {"parts": ["api", "ui"], "workKinds": {"ui": "BUILD_UI"}}
    decisions, kinds, _ = drive(ParallelFactory(), ok(), config)
    assert work(decisions[0]) == [("GENERATE_API", "api"), ("BUILD_UI", "ui")]
    assert kinds == ["GENERATE_API", "BUILD_UI"] and decisions[-1].finalize


@pytest.mark.parametrize("config", [{"parts": []}, {"parts": ["a", "a"]},
                                    {"parts": ["a"], "workKinds": {"b": "X"}}])
def test_parallel_refuses_a_bad_config(config):
    with pytest.raises(SpecError):
        ParallelFactory().create(SpecContext(config=config))


def test_parallel_waits_while_a_part_has_failed_and_is_being_retried():
    spec = ParallelFactory().create(SpecContext())
    state = {"openSteps": {"code": {"kind": "GENERATE_CODE", "status": "DONE"},
                           "tests": {"kind": "GENERATE_TESTS", "status": "FAILED"},
                           "docs": {"kind": "GENERATE_DOCS", "status": "DONE"}}, "artifacts": {}}
    decision = spec.on_agent_completed(state, AgentResponse("docs", "GENERATE_DOCS"), ctx(3))
    assert not decision.finalize and decision.actions == ()


# -- map-reduce ---------------------------------------------------------------------------------

def map_reduce_agent(items: list[Any]) -> Agent:
    def agent(step_id, kind, payload):
        if kind == "SPLIT":
            return "OK", {"items": items}
        if kind == "PROCESS_ITEM":
            return "OK", {"length": len(payload["item"])}
        return "OK", {"total": sum(r["length"] for r in payload["results"])}
    return agent


@pytest.mark.parametrize("lifo", [False, True])
def test_map_reduce_processes_each_item_then_aggregates_in_item_order(lifo):
    decisions, kinds, state = drive(MapReduceFactory(), map_reduce_agent(["a", "bb", "ccc"]), lifo=lifo)
    assert kinds == ["SPLIT", "PROCESS_ITEM", "PROCESS_ITEM", "PROCESS_ITEM", "AGGREGATE"]
    assert work(decisions[1]) == [("PROCESS_ITEM", "item-0"), ("PROCESS_ITEM", "item-1"),
                                  ("PROCESS_ITEM", "item-2")]
    assert [a.payload for a in decisions[1].actions] == [{"item": "a"}, {"item": "bb"}, {"item": "ccc"}]
    assert state["artifacts"] == {"result:item-0": {"length": 1}, "result:item-1": {"length": 2},
                                  "result:item-2": {"length": 3}}
    # AGGREGATE is requested once, by the last item, with every result in item order
    aggregate = [a for d in decisions for a in d.actions
                 if isinstance(a, RequestWork) and a.work_kind == "AGGREGATE"]
    assert [a.payload for a in aggregate] == [{"results": [{"length": 1}, {"length": 2}, {"length": 3}]}]
    assert decisions[-1].finalize and decisions[-1].failure_reason is None


def test_map_reduce_with_no_items_aggregates_nothing():
    decisions, kinds, _ = drive(MapReduceFactory(), map_reduce_agent([]))
    assert kinds == ["SPLIT", "AGGREGATE"]
    assert decisions[1].actions == (RequestWork("AGGREGATE", {"results": []}, "aggregate"),)


def test_map_reduce_refuses_items_that_are_not_a_list():
    spec = MapReduceFactory().create(SpecContext())
    with pytest.raises(SpecError, match="items"):
        spec.on_agent_completed({}, AgentResponse("split", "SPLIT", content={"items": "abc"}), ctx(1))


# -- agent errors -------------------------------------------------------------------------------

ALL = [(LinearFactory(), {"steps": ["A", "B"]}), (BranchingFactory(), {}), (ParallelFactory(), {}),
       (MapReduceFactory(), {})]


@pytest.mark.parametrize("factory, config", ALL)
def test_a_rate_limit_is_retried_twice_then_given_up(factory, config):
    agent = lambda step_id, kind, payload: AgentErrorInfo("RATE_LIMIT", "slow down")
    decisions, kinds, _ = drive(factory, agent, config)
    first = kinds[0]
    assert kinds.count(first) == 3  # (the parallel parts take turns)
    retries = [a for d in decisions[1:] for a in d.actions if a.work_kind == first]
    assert [a.payload["delay_s"] for a in retries] == [2.0, 4.0]
    assert not any(d.finalize for d in decisions[:-1])
    assert decisions[-1].finalize and decisions[-1].failure_reason == "error"
    assert "slow down" in decisions[-1].why


@pytest.mark.parametrize("factory, config", ALL)
def test_any_other_agent_error_ends_the_run(factory, config):
    agent = lambda step_id, kind, payload: AgentErrorInfo("ERROR", "crashed")
    decisions, kinds, _ = drive(factory, agent, config)
    assert len(kinds) == 1
    assert decisions[-1].finalize and decisions[-1].failure_reason == "error"


def test_a_retried_step_keeps_its_step_id_and_payload():
    """A rate-limited item is asked again as the same step with the same item, so the join that
    waits for every PROCESS_ITEM step sees it done."""
    calls: dict[str, int] = {}
    inner = map_reduce_agent(["a", "bb"])

    def agent(step_id, kind, payload):
        calls[step_id] = calls.get(step_id, 0) + 1
        if step_id == "item-1" and calls[step_id] < 3:
            return AgentErrorInfo("RATE_LIMIT", "slow down", retry_after_s=7)
        return inner(step_id, kind, payload)

    decisions, kinds, state = drive(MapReduceFactory(), agent)
    assert kinds == ["SPLIT", "PROCESS_ITEM", "PROCESS_ITEM", "PROCESS_ITEM", "PROCESS_ITEM", "AGGREGATE"]
    retry = decisions[3]
    assert retry.actions == (RequestWork("PROCESS_ITEM", {"item": "bb", "delay_s": 7}, "item-1"),)
    assert set(state["openSteps"]) == {"split", "item-0", "item-1", "aggregate"}
    assert state["openSteps"]["aggregate"]["payload"] == {"results": [{"length": 1}, {"length": 2}]}
    assert decisions[-1].finalize and decisions[-1].failure_reason is None


# -- determinism and the wire format ------------------------------------------------------------

RUNS = [
    (LinearFactory(), ok(), {"steps": ["A", "B", "C"]}),
    (BranchingFactory(), ok({"refactorNeeded": True}), {}),
    (ParallelFactory(), ok(), {}),
    (MapReduceFactory(), map_reduce_agent(["x", "yy", "zzz"]), {}),
]


@pytest.mark.parametrize("factory, agent, config", RUNS)
def test_the_same_inputs_give_the_same_decisions(factory, agent, config):
    first, _, _ = drive(factory, agent, config)
    second, _, _ = drive(factory, agent, config)
    assert [d.to_json() for d in first] == [d.to_json() for d in second]
    ids = [d.decision_id for d in first]
    assert len(set(ids)) == len(ids)
    assert str(ctx(0).now) in ids[0]


@pytest.mark.parametrize("factory, agent, config", RUNS)
def test_decisions_round_trip_through_json(factory, agent, config):
    decisions, _, _ = drive(factory, agent, config)
    for decision in decisions:
        data = json.loads(json.dumps(decision.to_json()))
        assert Decision.from_json(data) == decision
        assert Decision.from_json(data).to_json() == decision.to_json()


def test_every_action_type_round_trips():
    decision = Decision("d1", (RequestWork("CODE", {"a": [1, 2]}, "s1"), RequestApproval({"q": "ok?"}),
                               Annotate("k", {"v": 1})), finalize=True, based_on={"stepId": "s0"},
                        failure_reason="error", why="because")
    assert Decision.from_json(json.loads(json.dumps(decision.to_json()))) == decision


@pytest.mark.parametrize("factory", [LinearFactory(), BranchingFactory(), ParallelFactory(),
                                     MapReduceFactory()])
def test_describe_says_what_a_spec_needs(factory):
    described = factory.describe()
    assert set(described) == {"name", "version", "description", "requiredWorkKinds", "configSchema"}
    assert described["name"] == factory.name and described["version"] == factory.version
    assert described["description"]
    json.dumps(described)
    described["configSchema"]["added"] = {}
    assert "added" not in factory.describe()["configSchema"]


def test_the_patterns_import_only_the_decision_protocol():
    """Specs depend on the protocol, never the engine (seed 003): besides the standard library,
    patterns.py imports `.decisions` and nothing else of specflux."""
    tree = ast.parse(Path(patterns.__file__).read_text())
    ours = [(node.level, node.module) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.level or node.module.startswith("specflux"))]
    ours += [(0, alias.name) for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names if alias.name.startswith("specflux")]
    assert ours == [(1, "decisions")]


# -- loading specs ------------------------------------------------------------------------------

def test_load_spec_takes_a_class_or_an_instance(monkeypatch):
    factory = load_spec("specflux.flow.patterns:LinearFactory")
    assert isinstance(factory, LinearFactory) and factory.name == "linear"
    monkeypatch.setattr(patterns, "LINEAR", LinearFactory(), raising=False)
    assert load_spec("specflux.flow.patterns:LINEAR") is patterns.LINEAR


@pytest.mark.parametrize("ref", [
    "specflux.no_such_module:Factory",
    "specflux.flow.patterns:NoSuchFactory",
    "specflux.flow.patterns:BOOT",  # a string
    "specflux.flow.decisions:Decision",  # a class that is no factory
    "specflux.flow.decisions:load_spec",  # a function
    "no-such-spec",  # neither a reference nor an entry point
])
def test_load_spec_names_the_reference_it_cannot_use(ref):
    with pytest.raises(SpecError) as raised:
        load_spec(ref)
    assert repr(ref) in str(raised.value)


def _fake_distribution(root: Path, entry_point: str) -> None:
    package = root / "fake_specs_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from specflux.flow.patterns import ParallelFactory\n\n"
        "class FakeFactory(ParallelFactory):\n    name = 'fake'\n")
    info = root / "fake_specs-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-specs\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[specflux.specs]\nfake = {entry_point}\n")


def test_load_spec_finds_an_entry_point(tmp_path, monkeypatch):
    _fake_distribution(tmp_path, "fake_specs_pkg:FakeFactory")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_specs_pkg", raising=False)
    try:
        factory = load_spec("fake")
        assert factory.name == "fake" and isinstance(factory, ParallelFactory)
        decision = factory.create(SpecContext()).on_agent_completed({}, AgentResponse("b", "BOOT"), ctx(0))
        assert len(decision.actions) == 3
    finally:
        sys.modules.pop("fake_specs_pkg", None)


def test_an_entry_point_that_does_not_load_is_a_spec_error(tmp_path, monkeypatch):
    _fake_distribution(tmp_path, "fake_specs_pkg:Missing")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(SpecError, match="'fake'"):
            load_spec("fake")
    finally:
        sys.modules.pop("fake_specs_pkg", None)
