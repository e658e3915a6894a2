"""Declarative workflow files: seed 000's edges with JSONata conditions, loaded and validated."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

import pytest

from specflux.base.errors import NotFoundError, ParseError
from specflux.flow.workflow.workflow_file import (
    BUILTIN_QUEUE,
    ROLES,
    STATE_FIELDS,
    Edge,
    Workflow,
    WorkflowError,
    load_workflow,
    parse_workflow,
)

# Seed 000, "Edge Definitions with JSONata", character for character.
SEED_WHEN = {
    "coder-retry": "coderOutput.selfValidation.passed = false",
    "coder-to-reviewer": "coderOutput.selfValidation.passed = true",
    "reviewer-reject": "reviewerOutput.approved = false",
    "next-task": "reviewerOutput.approved = true and currentTaskIndex < $count(tasks) - 1",
}

# The seed's five edges as a workflow file. The seed's `spec` node is the planner role here.
SEED_EDGES = """\
name = "seed-000"
version = "1"
start = "coder"

[[edges]]
id = "spec-to-coder"
from = "planner"
to = "coder"

[[edges]]
id = "coder-retry"
from = "coder"
to = "coder"
when = 'coderOutput.selfValidation.passed = false'
max_iterations = 3

[[edges]]
id = "coder-to-reviewer"
from = "coder"
to = "reviewer"
when = 'coderOutput.selfValidation.passed = true'

[[edges]]
id = "reviewer-reject"
from = "reviewer"
to = "coder"
when = 'reviewerOutput.approved = false'
max_iterations = 2

[[edges]]
id = "next-task"
from = "reviewer"
to = "coder"
when = 'reviewerOutput.approved = true and currentTaskIndex < $count(tasks) - 1'
task = "next"
"""


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based line of the nth line of `text` that contains `needle`."""
    hits = [n for n, line in enumerate(text.splitlines(), start=1) if needle in line]
    return hits[nth - 1]


def fired(workflow: Workflow, role: str, state) -> str | None:
    """The id of the first edge from `role` whose condition holds: what the engine would take."""
    return next((e.id for e in workflow.edges_from(role) if e.fires(state)), None)


def problem(text: str) -> WorkflowError:
    with pytest.raises(WorkflowError) as caught:
        parse_workflow(text, "workflow.toml")
    return caught.value


def located(text: str) -> list[str]:
    """Every problem of `text` as `path:line: message`."""
    return [str(p) for p in problem(text).problems]


EDGE = '[[edges]]\nid = "{id}"\nfrom = "{src}"\nto = "{dst}"\n'


def edge(id: str, src: str = "coder", dst: str = "reviewer", **extra: str) -> str:
    return EDGE.format(id=id, src=src, dst=dst) + "".join(f"{k} = {v}\n" for k, v in extra.items())


HEAD = 'name = "w"\nstart = "coder"\n'


# --- the seed ----------------------------------------------------------------------------------

def test_seed_edges_load_verbatim():
    workflow = parse_workflow(SEED_EDGES, "seed.toml")
    assert [e.id for e in workflow.edges] == ["spec-to-coder", "coder-retry", "coder-to-reviewer",
                                              "reviewer-reject", "next-task"]
    assert {e.id: e.when for e in workflow.edges if e.when} == SEED_WHEN
    assert {e.id: e.max_iterations for e in workflow.edges if e.max_iterations} == \
        {"coder-retry": 3, "reviewer-reject": 2}
    assert [(e.from_, e.to) for e in workflow.edges] == [
        ("planner", "coder"), ("coder", "coder"), ("coder", "reviewer"), ("reviewer", "coder"), ("reviewer", "coder")]
    assert workflow.edges[0].when is None
    assert [e.line for e in workflow.edges] == [line_of(SEED_EDGES, "[[edges]]", n) for n in range(1, 6)]


