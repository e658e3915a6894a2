"""A run re-checks what it holds (docs/runs.md): a paused run resumed after another run did its work
reconciles with the task files first (a task completed since is not worked again, another run's
result never overwritten), and a run whose tasks another run took while it drove them stops before
its next step, saying which run took which task and what to do."""

from __future__ import annotations

import json
import shlex
import signal
from pathlib import Path

import pytest
from conftest import git
import helpers
from helpers import fake_agent_plan as plan
from helpers import specflux_process as specflux
from test_flow import DOCS, FIX, _background, _wait_for, project, start, status  # noqa: F401


def count(tmp_path: Path, role: str, task: str) -> int:
    counter = tmp_path / "agent-state" / f"{role}-{task}.count"
    return int(counter.read_text()) if counter.exists() else 0


def run_state(repo: Path, run_id: str) -> dict:
    done = specflux(repo, "flow", "status", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def file_status(repo: Path, task: str) -> str:
    return json.loads(specflux(repo, "show", task, "--json").stdout)["status"]


def completions(repo: Path, task: str) -> int:
    return helpers.completions(repo, task)


def ctrl_c_during_the_first_coder(repo: Path, tmp_path: Path, env: dict, *extra: str) -> str:
    """Start run A, press Ctrl-C while its first coder works; A's id (A is paused)."""
    proc = _background(repo, env, "flow", "start", *extra)
    _wait_for(lambda: count(tmp_path, "coder", "1") == 1)
    run_a = proc.stdout.readline().strip()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert run_state(repo, run_a)["status"] == "paused"
    return run_a


def test_resume_after_another_run_completed_the_tasks_works_none_of_them_again(project, tmp_path):
    env = plan(tmp_path, coder__1=[{**FIX, "sleep": 600}, FIX], coder__2=[DOCS])
    run_a = ctrl_c_during_the_first_coder(project, tmp_path, env)
    done = start(project, env, "--all")  # run B: A holds nothing while paused
    assert done.returncode == 0, done.stdout + done.stderr
    run_b = done.stdout.splitlines()[0].strip()
    assert file_status(project, "1") == file_status(project, "2") == "complete"
    before = (count(tmp_path, "coder", "1"), count(tmp_path, "coder", "2"), count(tmp_path, "reviewer", "1"))
    resumed = specflux(project, "flow", "resume", run_a, env=env, timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (count(tmp_path, "coder", "1"), count(tmp_path, "coder", "2"), count(tmp_path, "reviewer", "1")) == before
    assert file_status(project, "1") == file_status(project, "2") == "complete", "B's result overwritten"
    assert completions(project, "1") == completions(project, "2") == 1, "a task completed twice"
    assert f"task 1 was completed by run {run_b} since run {run_a} last drove it: not worked again" in resumed.stderr
    state = run_state(project, run_a)
    assert state["status"] == "completed" and state["metrics"]["tasksCompleted"] == 0
    assert [t.get("completedBy") for t in state["tasks"]] == [f"run {run_b}", f"run {run_b}"]
    narrative = specflux(project, "flow", "log", run_a).stdout
    assert f"task 2 was completed by run {run_b} since this run last drove it" in narrative


def test_resume_after_a_person_completed_the_first_task_goes_on_with_the_second(project, tmp_path):
    env = plan(tmp_path, coder__1=[{**FIX, "sleep": 600}], coder__2=[DOCS])
    run_a = ctrl_c_during_the_first_coder(project, tmp_path, env)
    (project / "src" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    done = specflux(project, "complete", "1", "--summary", "fixed by hand")
    assert done.returncode == 0, done.stderr
    resumed = specflux(project, "flow", "resume", run_a, env=env, timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "task 1 was completed by a person (commit " in resumed.stderr
    assert count(tmp_path, "coder", "1") == 1 and count(tmp_path, "coder", "2") == 1
    assert completions(project, "1") == 1
    assert file_status(project, "2") == "complete"
    assert run_state(project, run_a)["status"] == "completed"


def test_parallel_resume_after_another_run_merged_the_tasks_merges_nothing_twice(git_repo, tmp_path, capsys):
    from helpers import run

    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "Apples", "--ac", "APPLES.md exists")[0] == 0
    assert run(capsys, git_repo, "new", "Pears", "--ac", "PEARS.md exists")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    apples = {"write": {"APPLES.md": "apples\n"}, "check": True, "chain": "apples"}
    pears = {"write": {"PEARS.md": "pears\n"}, "check": True, "chain": "pears"}
    env = plan(tmp_path, coder__1=[{**apples, "sleep": 600}, apples], coder__2=[{**pears, "sleep": 600}, pears])
    proc = _background(git_repo, env, "flow", "start", "--parallel", "2")
    _wait_for(lambda: count(tmp_path, "coder", "1") == 1 and count(tmp_path, "coder", "2") == 1)
    run_a = proc.stdout.readline().strip()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    done = start(git_repo, env, "--all", "--parallel", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    resumed = specflux(git_repo, "flow", "resume", run_a, env=env, timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    merges = git(git_repo, "log", "--merges", "--format=%s").splitlines()
    assert sorted(m.split(":")[0] for m in merges) == ["Merge task 1", "Merge task 2"], merges
    assert count(tmp_path, "coder", "1") == count(tmp_path, "coder", "2") == 2
    assert completions(git_repo, "1") == completions(git_repo, "2") == 1
    assert run_state(git_repo, run_a)["status"] == "completed"
    assert not [b for b in git(git_repo, "branch", "--list", "specflux/*").split()
                if b.startswith("specflux/") and not b.startswith("specflux/stopped/")]


def test_a_run_whose_task_another_run_took_stops_before_its_next_step(project, tmp_path):
    """Run A (tasks 1 and 3) has its holds given up behind its back (as a coder that deletes them,
    or a person, does); run B takes task 3; A stops before its next step, naming B and what to do,
    and `flow resume` after B ended does task 1 and leaves B's task 3 alone."""
    from specflux.flow.record.holds import Holds
    from specflux.store.workspace import Workspace

    third, env, go_a, go_b = two_runs(project, tmp_path)
    a = _background(project, env, "flow", "start", "1", third)
    _wait_for(lambda: count(tmp_path, "coder", "1") == 1)
    run_a = a.stdout.readline().strip()
    Holds(Workspace.find(explicit=str(project))).release(run_a)
    b = _background(project, env, "flow", "start", third)
    _wait_for(lambda: count(tmp_path, "coder", third) == 1)  # B's coder works on the task now
    run_b = b.stdout.readline().strip()
    go_a.touch()
    out_a, err_a = a.communicate(timeout=120)
    state = run_state(project, run_a)
    assert state["status"] == "paused", out_a + err_a
    assert state["pausedFor"].startswith(f"holds: task {third} was taken by run {run_b}"), state["pausedFor"]
    last = out_a.strip().splitlines()[-1]
    assert f"task {third} was taken by run {run_b}" in last and f"specflux flow resume {run_a}" in last, out_a
    assert f"task {third} was taken by run {run_b}" in specflux(project, "flow", "log", run_a).stdout
    assert count(tmp_path, "reviewer", "1") == 0, "A went on after it lost its holds"
    refused = specflux(project, "flow", "resume", run_a, env=env)
    assert refused.returncode != 0 and f"task {third} (run {run_b})" in refused.stderr
    go_b.touch()
    out_b, err_b = b.communicate(timeout=180)
    assert b.returncode == 0, out_b + err_b
    resumed_after_b(project, tmp_path, env, run_a, third, 1)


def test_lanes_whose_holds_are_released_stop_and_resume_after_another_run(project, tmp_path):
    from specflux.flow.record.holds import Holds
    from specflux.store.workspace import Workspace

    third, env, go_a, go_b = two_runs(project, tmp_path)
    a = _background(project, env, "flow", "start", "1", third, "--parallel", "2")
    _wait_for(lambda: count(tmp_path, "coder", "1") == 1 and count(tmp_path, "coder", third) == 1)
    run_a = a.stdout.readline().strip()
    Holds(Workspace.find(explicit=str(project))).release(run_a)
    out_a, err_a = a.communicate(timeout=120)  # its lanes stopped: it pauses without waiting for its agents
    state = run_state(project, run_a)
    assert state["status"] == "paused", out_a + err_a
    assert state["pausedFor"].startswith(f"holds: tasks 1, {third} were released (the holds are gone)"), state
    assert f"specflux flow resume {run_a}" in out_a.strip().splitlines()[-1]
    go_a.touch()
    go_b.touch()
    done = start(project, env, third)  # run B does task 3 while A is paused
    assert done.returncode == 0, done.stdout + done.stderr
    resumed_after_b(project, tmp_path, env, run_a, third, 2)


def two_runs(project: Path, tmp_path: Path):
    from test_flow_holds import new_task

    third = new_task(project, "Independent work")
    go_a, go_b = tmp_path / "go-a", tmp_path / "go-b"
    wait = "while [ ! -e {0} ]; do sleep 0.05; done"
    own = {"write": {"OWN.md": "own\n", "src/calc.py": FIX["write"]["src/calc.py"]}, "check": True,
           "chain": "OWN.md"}  # (the project's tests pass only with add fixed)
    env = plan(tmp_path, coder__1=[{**FIX, "sh": wait.format(shlex.quote(str(go_a)))}, FIX],
               **{f"coder__{third}": [{**own, "sh": wait.format(shlex.quote(str(go_b)))}]})
    return third, env, go_a, go_b


def resumed_after_b(project: Path, tmp_path: Path, env: dict, run_a: str, third: str, coders_of_third: int) -> None:
    """`flow resume A` once B completed task 3: task 1 done by A, task 3 left as B made it."""
    resumed = specflux(project, "flow", "resume", run_a, env=env, timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert count(tmp_path, "coder", third) == coders_of_third, "B's task worked again"
    assert completions(project, "1") == completions(project, third) == 1
    assert file_status(project, "1") == file_status(project, third) == "complete"
    state = run_state(project, run_a)
    assert state["status"] == "completed" and state["metrics"]["tasksCompleted"] == 1
