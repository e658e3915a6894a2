"""Seed 000's workflow as people copy it: its five edges and its three edge-condition tests written
into a workflow file as the seed has them (the spec agent's `from = "spec"`, `maxIterations`, no
`task = "next"` or any other key of ours), run end to end through the real anthropic SDK against
the scripted Messages API. The seed's state transitions decide: an approval completes the task,
the `next-task` edge only sends the coder on to the next one, and no edge after the last approval
ends the run `completed`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_flow_sdk import (  # noqa: F401  (the `project` fixture is used by name)
    API_KEY,
    CRITERION_1,
    CRITERION_2,
    RIGHT,
    TIMES,
    Reply,
    call,
    cli,
    coder_documents_add,
    coder_fixes_add,
    end,
    project,
    review,
    reviewer_approves,
    session_starts,
    show,
    start,
    status,
    usage,
)

# Seed 000, "Edge Definitions with JSONata" and "Edge Condition Tests", in TOML, word for word.
SEED_WORKFLOW = """\
name = "speckit"
version = "1"

[[edges]]
id = "spec-to-coder"
from = "spec"
to = "coder"

[[edges]]
id = "coder-retry"
from = "coder"
to = "coder"
when = "coderOutput.selfValidation.passed = false"
{limit} = 3

[[edges]]
id = "coder-to-reviewer"
from = "coder"
to = "reviewer"
when = "coderOutput.selfValidation.passed = true"

[[edges]]
id = "reviewer-reject"
from = "reviewer"
to = "coder"
when = "reviewerOutput.approved = false"
{limit} = 2

[[edges]]
id = "next-task"
from = "reviewer"
to = "coder"
when = "reviewerOutput.approved = true and currentTaskIndex < $count(tasks) - 1"

[[tests]]
it = "coder-retry fires when self-validation fails"
when = "coderOutput.selfValidation.passed = false"
state = {{ coderOutput = {{ selfValidation = {{ passed = false, issues = ["error"] }} }} }}
expect = true

[[tests]]
it = "next-task fires when approved and more tasks"
when = "reviewerOutput.approved = true and currentTaskIndex < $count(tasks) - 1"
state = {{ reviewerOutput = {{ approved = true }}, currentTaskIndex = 0, tasks = [{{}}, {{}}, {{}}] }}
expect = true