def test_seed_edges_fire_as_the_seed_says():
    workflow = parse_workflow(SEED_EDGES, "seed.toml")
    # EDGE 1: always fires after the spec agent.
    assert fired(workflow, "planner", {"tasks": []}) == "spec-to-coder"
    # "After Coding Agent (Self-Validation Failed)": the coder loops.
    failed = {
        "currentTaskIndex": 0,
        "currentAttempts": 1,
        "coderOutput": {"taskId": "T001", "code": "// attempt 1...", "status": "needs_revision",
                        "selfValidation": {"passed": False, "issues": ["Missing input validation", "No error handling"]}},
        "taskAttempts": {"T001": 1},
        "metrics": {"totalAttempts": 1},
    }
    assert fired(workflow, "coder", failed) == "coder-retry"
    # "After Coding Agent (Self-Validation Passed)": on to the reviewer.
    passed = {**failed, "currentAttempts": 2,
              "coderOutput": {"taskId": "T001", "code": "// attempt 2 - fixed...", "status": "complete",
                              "selfValidation": {"passed": True, "issues": []}}}
    assert fired(workflow, "coder", passed) == "coder-to-reviewer"
    tasks = [{"id": "T001", "status": "review"}, {"id": "T002", "status": "pending"},
             {"id": "T003", "status": "pending"}]
    # EDGE 4: rejected, back to the coder.
    rejected = {"tasks": tasks, "currentTaskIndex": 0,
                "reviewerOutput": {"taskId": "T001", "approved": False, "issues": []}}
    assert fired(workflow, "reviewer", rejected) == "reviewer-reject"
    # EDGE 5: approved with tasks left.
    approved = {**rejected, "reviewerOutput": {"taskId": "T001", "approved": True, "issues": []}}
    assert fired(workflow, "reviewer", approved) == "next-task"
    assert workflow.edges[-1].task == "next"
    # IMPLICIT: approved on the last task, no edge fires and the workflow ends.
    assert fired(workflow, "reviewer", {**approved, "currentTaskIndex": 2}) is None


def evaluate_jsonata(expression: str, state) -> bool:
    return Edge(id="t", from_="coder", to="coder", when=expression).fires(state)


def test_seed_coder_retry_fires_when_self_validation_fails():
    state = {
        "coderOutput": {
            "selfValidation": {"passed": False, "issues": ["error"]}
        }
    }
    assert evaluate_jsonata("coderOutput.selfValidation.passed = false", state) is True


def test_seed_next_task_fires_when_approved_and_more_tasks():
    state = {
        "reviewerOutput": {"approved": True},
        "currentTaskIndex": 0,
        "tasks": [{}, {}, {}],  # 3 tasks
    }
    assert evaluate_jsonata("reviewerOutput.approved = true and currentTaskIndex < $count(tasks) - 1", state) is True


def test_seed_workflow_ends_when_all_tasks_complete():
    state = {
        "reviewerOutput": {"approved": True},
        "currentTaskIndex": 2,
        "tasks": [{}, {}, {}],  # 3 tasks, on last one
    }
    # No edge fires - currentTaskIndex (2) is NOT < $count(tasks) - 1 (2)
    assert evaluate_jsonata("currentTaskIndex < $count(tasks) - 1", state) is False
    queue = load_workflow("queue", Path("/nonexistent"))
    assert fired(queue, "reviewer", state) is None


# --- the built-in queue ------------------------------------------------------------------------

def test_builtin_queue_is_the_seed(tmp_path):
    queue = load_workflow("queue", tmp_path / ".specflux")
    seed = parse_workflow(SEED_EDGES, "seed.toml")
    same = lambda e: (e.id, e.from_, e.to, e.when, e.max_iterations, e.task)  # noqa: E731
    assert [same(e) for e in queue.edges] == [same(e) for e in seed.edges]
    assert (queue.name, queue.version, queue.start, queue.spec, queue.path) == ("queue", "1", "coder", None, None)
    assert queue.hash == hashlib.sha256(BUILTIN_QUEUE.encode()).hexdigest()
    assert [e.id for e in queue.edges_from("coder")] == ["coder-retry", "coder-to-reviewer"]
    assert queue.edges_from("approval") == ()


def test_state_fields_are_the_contracts():
    assert set(STATE_FIELDS) == {
        "runId", "status", "workflow", "tasks", "currentTaskIndex", "taskAttempts", "currentAttempts",
        "coderOutput", "reviewerOutput", "validation", "metrics", "iteration", "maxIterations", "artifacts",
        "openSteps", "pausedFor", "failureReason", "approvalOutput", "plannerOutput"}
    assert ROLES == ("planner", "coder", "validate", "reviewer", "approval")


def test_importing_the_module_does_not_import_jsonata():
    code = "import sys, specflux.flow.workflow.workflow_file; assert 'jsonata' not in sys.modules, 'jsonata imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_built_in_condition_passes_the_check_a_users_file_gets():
    """Loading a built-in workflow does not compile its conditions (workflow_file._check_when):
    this is where they are checked instead, exactly as a user's file is at load."""
    from specflux.flow.workflow.builtin import built_in_conditions
    from specflux.flow.workflow.workflow_file import _compile_checked, _Problems

    assert built_in_conditions() == set(SEED_WHEN.values())
    for when in built_in_conditions():
        problems = _Problems("<built-in>")
        compiled, constant = _compile_checked(when, "e", 1, problems)
        assert problems.found == [] and compiled is not None and constant is None, when


