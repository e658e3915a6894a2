"""No run runs away: the limits every run has when nobody set one (flow/limits.py), each ending the
run with its own `failureReason` and the numbers, and the task files left as they were.

A fake agent CLI (tests/fixtures/fake_flow_agent.py) plays every role in a real git repository with
real pytest as validation, under a workflow written the way people forget limits: no
`max_iterations` anywhere.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest
from conftest import git
from helpers import fake_agent_plan as plan
from helpers import specflux_process as specflux
from patience import patience
from test_flow import DOCS, FIX, WRONG, _background, _wait_for, project, start, status  # noqa: F401

NO_LIMITS = """\
name = "nolimits"

[[edges]]
id = "retry"
from = "coder"
to = "coder"
when = "coderOutput.selfValidation.passed = false"

[[edges]]
id = "review"
from = "coder"
to = "reviewer"
when = "coderOutput.selfValidation.passed = true"

[[edges]]
id = "reject"
from = "reviewer"
to = "coder"
when = "reviewerOutput.approved = false"

[[edges]]
id = "next"
from = "reviewer"
to = "coder"
when = "reviewerOutput.approved = true and currentTaskIndex < $count(tasks) - 1"
"""


def no_limits(repo: Path) -> None:
    folder = repo / ".specflux" / "workflows"
    folder.mkdir(exist_ok=True)
    (folder / "nolimits.toml").write_text(NO_LIMITS)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "workflow")


def attempts(tmp_path: Path, role: str = "coder", task: str = "1") -> int:
    counter = tmp_path / "agent-state" / f"{role}-{task}.count"
    return int(counter.read_text()) if counter.exists() else 0


def file_status(repo: Path, task: str) -> str:
    return json.loads(specflux(repo, "show", task, "--json").stdout)["status"]


# ------------------------------------------------------------------ defaults a careful user would set


def test_every_run_gets_a_finite_cap_a_token_budget_and_a_step_limit_per_task(project, tmp_path):
    env = plan(tmp_path, coder__1=[FIX], coder__2=[DOCS])
    assert start(project, env).returncode == 0
    state = status(project)
    # The built-in queue: coder-retry 3, coder-to-reviewer (no limit: 3), reviewer-reject 2,
    # next-task (no limit: 3), plus the first step and 2 agent-error retries: 14 steps per task.
    assert state["taskStepLimit"] == 14
    assert state["maxIterations"] == 2 * 14 + 1
    assert state["tokenBudget"] == 20_000_000 and state["stallRounds"] == 3
    assert state["openSteps"] == {}, "a finished run has nothing open"
    assert state["taskMetrics"]["1"]["steps"] == 2 and state["taskMetrics"]["2"]["steps"] == 2
    shown = specflux(project, "flow", "status")
    assert "of at most 29" in shown.stdout, shown.stdout


def test_the_defaults_are_overridden_by_config_and_by_flags(project, tmp_path):
    with open(project / ".specflux" / "config.toml", "a") as f:
        f.write("\n[flow]\nmax_iterations = 7\ntoken_budget = 1234\nstall_rounds = 0\n")
    git(project, "commit", "-qam", "limits")
    env = plan(tmp_path, coder__1=[FIX], coder__2=[DOCS])
    assert start(project, env, "1").returncode == 0
    state = status(project)
    assert (state["maxIterations"], state["tokenBudget"], state["stallRounds"]) == (7, 1234, None)
    assert start(project, env, "2", "--max-iterations", "5", "--token-budget", "99").returncode == 0
    state = status(project)
    assert (state["maxIterations"], state["tokenBudget"]) == (5, 99)
    refused = start(project, env, "2", "--token-budget", "0")
    assert refused.returncode == 2 and "--token-budget must be at least 1" in refused.stderr


# ------------------------------------------------------------------ a coder that never gets it right


@pytest.mark.parametrize("lanes", ["1", "2"])
def test_a_coder_that_changes_nothing_under_a_workflow_without_limits_ends_stalled(project, tmp_path, lanes):
    no_limits(project)
    env = plan(tmp_path, coder__1=[{"write": {"src/calc.py": WRONG}}])
    began = time.monotonic()
    done = start(project, env, "--workflow", "nolimits", "--parallel", lanes)
    took = time.monotonic() - began
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(project)
    assert state["status"] == "failed" and state["failureReason"] == "stalled"
    assert state["failureDetail"] == ("task 1 went 4 coder rounds in a row with no change in the repository's "
                                      "tree, the tests' result or the reviewer's issues (stall_rounds = 3)")
    assert attempts(tmp_path) == 4, "four identical rounds, then the run ends"
    assert took < patience(60), f"{took:.0f}s"
    narrative = specflux(project, "flow", "log").stdout
    assert "run failed (stalled: task 1 went 4 coder rounds" in narrative
    # No task is left in progress: task 1 is back to pending (its sessions moved it on), lint is clean.
    assert file_status(project, "1") == "pending" and file_status(project, "2") == "pending"
    assert specflux(project, "lint").returncode == 0


@pytest.mark.parametrize("lanes", ["1", "2"])
def test_a_coder_that_keeps_changing_the_wrong_thing_fails_its_task_at_the_step_limit(project, tmp_path, lanes):
    no_limits(project)
    wrong = [{"write": {"src/calc.py": f"def add(a, b):\n    return a - b - {i}\n"}} for i in range(40)]
    env = plan(tmp_path, coder__1=wrong)
    done = start(project, env, "--workflow", "nolimits", "--parallel", lanes)
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(project)
    limit = 1 + 2 + 4 * 3 + (7 if lanes == "2" else 0)  # four edges without limits, 3 each
    assert state["taskStepLimit"] == limit
    assert state["failureReason"] == "max_iterations"
    assert [t["status"] for t in state["tasks"]] == ["failed", "blocked"]
    assert attempts(tmp_path) == limit, "every step the task may take, and not one more"
    assert f"task 1 took {limit} steps, the most its workflow allows one task" in state["tasks"][0]["reason"]
    assert file_status(project, "1") == "failed" and file_status(project, "2") == "blocked"
    assert specflux(project, "lint").returncode == 0


def test_the_run_cap_ends_the_run_with_its_numbers_and_puts_the_task_back(project, tmp_path):
    env = plan(tmp_path, coder__1=[{"write": {"src/calc.py": WRONG}}])
    done = start(project, env, "--max-iterations", "2")
    assert done.returncode == 1
    state = status(project)
    assert state["failureReason"] == "max_iterations"
    assert state["failureDetail"] == "the run took 2 steps, its cap (maxIterations) is 2"
    assert ": failed (max_iterations: the run took 2 steps, its cap (maxIterations) is 2)" in done.stdout
    assert file_status(project, "1") == "pending", "the coder's sessions moved it to in_progress; the end put it back"
    assert specflux(project, "lint").returncode == 0
    subjects = git(project, "log", "--format=%s", "-3")
    assert "task 1: pending" in subjects


def test_the_token_budget_names_its_numbers(project, tmp_path):
    # The fake agent prints no usage: a run with a budget of 1 token still takes its first step.
    env = plan(tmp_path, coder__1=[{"write": {"src/calc.py": WRONG}}])
    cmd = f"{sys.executable} -c \"import json;print(json.dumps({{'type':'result','usage':{{'input_tokens':700,'output_tokens':10}}}}))\""
    done = specflux(project, "flow", "start", "1", "--agent", "command", "--cmd", cmd, "--token-budget", "1000", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(project)
    assert state["failureReason"] == "token_budget"
    assert state["failureDetail"].startswith("the run used 1,420 tokens of its budget of 1,000; over the budget by 420 tokens")


def test_a_coder_session_that_times_out_is_a_failed_attempt_retried_under_the_limits(project, tmp_path):
    config = project / ".specflux" / "config.toml"
    # long enough for every other session to start its Python on a loaded machine (8 s on a quiet one)
    timeout = round(patience(8))
    config.write_text(config.read_text().replace("[agent]\n", f"[agent]\nsession_timeout_s = {timeout}\n", 1))
    git(project, "commit", "-qam", "timeout")
    env = plan(tmp_path, coder__1=[{"sleep": 600}, FIX], coder__2=[DOCS])
    done = start(project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(project)
    assert state["status"] == "completed" and state["taskAttempts"] == {"1": 2, "2": 1}
    events = [json.loads(line) for line in
              (project / ".specflux" / "runs" / state["runId"] / "events.jsonl").read_text().splitlines()]
    first = next(e for e in events if e["type"] == "step_finished" and e["kind"] == "coder")
    assert first["status"] == "OK" and first["output"]["selfValidation"]["passed"] is False
    assert f"timed out after {timeout}s" in first["output"]["selfValidation"]["issues"][0]
    assert "Why the last attempt failed" in (tmp_path / "agent-state" / "coder-1-2.txt").read_text()


def test_flow_stop_leaves_no_task_in_progress(project, tmp_path):
    env = plan(tmp_path, coder__1=[{"sleep": 600}])
    proc = _background(project, env, "flow", "start")
    try:
        _wait_for(lambda: attempts(tmp_path) == 1)
        _wait_for(lambda: file_status(project, "1") == "in_progress")
        assert specflux(project, "flow", "stop", status(project)["runId"], env=env).returncode == 0
        proc.wait(timeout=60)
    finally:
        proc.kill()
    state = status(project)
    assert state["status"] == "user_exit"
    assert file_status(project, "1") == "pending"
    assert specflux(project, "lint").returncode == 0


def test_ctrl_c_pauses_the_run_and_exits_130(project, tmp_path):
    env = plan(tmp_path, coder__1=[{"sleep": 600}, FIX], coder__2=[DOCS])
    proc = _background(project, env, "flow", "start")
    try:
        _wait_for(lambda: attempts(tmp_path) == 1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    assert "flow resume" in out
    state = status(project)
    assert state["status"] == "paused" and state["pausedFor"] == "user"
    done = specflux(project, "flow", "resume", env=env, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert status(project)["status"] == "completed"
