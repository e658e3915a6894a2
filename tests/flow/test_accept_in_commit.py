"""A one-lane run accepts a task in its reviewer's own commit (flow/early_acceptance.py): the
review's entry, the task's completion and its dependents' chain inputs in one commit, where there
were two. And `kill -9` at every moment around that commit (real SIGKILLs at named points,
`SPECFLUX_CRASH_AT`), then `flow resume`: the run ends as it would have, each task completed once,
reviewed once unless the kill cut its review short, nothing left uncommitted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import git
from helpers import completions
from helpers import fake_agent_plan as plan
from helpers import specflux_process as specflux
from test_flow_journal import agent_env, completed, project  # noqa: F401

from specflux.flow.decisions import Annotate, Decision
from specflux.flow.early_acceptance import InCommit

TASK1, TASK2 = (f".specflux/task-states/task-{n}-state.md" for n in (1, 2))


def trailers(repo: Path, sha: str) -> dict[str, str]:
    out = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", sha)
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def start(repo: Path, env: dict, crash_at: str = "") -> subprocess.CompletedProcess:
    import shlex
    import sys

    from test_flow_journal import AGENT

    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    return specflux(repo, "flow", "start", "--agent", "command", "--cmd", cmd,
                    env={**env, "SPECFLUX_CRASH_AT": crash_at}, timeout=180)


def events(repo: Path) -> list[dict]:
    [log] = list((repo / ".specflux" / "runs").glob("*/events.jsonl"))
    return [json.loads(line) for line in log.read_text().splitlines()]


def reviews(repo: Path, task: str) -> int:
    """Reviewer sessions of `task` that ended with a verdict (a crashed one aside)."""
    return sum(1 for e in events(repo) if e["type"] == "step_finished" and e["kind"] == "reviewer"
               and e.get("taskId") == task)


def test_the_reviewer_commit_that_accepts_a_task_holds_its_completion_and_its_dependents(project, tmp_path):
    env = agent_env(tmp_path)
    done = start(project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    completed(project)
    log = git(project, "log", "--format=%H %s").splitlines()
    assert not [line for line in log if " task 1: complete" in line], "no commit of its own for the acceptance"
    [accepting] = [line.split()[0] for line in log if "task 1: session 2" in line]
    t = trailers(project, accepting)
    assert (t["Specflux-Task"], t["Specflux-Role"], t["Specflux-Status"]) == ("1", "reviewer", "complete"), t
    files = git(project, "show", "--name-only", "--format=", accepting).split()
    assert files == [TASK1, TASK2], files  # the review and the completion; the chain output wired into task 2
    text = git(project, "show", f"{accepting}:{TASK1}")
    assert '"status": "complete"' in text and "APPLES.md written" in text and "Review: approved" in text
    assert "APPLES.md written" in git(project, "show", f"{accepting}:{TASK2}")
    assert completions(project, "1") == completions(project, "2") == 1
    # the run's record: the step carries the acceptance, the decision the engine made on it once
    finished = [e for e in events(project) if e["type"] == "step_finished" and e["kind"] == "reviewer"]
    assert [e.get("accepted") for e in finished] == ["1", "2"]
    assert finished[0]["wired"] == ["2"] and finished[1]["wired"] == []
    said = done.stderr
    assert said.index("decision: next-task: task 1 accepted") < said.index("task 1 complete; wired into task 2")


# the moments around the reviewer's commit that accepts task 1 (s8; task 2's, the run's last: s18),
# and how many commits then say task 1 is complete
POINTS = {
    "atomic:s8-1.early.json": 2,  # the completion written, its note being written: no commit yet
    "atomic:s8-1.session.json": 1,  # the commit made, the step's summary not written
    "atomic:s18-1.session.json": 1,  # (the last task's: the run's end follows)
    "event:step_finished:reviewer": 1,  # the summary written, the step's result not recorded
    "recorded:step_finished:reviewer": 1,  # recorded, its decision not yet
    "event:decision:reviewer": 1,  # (the same moment, named by the decision)
    "event:task_status:complete": 1,  # the decision recorded, its effect on the task not yet
}


@pytest.mark.parametrize("point", list(POINTS))
def test_kill_9_around_the_accepting_commit_then_resume(project, tmp_path, point):
    env = agent_env(tmp_path)
    done = start(project, env, point)
    assert done.returncode == -9, f"the process did not die at {point}: {done.returncode}\n{done.stderr}"
    again = specflux(project, "flow", "resume", env={**env, "SPECFLUX_CRASH_AT": ""}, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    completed(project)
    finished = [e for e in events(project) if e["type"] == "step_finished"]
    assert reviews(project, "1") == reviews(project, "2") == 1, finished  # no review taken twice
    assert [e.get("accepted") for e in finished if e["kind"] == "reviewer"] == ["1", "2"], finished
    assert completions(project, "2") == 1
    # a review the kill cut short before its commit is committed as a crashed attempt, with the
    # completion it had written (its status line says so), and the step runs again; every other
    # way, task 1 is completed by one commit
    assert completions(project, "1") == POINTS[point]
    sessions = git(project, "log", "--format=%s", "--", TASK1).splitlines()
    crashed = [s for s in sessions if "engine stopped during the session" in s]
    assert len(crashed) == (1 if POINTS[point] == 2 else 0), sessions
    requested = [e["stepId"] for e in events(project) if e["type"] == "step_requested"]
    assert len(requested) == len(set(requested)), requested


def test_a_rejecting_review_killed_after_its_commit_resumes_with_its_verdict(project, tmp_path):
    """Killed after the reviewer's commit, before the step's summary: the verdict was written down
    before the commit, rejection too, so the resumed run sends the coder back with the reviewer's
    issues (not "the review gave no verdict") and does not ask for that review again."""
    env = plan(tmp_path, coder__1=[{"write": {"APPLES.md": "apples\n"}, "check": True, "chain": "APPLES.md written"}],
               coder__2=[{"write": {"PEARS.md": "pears\n"}, "check": True, "chain": "PEARS.md written"}],
               reviewer__1=[{"approved": False, "issues": [{"severity": "major", "description": "APPLES.md should say how many"}]},
                            {"approved": True}])
    done = start(project, env, "atomic:s8-1.session.json")
    assert done.returncode == -9, done.stderr
    again = specflux(project, "flow", "resume", env={**env, "SPECFLUX_CRASH_AT": ""}, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    completed(project)
    retry = (tmp_path / "agent-state" / "coder-1-2.txt").read_text()
    why = retry[retry.index("## Why "):]
    assert why.startswith("## Why the last attempt was sent back") and "The reviewer requested changes" in why, why
    assert "APPLES.md should say how many" in why, why
    assert (tmp_path / "agent-state" / "reviewer-1.count").read_text() == "2", "the rejecting review ran once"


def test_a_decision_the_engine_refused_since_is_not_taken_over(tmp_path):
    """The decision made before the commit is the step's only while its result stands: another
    try, or a result the engine changed since (its branch rewritten: a refused verdict), is
    decided afresh."""
    made = InCommit.__new__(InCommit)
    decision = Decision("d1", actions=(Annotate("accepted:1", True),))
    made._made = ("s8#1", {"taskId": "1", "approved": True}, 5, 7, decision)
    assert made.take("s8#1", {"taskId": "1", "approved": False, "refused": "x"}) is None
    made._made = ("s8#1", {"taskId": "1", "approved": True}, 5, 7, decision)
    assert made.take("s8#2", {"taskId": "1", "approved": True}) is None
    made._made = ("s8#1", {"taskId": "1", "approved": True}, 5, 7, decision)
    assert made.take("s8#1", {"taskId": "1", "approved": True, "notices": ["n"]}) == (5, 7, decision)
    assert made.take("s8#1", {"taskId": "1", "approved": True}) is None  # made once


def test_a_run_created_before_this_keeps_the_acceptance_commit(project, tmp_path, monkeypatch, capsys):
    """A run whose `run_created` does not say `acceptInCommit` (made by an earlier specflux, then
    resumed or replayed by this one) takes the steps it took: the acceptance's own commit."""
    import shlex
    import sys

    from helpers import run
    from test_flow_journal import AGENT

    from specflux.flow.record.run import Run

    made = Run.create.__func__

    def as_before(cls, ws, created, run_id=None):
        return made(cls, ws, {k: v for k, v in created.items() if k != "acceptInCommit"}, run_id)

    monkeypatch.setattr(Run, "create", classmethod(as_before))
    for key, value in agent_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    code, out, err = run(capsys, project, "flow", "start", "--agent", "command", "--cmd", cmd)
    assert code == 0, out + err
    completed(project)
    subjects = git(project, "log", "--format=%s").splitlines()
    assert [s for s in subjects if s.startswith("task 1: complete")], subjects
    assert completions(project, "1") == completions(project, "2") == 1
    assert not [e for e in events(project) if e["type"] == "step_finished" and e.get("accepted")]