def test_a_run_of_the_built_in_queue_needs_no_jsonata(tmp_path):
    """Loading `queue` and deciding on the states a run meets import no JSONata (a worker starts
    that much sooner); a state the fast conditions leave to JSONata compiles the condition then."""
    code = f"""if True:
        import sys
        from specflux.flow.workflow.workflow_file import load_workflow
        queue = load_workflow("queue", {str(tmp_path)!r})
        edges = {{e.id: e for e in queue.edges}}
        state = {{"coderOutput": {{"selfValidation": {{"passed": True}}}}, "reviewerOutput": {{"approved": True}},
                  "currentTaskIndex": 0, "tasks": [{{}}, {{}}]}}
        assert [e.id for e in queue.edges if e.fires(state)] == ["spec-to-coder", "coder-to-reviewer", "next-task"]
        assert "jsonata" not in sys.modules, "jsonata imported"
        odd = {{"coderOutput": {{"selfValidation": {{"passed": None}}}}}}  # null: JSONata decides
        assert edges["coder-retry"].fires(odd) is False and edges["coder-retry"]._compiled is not None
        assert "jsonata" in sys.modules
    """
    subprocess.run([sys.executable, "-c", code], check=True)


# --- finding a workflow ------------------------------------------------------------------------

def test_user_workflow_found_by_name(tmp_path):
    workspace = tmp_path / ".specflux"
    (workspace / "workflows").mkdir(parents=True)
    text = 'name = "solo"\n' + edge("coder-retry", dst="coder", when="'coderOutput.selfValidation.passed = false'")
    file = workspace / "workflows" / "solo.toml"
    file.write_text(text)
    workflow = load_workflow("solo", workspace)
    assert workflow.name == "solo" and workflow.path == str(file)
    assert [e.id for e in workflow.edges] == ["coder-retry"]
    with pytest.raises(NotFoundError) as caught:
        load_workflow("nothere", workspace)
    assert "nothere" in str(caught.value) and "solo" in str(caught.value)


def test_a_user_file_named_queue_overrides_the_builtin(tmp_path):
    workspace = tmp_path / ".specflux"
    (workspace / "workflows").mkdir(parents=True)
    (workspace / "workflows" / "queue.toml").write_text('name = "my queue"\n' + edge("only"))
    assert load_workflow("queue", workspace).name == "my queue"


def test_workflow_by_path_is_located_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("flows").mkdir()
    Path("flows/bad.toml").write_text(HEAD + edge("a", dst="reviewr"))
    with pytest.raises(WorkflowError) as caught:
        load_workflow("flows/bad.toml", tmp_path / ".specflux")
    assert str(caught.value).startswith("flows/bad.toml:6: unknown role `reviewr`")
    with pytest.raises(NotFoundError):
        load_workflow("flows/missing.toml", tmp_path / ".specflux")


def test_hash_changes_when_the_file_changes(tmp_path):
    file = tmp_path / "w.toml"
    file.write_text(HEAD + edge("a"))
    first = load_workflow(str(file), tmp_path)
    assert first.hash == hashlib.sha256(file.read_bytes()).hexdigest()
    assert load_workflow(str(file), tmp_path).hash == first.hash
    file.write_text(HEAD + edge("a") + "# a comment\n")
    assert load_workflow(str(file), tmp_path).hash != first.hash


# --- validation, each problem at its line ------------------------------------------------------

def test_toml_syntax_error_is_located():
    text = HEAD + edge("a") + 'when = "unterminated\n'
    assert located(text)[0].startswith(f"workflow.toml:{line_of(text, 'unterminated')}: not valid TOML")


def test_unknown_top_level_keys():
    text = HEAD + 'colour = "red"\n[settings]\nx = 1\n' + edge("a")
    assert located(text) == [
        f"workflow.toml:{line_of(text, 'colour')}: unknown key `colour` (a workflow has name, version, start, edges, spec, tests)",
        f"workflow.toml:{line_of(text, '[settings]')}: unknown key `settings` (a workflow has name, version, start, edges, spec, tests)",
    ]


def test_unknown_edge_key_with_a_suggestion():
    text = HEAD + edge("a") + "max_iteration = 3\n"
    assert located(text) == [f"workflow.toml:{line_of(text, 'max_iteration')}: unknown key `max_iteration` in an "
                             "edge (did you mean `max_iterations`?): an edge has id, from, to, when, max_iterations, task"]


