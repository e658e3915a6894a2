"""Runs that cannot be fooled by their own agents (issue 16): misbehaving agent CLIs in real git
repositories (tests/fixtures/fake_flow_agent.py with a shell command run first), each doing what
real agents do now and then, and the run noticing, putting things back and saying so."""

from __future__ import annotations

import json

from conftest import git
from helpers import fake_agent_plan as plan
from helpers import specflux_process as specflux
from test_flow import DOCS, FIX, RIGHT, project, start, status  # noqa: F401


def show(repo, task_id: str) -> dict:
    return json.loads(specflux(repo, "show", task_id, "--json").stdout)


def narrative(repo) -> str:
    return specflux(repo, "flow", "log").stdout


def test_a_coder_that_resets_the_branch_to_before_earlier_work_fails_and_the_work_is_put_back(project, tmp_path):
    base = git(project, "rev-parse", "HEAD").strip()
    env = plan(tmp_path, coder__1=[FIX], coder__2=[{**DOCS, "sh": f"git reset -q --hard {base}"}, DOCS])
    done = start(project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(project)
    assert state["status"] == "completed" and state["taskAttempts"] == {"1": 1, "2": 2}
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    # Task 1's work is on the branch, complete, as the run says.
    assert (project / "src" / "calc.py").read_text() == RIGHT
    assert show(project, "1")["status"] == "complete"
    assert git(project, "merge-base", "--is-ancestor", base, "HEAD") == ""
    told = narrative(project)
    assert "refused: the agent moved main from" in told and "which does not hold it" in told, told
    run_id = state["runId"]
    assert git(project, "branch", "--list", f"specflux/rejected/{run_id}/*").strip(), "the agent's commits kept"
    assert specflux(project, "lint").returncode == 0


def test_a_coder_that_checks_out_another_branch_fails_and_the_run_stays_on_its_own(project, tmp_path):
    env = plan(tmp_path, coder__1=[{**FIX, "sh": "git checkout -q -b elsewhere"}, FIX], coder__2=[DOCS])
    done = start(project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(project)
    assert state["status"] == "completed" and state["taskAttempts"] == {"1": 2, "2": 1}
    assert git(project, "symbolic-ref", "--short", "HEAD").strip() == "main"
    subjects = git(project, "log", "--format=%s", "main").splitlines()
    assert any(s.startswith("task 1: complete") for s in subjects), "later run commits are on main"
    assert any(s.startswith("task 2: complete") for s in subjects)
    assert (project / "src" / "calc.py").read_text() == RIGHT
    assert "refused: the agent checked out elsewhere" in narrative(project)
