"""One run per task at a time (flow/holds.py): a second `flow start` over a task a live run holds is
refused naming that run, `--all` takes only the free tasks, racing starts split the tasks between
them, and a killed run's holds are stale: `flow resume` takes them back."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from conftest import git
from helpers import fake_agent_plan as plan
from helpers import specflux_process as specflux
from test_flow import AGENT, DOCS, FIX, RIGHT, _background, _wait_for, project, start, status  # noqa: F401

from specflux.store.workspace import Workspace


def count(tmp_path: Path, role: str, task: str) -> int:
    counter = tmp_path / "agent-state" / f"{role}-{task}.count"
    return int(counter.read_text()) if counter.exists() else 0


def new_task(repo: Path, title: str) -> str:
    done = specflux(repo, "new", title, "--ac", f"{title} done")
    assert done.returncode == 0, done.stderr
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", title)
    return done.stdout.strip()


def test_a_second_run_over_a_held_task_is_refused_naming_the_holder(project, tmp_path):
    third = new_task(project, "Independent work")
    env = plan(tmp_path, coder__1=[{**FIX, "sleep": 600}], coder__2=[DOCS], coder=[FIX])
    first = _background(project, env, "flow", "start", "1")
    try:
        _wait_for(lambda: count(tmp_path, "coder", "1") == 1)
        holder = status(project)["runId"]
        refused = start(project, env, "1")
        assert refused.returncode == 1  # the data (a run holding it) says no
        assert f"held by another run: task 1 (run {holder})" in refused.stderr
        # --all: task 1 is held and task 2 waits on it; task 3 is free and is the only one taken.
        done = start(project, env, "--all")
        assert done.returncode == 0, done.stdout + done.stderr
        second = status(project)
        assert second["runId"] != holder and [t["id"] for t in second["tasks"]] == [third]
        assert count(tmp_path, "coder", "1") == 1 and count(tmp_path, "coder", "2") == 0
    finally:
        specflux(project, "flow", "stop", holder, env=env)
        first.wait(timeout=60)


def test_racing_starts_build_each_task_once(project, tmp_path):
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    for round_ in range(4):
        ids = [new_task(project, f"Round {round_} part {i}") for i in range(3)]
        env = plan(tmp_path, **{f"coder__{t}": [{"write": {"src/calc.py": RIGHT, f"part-{t}.txt": "done\n"},
                                                 "check": True, "chain": "done", "sleep": 0.5}] for t in ids})
        procs = [subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(project), "flow", "start",
                                   *ids, "--agent", "command", "--cmd", cmd],
                                  env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        codes = sorted(p.returncode for p in procs)
        assert codes == [0, 1], outs
        refused = next(err for (out, err), p in zip(outs, procs) if p.returncode == 1)
        assert "held by another run: task" in refused or "every task is complete" in refused, refused
        for task_id in ids:
            assert count(tmp_path, "coder", task_id) == 1, f"task {task_id} built {count(tmp_path, 'coder', task_id)} times"
            assert json.loads(specflux(project, "show", task_id, "--json").stdout)["status"] == "complete"
        subjects = git(project, "log", "--format=%s").splitlines()
        for task_id in ids:
            assert subjects.count(f"task {task_id}: complete") <= 1


def test_a_killed_runs_holds_are_stale_and_resume_takes_them_back(project, tmp_path):
    env = plan(tmp_path, coder__1=[{**FIX, "sleep": 600}, FIX], coder__2=[DOCS])
    proc = _background(project, env, "flow", "start")
    _wait_for(lambda: count(tmp_path, "coder", "1") == 1)
    run_id = status(project)["runId"]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    hold = json.loads((Workspace(project).private_dir / "holds" / "task-1.json").read_text())
    assert hold["run"] == run_id, "the killed run's hold is still there, and stale"
    done = specflux(project, "flow", "resume", run_id, env=env, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert status(project)["status"] == "completed"
    assert not list((Workspace(project).private_dir / "holds").glob("*.json")), "an ended run holds nothing"


def test_a_start_racing_a_run_that_took_the_task_meanwhile_names_that_run(project, tmp_path, capsys, monkeypatch):
    """Two `flow start`s of one task at the same moment: the second read the holds before the first
    took them, and by the time it asked git whether the task files are committed, the first run's
    session was at work in its task's file (what `test_racing_starts_build_each_task_once` met, once,
    as "changes not committed"). The change is that run's, not the user's: the second start reads
    the holds again and is refused as held by that run, naming it."""
    from specflux.cli.main import main
    from specflux.flow.record.holds import Holds

    env = plan(tmp_path, coder__1=[{**FIX, "sleep": 600}])
    first = _background(project, env, "flow", "start", "1")
    try:
        _wait_for(lambda: count(tmp_path, "coder", "1") == 1)
        holder = status(project)["runId"]
        with open(project / ".specflux" / "task-states" / "task-1-state.md", "a", encoding="utf-8") as f:
            f.write("\n")  # its session at work in the task's file
        reads = []
        real_held = Holds.held

        def held(self, task_ids, other_than=None):  # the first read: before the first run took its task
            reads.append(1)
            return {} if len(reads) == 1 else real_held(self, task_ids, other_than)

        monkeypatch.setattr(Holds, "held", held)
        capsys.readouterr()
        code = main(["--root", str(project), "flow", "start", "1", "--agent", "command", "--cmd", "true"])
        err = capsys.readouterr().err
        assert code == 1, err
        assert f"held by another run: task 1 (run {holder})" in err and "not committed" not in err, err
    finally:
        monkeypatch.undo()
        specflux(project, "flow", "stop", holder, env=env)
        first.wait(timeout=60)