def test_missing_name_and_default_start():
    assert located(edge("a")) == ['workflow.toml:1: `name` is missing: add `name = "..."`']
    assert parse_workflow('name = "w"\n' + edge("a"), "w.toml").start == "coder"


def test_unknown_roles():
    text = 'name = "w"\nstart = "codr"\n' + edge("a", src="coder", dst="reviewr")
    assert located(text) == [
        f"workflow.toml:2: unknown role `codr` (did you mean `coder`?): roles are {', '.join(ROLES)}",
        f"workflow.toml:{line_of(text, 'reviewr')}: unknown role `reviewr` (did you mean `reviewer`?): "
        f"roles are {', '.join(ROLES)}",
    ]


def test_missing_edge_keys_are_located_at_the_header():
    text = HEAD + '[[edges]]\nid = "a"\nto = "coder"\n'
    assert located(text) == [f"workflow.toml:{line_of(text, '[[edges]]')}: this edge has no `from`"]


def test_duplicate_edge_ids():
    text = HEAD + edge("a") + edge("a", src="reviewer", dst="coder")
    first, second = line_of(text, "[[edges]]", 1), line_of(text, 'id = "a"', 2)
    assert located(text) == [f"workflow.toml:{second}: duplicate edge id `a` (first at line {first})"]


@pytest.mark.parametrize("value", ["0", "-1", "2.5", '"3"', "true"])
def test_max_iterations_must_be_a_positive_integer(value):
    text = HEAD + edge("a", max_iterations=value)
    assert located(text) == [f"workflow.toml:{line_of(text, 'max_iterations')}: `max_iterations` must be a "
                             f"positive whole number, not {parse_value(value)!r}"]


def parse_value(value: str):
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(f"v = {value}")["v"]


def test_task_can_only_be_next():
    text = HEAD + edge("a", task='"skip"')
    assert located(text)[0].startswith(f"workflow.toml:{line_of(text, 'task =')}: `task` can only be \"next\"")


def test_when_that_does_not_parse():
    text = HEAD + edge("a", when="'coderOutput.selfValidation.passed = '")
    [message] = located(text)
    assert message.startswith(f"workflow.toml:{line_of(text, 'when')}: edge `a`: `when` is not valid JSONata")
    assert "Unexpected end of expression" in message  # jsonata's own words


@pytest.mark.parametrize("expression, message", [
    ("coderOutput.selfValidaton.passed = false",
     "reads `coderOutput.selfValidaton`, which the run state does not have (did you mean "
     "`coderOutput.selfValidation`?): `coderOutput` has taskId, code, status, selfValidation"),
    ("reviewrOutput.approved = true", "reads `reviewrOutput`, which the run state does not have (did you mean "
                                      "`reviewerOutput`?): it has " + ", ".join(STATE_FIELDS)),
    ('tasks[statsu = "complete"].id = "T1"', "reads `tasks.statsu`, which the run state does not have"),
    ('$count(reviewerOutput.issues[severty = "blocker"]) = 0', "reads `reviewerOutput.issues.severty`"),
    ("metrics.(tasksCompleted + tasksFaild) > 1", "reads `metrics.tasksFaild`"),
    ("$$.validation.pasRate > 0.9", "reads `validation.pasRate`"),
    ("currentTaskIndex.value = 1", "reads `currentTaskIndex.value`, but `currentTaskIndex` has no fields"),
    ("$random() < 0.5", "calls $random(), which gives another answer when the run is replayed"),
])
def test_when_reading_an_unknown_field(expression, message):
    text = HEAD + edge("a", when=f"'{expression}'")
    [found] = located(text)
    assert found.startswith(f"workflow.toml:{line_of(text, 'when')}: edge `a`: `when` {message}")


@pytest.mark.parametrize("expression", [
    "taskAttempts.T001 >= 2",  # keys are task ids: not checked
    'artifacts.`accepted:T001` = "yes"',
    'coderOutput.status = "coderOutput.nope"',  # a string, not a field
    '$exists(coderOutput) and coderOutput.status = "blocked"',
    'tasks[status = "failed" and priority < 3].id = "T1"',
    '$count(tasks[$.status = "complete"]) = $count(tasks)',
    "($done := metrics.tasksCompleted; $done > 2)",
    "validation.passRate >= 0.9 and validation.coverage > 80",
    "approvalOutput.approved = true",
    "reviewerOutput.criteriaResults[met = false].criterion = 'x'",
    "iteration < maxIterations",
])
def test_when_reading_known_fields_loads(expression):
    [a] = parse_workflow(HEAD + edge("a", when=f"'''{expression}'''"), "w.toml").edges
    assert a.when == expression