[[tests]]
it = "workflow ends when all tasks complete"
when = "currentTaskIndex < $count(tasks) - 1"
state = {{ reviewerOutput = {{ approved = true }}, currentTaskIndex = 2, tasks = [{{}}, {{}}, {{}}] }}
expect = false
"""


def seed_file(repo: Path, limit: str = "maxIterations") -> Path:
    path = repo / ".specflux" / "workflows" / "speckit.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(SEED_WORKFLOW.format(limit=limit))
    return path


@pytest.mark.parametrize("limit", ["maxIterations", "max_iterations"])
def test_the_seeds_edges_verbatim_finish_the_queue_in_an_exact_number_of_requests(project, api, capsys, limit):
    seed_file(project, limit)
    attempt_1 = [Reply(calls=[call("write_file", path="src/calc.py", content=TIMES)], usage=usage(10, 5)),
                 Reply(calls=[end("Rewrote add()")], usage=usage(10, 5))]
    review_2 = [Reply(calls=[review(True, criteria=((CRITERION_2, True),))])]
    server = api(*attempt_1, *coder_fixes_add(), *reviewer_approves(), *coder_documents_add(), *review_2)

    code, out, err = start(capsys, project, "--workflow", "speckit")

    assert code == 0, out + err
    assert "run " in out and ": completed" in out
    # coder (tests fail), coder (fixed), reviewer (approves), coder on task 2, reviewer: 8 requests
    assert len(server.requests) == 8, f"{len(server.requests)} requests: the run went round"
    assert session_starts(server) == [0, 2, 4, 6, 7]
    state = status(capsys, project)
    assert state["status"] == "completed" and state["workflow"] == "speckit"
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    m = state["metrics"]
    assert (m["tasksCompleted"], m["tasksFailed"], m["totalAttempts"], m["totalReviews"]) == (2, 0, 3, 2)
    assert state["edgeIterations"]["next-task"] == {"1": 1}, "next-task fired once, after task 1"
    assert state["currentTaskIndex"] == 1 and state["openSteps"] == {}
    task1, task2 = show(capsys, project, "1"), show(capsys, project, "2")
    assert task1["status"] == task2["status"] == "complete"
    assert task2["chain_inputs"][0]["body"].startswith("add(a, b) in src/calc.py returns a + b"), "wired"
    assert (project / "src" / "calc.py").read_text() == RIGHT
    assert cli(capsys, project, "lint")[0] == 0
    narrative = cli(capsys, project, "flow", "log")[1]
    assert "next-task: task 1 accepted" in narrative and "task 2 is complete" in narrative


def test_a_rejection_past_the_seeds_limit_fails_the_task_and_never_loops(project, api, capsys):
    seed_file(project)
    rejected = [Reply(calls=[review(False, ("major", "add() needs a docstring"), criteria=((CRITERION_1, False),))])]
    # task 1: coder, reviewer rejects; coder, rejects; coder, rejects (reviewer-reject's 2 used up)
    server = api(*coder_fixes_add(), *rejected, *coder_fixes_add(), *rejected, *coder_fixes_add(), *rejected)

    code, out, err = start(capsys, project, "--workflow", "speckit")

    assert code == 1, out + err
    assert len(server.requests) == 9, "three coder sessions of 2 requests and three reviews, nothing more"
    state = status(capsys, project)
    assert state["status"] == "failed" and state["failureReason"] == "max_iterations"
    assert [t["status"] for t in state["tasks"]] == ["failed", "blocked"], "its dependent never starts"
    assert "reviewer-reject reached its max_iterations (2)" in state["tasks"][0]["reason"]
    assert show(capsys, project, "1")["status"] == "failed"
    assert show(capsys, project, "2")["status"] == "blocked"
    assert cli(capsys, project, "lint")[0] == 0


def test_the_seeds_condition_tests_are_checked_when_the_file_loads(project, capsys):
    path = seed_file(project)
    broken = SEED_WORKFLOW.format(limit="maxIterations").replace(
        'when = "currentTaskIndex < $count(tasks) - 1"\nstate', 'when = "currentTaskIndex <= $count(tasks) - 1"\nstate')
    path.write_text(broken)
    code, out, err = start(capsys, project, "--workflow", "speckit")
    assert code == 1 and out == ""
    line = broken.splitlines().index("expect = false") + 1
    assert (f"speckit.toml:{line}: test `workflow ends when all tasks complete` fails: "
            "`currentTaskIndex <= $count(tasks) - 1` is true on its state, expected false") in err
    assert not (project / ".specflux" / "runs").exists() or not any((project / ".specflux" / "runs").iterdir())


def test_a_test_naming_an_edge_checks_that_edges_condition(tmp_path):
    from specflux.flow.workflow.workflow_file import WorkflowError, parse_workflow

    text = SEED_WORKFLOW.format(limit="maxIterations") + (
        '\n[[tests]]\nit = "reject"\nedge = "reviewer-reject"\nstate = { reviewerOutput = { approved = true } }\n'
        'expect = true\n')
    with pytest.raises(WorkflowError) as raised:
        parse_workflow(text, "wf.toml")
    assert "test `reject` fails: `reviewerOutput.approved = false` is false on its state, expected true" in str(raised.value)
    ok = parse_workflow(SEED_WORKFLOW.format(limit="maxIterations"), "wf.toml")
    assert [e.from_ for e in ok.edges] == ["planner", "coder", "coder", "reviewer", "reviewer"], "spec is the planner"
    assert [e.max_iterations for e in ok.edges] == [None, 3, None, 2, None]