@pytest.mark.parametrize("expression", ["1 = 2", "false", "$count([]) > 0"])
def test_when_that_is_always_false(expression):
    text = HEAD + edge("a", when=f"'{expression}'")
    assert located(text) == [f"workflow.toml:{line_of(text, 'when')}: edge `a` can never fire: its `when` "
                             f"({expression}) reads nothing from the run state and is always false"]


def test_when_with_a_constant_that_is_not_boolean():
    text = HEAD + edge("a", when="'1 + 2'")
    assert located(text) == [f"workflow.toml:{line_of(text, 'when')}: edge `a`: `when` (1 + 2) gives 3, not true or false"]


def test_edge_shadowed_by_an_earlier_unconditional_edge():
    text = HEAD + edge("review", dst="reviewer") + edge("retry", dst="coder", when="'coderOutput.status = \"x\"'")
    assert located(text) == [f"workflow.toml:{line_of(text, 'from', 2)}: edge `retry` can never fire: edge "
                             f"`review` (line {line_of(text, '[[edges]]')}) leaves `coder` first and always fires"]
    # `when = "true"` always holds too.
    text = HEAD + edge("review", when="'true'") + edge("retry", dst="coder")
    assert located(text)[0].startswith(f"workflow.toml:{line_of(text, 'from', 2)}: edge `retry` can never fire")


def test_edge_from_a_role_the_run_never_reaches():
    text = HEAD + edge("a", src="coder", dst="reviewer") + edge("b", src="approval", dst="coder")
    assert located(text) == [f"workflow.toml:{line_of(text, 'approval')}: edge `b` can never fire: the run never "
                             "reaches `approval` (it is not `start` (coder) and no edge that can fire leads to it)"]
    # Reachable through another edge, or from the planner (a run started from a PRD): fine.
    parse_workflow(HEAD + edge("a") + edge("b", src="reviewer", dst="approval") +
                   edge("c", src="approval", dst="coder") + edge("p", src="planner", dst="coder"), "w.toml")


def test_every_problem_is_reported_in_line_order():
    text = HEAD + edge("a", dst="reviewr") + edge("b", max_iterations="0", task='"skip"')
    lines = [int(p.split(":")[1]) for p in located(text)]
    assert lines == sorted(lines) and len(lines) == 3
    assert isinstance(problem(text), ParseError)


def test_multiline_strings_do_not_confuse_the_lines():
    text = HEAD + edge("a") + 'when = """\ncoderOutput.selfValidation.passed\n  = true"""\nfrom_x = 1\n'
    assert located(text)[0].startswith(f"workflow.toml:{line_of(text, 'from_x')}: unknown key `from_x`")


def test_spec_instead_of_edges():
    workflow = parse_workflow('name = "py"\nspec = "mypkg.flow:Factory"\n', "w.toml")
    assert workflow.spec == "mypkg.flow:Factory" and workflow.edges == ()
    text = 'name = "py"\nspec = "mypkg.flow:Factory"\n' + edge("a")
    assert located(text) == ["workflow.toml:2: give either `spec` (Python decision logic) or `[[edges]]`, not both"]
    assert located('name = "nothing"\n') == ["workflow.toml:1: no `[[edges]]` and no `spec`: the workflow does nothing"]


# --- evaluation --------------------------------------------------------------------------------

def test_a_result_that_is_not_boolean_is_located_at_the_when_line():
    text = HEAD + edge("a", when="'coderOutput.selfValidation.passed'")
    [a] = parse_workflow(text, "w.toml").edges
    assert a.fires({"coderOutput": {"selfValidation": {"passed": True}}}) is True
    with pytest.raises(WorkflowError) as caught:
        a.fires({"coderOutput": None})
    assert str(caught.value).startswith(f"w.toml:{line_of(text, 'when')}: edge `a`: `when` gave nothing")


def test_an_evaluation_error_is_located_at_the_when_line():
    text = HEAD + edge("a", when="'coderOutput.code + 1 > 0'")
    [a] = parse_workflow(text, "w.toml").edges
    with pytest.raises(WorkflowError) as caught:
        a.fires({"coderOutput": {"code": "print()"}})
    assert str(caught.value).startswith(f"w.toml:{line_of(text, 'when')}: edge `a`: `when` failed on this state:")


def test_fires_reads_any_mapping():
    [a] = parse_workflow(HEAD + edge("a", when="'reviewerOutput.approved = true'"), "w.toml").edges
    state = MappingProxyType({"reviewerOutput": MappingProxyType({"approved": True}), "tasks": ({}, {})})
    assert a.fires(state) is True
