"""The first hour with workflow runs (issue 24): a mistake at `flow start` is said before a run
exists, and an ordinary accident (a closed pipe, a closed terminal, a full disk) ends the run
paused, saying so, never `running` with no process; the next `flow start` or `flow resume` goes on
from where it was, the work already committed counting as work (no "no change" trap). Everything
through `python -m specflux.cli` as a process, in a fresh git repository, with a real agent CLI (a
small script) and real signals."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git
from helpers import ROOT, specflux_process

AGENT = '''\
import json, os, pathlib, re, subprocess, sys, time
role, task = os.environ["SPECFLUX_ROLE"], os.environ["SPECFLUX_TASK_ID"]
path = pathlib.Path(os.environ["SPECFLUX_TASK_FILE"])
text = path.read_text()
if role == "reviewer":
    boxes = re.findall(r"^- \\[[ xX]\\] ", text, re.M)
    review = {"approved": True, "issues": [],
              "criteria_results": [{"criterion": str(n), "met": True} for n in range(1, len(boxes) + 1)]}
    subprocess.run([sys.executable, "-m", "specflux.cli", "submit-review", "--json", "-"],
                   input=json.dumps(review), text=True, check=True)
    sys.exit(0)
if os.environ.get("SPECFLUX_TEST_LAZY"):  # an agent that does nothing at all
    sys.exit(0)
work = pathlib.Path(f"work-{task}.txt")
if not work.exists():  # idempotent, as a good agent is: work already done is not done again
    work.write_text(f"task {task} done\\n")
path.write_text(text.replace("- [ ]", "- [x]").replace(
    "(To be completed)", f"### Summary\\ntask {task} done\\n\\n### For Downstream Tasks\\nread work-{task}.txt"))
print("agent line 1", flush=True)
gate = os.environ.get("SPECFLUX_TEST_GATE")
if gate and not pathlib.Path(gate, "go").exists():
    pathlib.Path(gate, "started").touch()
    deadline = time.monotonic() + 60
    while not pathlib.Path(gate, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
fill = os.environ.get("SPECFLUX_TEST_FILL")
if fill and not pathlib.Path(fill + ".done").exists():  # fill the disk once, as a runaway build would
    pathlib.Path(fill + ".done").touch()
    with open(fill, "wb") as out:
        try:
            while True:
                out.write(b"\\0" * 65536)
                out.flush()
        except OSError:
            pass
for n in range(2, 7):
    print(f"agent line {n}", flush=True)
'''


@pytest.fixture
def project(git_repo: Path, tmp_path: Path) -> Path:
    return make_project(git_repo, tmp_path / "agent.py")


def make_project(repo: Path, agent: Path) -> Path:
    """Tasks 1 <- 2 <- 3 in `repo`, committed, and the agent CLI at `agent`."""
    agent.write_text(AGENT)
    sf(repo, "init", str(repo))
    sf(repo, "new", "Schema", "--ac", "tables exist")
    sf(repo, "new", "Service", "--dep", "1", "--ac", "it answers")
    sf(repo, "new", "Endpoints", "--dep", "2", "--ac", "routes exist")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tasks")
    return repo


def sf(repo: Path, *args: str, code: int | None = 0, env: dict | None = None) -> subprocess.CompletedProcess:
    done = specflux_process(repo, *args, env={"PYTHONPATH": str(ROOT), **(env or {})})
    assert code is None or done.returncode == code, \
        f"specflux {' '.join(args)} -> {done.returncode}: {done.stdout}{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done


def agent_args(repo: Path) -> list[str]:
    agent = repo.parent / "agent.py" if (repo.parent / "agent.py").exists() else repo / "agent.py"
    return ["--agent", "command", "--cmd", f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))}", "--no-sandbox"]


def state(repo: Path) -> dict:
    return json.loads(sf(repo, "flow", "status", "--json").stdout)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def no_run_made(repo: Path, before: str) -> None:
    assert not (repo / ".specflux" / "runs").exists() or not any((repo / ".specflux" / "runs").iterdir())
    assert head(repo) == before, "no commit"


# --------------------------------------------------------------------- said before a run exists


def test_agent_replay_is_refused_before_a_run_exists(project):
    before = head(project)
    done = sf(project, "flow", "start", "2", "--agent", "replay", code=2)
    assert "`flow start --agent replay` has no recording to replay" in done.stderr
    assert "specflux flow replay RUN" in done.stderr
    no_run_made(project, before)


def test_no_api_key_is_said_before_a_run_exists(project):
    before = head(project)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    done = subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(project), "flow", "start", "1"],
                          capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "no Anthropic API key, so no run was started: set ANTHROPIC_API_KEY" in done.stderr
    assert "--agent claude" in done.stderr and "--agent replay" not in done.stderr
    no_run_made(project, before)


def test_a_task_complete_already_is_not_run_again(project):
    sf(project, "check", "1", "1")
    sf(project, "complete", "1", "--summary", "tables")
    before = head(project)
    done = sf(project, "flow", "start", "1", *agent_args(project), code=1)
    assert "task 1 is complete already: nothing to run" in done.stderr
    assert "specflux set 1 --status pending" in done.stderr
    no_run_made(project, before)


def test_a_dependency_not_complete_and_not_in_the_run_is_refused_with_the_command_that_runs_both(project):
    before = head(project)
    done = sf(project, "flow", "start", "3", *agent_args(project), code=1)
    assert "task 3 depends on task 2 (pending), not complete and not in this run" in done.stderr
    assert "`specflux flow start 1 2 3`" in done.stderr
    no_run_made(project, before)
    sf(project, "flow", "start", "1", "2", "3", *agent_args(project))  # as it says: all three, in order
    assert [t["status"] for t in state(project)["tasks"]] == ["complete"] * 3


def test_an_uncommitted_change_to_a_task_file_is_said_up_front(project):
    sf(project, "set", "1", "--priority", "2")  # `set` writes the file; the user has not committed it
    before = head(project)
    done = sf(project, "flow", "start", "1", *agent_args(project), code=1)
    assert "changes not committed: .specflux/task-states/task-1-state.md" in done.stderr
    assert "git add .specflux && git commit" in done.stderr
    no_run_made(project, before)


def test_a_run_that_fails_says_in_its_last_line_why_and_what_to_do(project):
    done = sf(project, "flow", "start", "1", *agent_args(project), "--max-iterations", "2", code=1, env={"SPECFLUX_TEST_LAZY": "1"})
    last = done.stdout.rstrip().splitlines()[-1].strip()
    run_id = done.stdout.splitlines()[0]
    assert last.startswith("failed (max_iterations): the attempts' commits are on branch main"), last
    assert f"`specflux flow log {run_id}`" in last and "`specflux flow start 1`" in last


def test_rerunning_a_task_whose_run_failed_after_its_work_was_committed_is_no_no_change(project):
    first = sf(project, "flow", "start", "1", *agent_args(project), "--max-iterations", "1", code=1)
    assert "failed (max_iterations)" in first.stdout  # the coder's work is committed; no review came
    assert git(project, "log", "-1", "--format=%s", "--", "work-1.txt").startswith("task 1: session 1")
    again = sf(project, "flow", "start", "1", *agent_args(project))  # the agent finds the work done
    assert "no change" not in again.stdout + again.stderr
    assert state(project)["status"] == "completed" and state(project)["taskAttempts"] == {"1": 1}


def test_flow_start_prd_in_a_git_repository_commits_the_planned_tasks_then_runs_them(git_repo, api):
    from specflux.agent.scripted import Reply, call

    sf(git_repo, "init", str(git_repo))
    (git_repo / "prd.md").write_text("# Notes\n\nA NOTES.md file.\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "workspace")
    plan = {"key": "notes", "title": "Write NOTES.md", "requirements": "A notes file.", "dependencies": [],
            "priority": 2, "complexity": "simple", "acceptance_criteria": ["NOTES.md exists"]}
    api(Reply(calls=[call("submit_tasks", tasks=[plan])]),
        Reply(calls=[call("write_file", path="NOTES.md", content="notes\n"), call("check_criterion", index=1)]),
        Reply(calls=[call("end_session", did=["wrote NOTES.md"], issues="", next="",
                          chain_output={"summary": "NOTES.md exists"})]),
        Reply(calls=[call("submit_review", approved=True, issues=[],
                          criteria_results=[{"criterion": "NOTES.md exists", "met": True}])]))
    done = sf(git_repo, "flow", "start", "--prd", str(git_repo / "prd.md"))
    assert "planned 1 task(s)" in done.stderr and "not committed" not in done.stderr
    assert state(git_repo)["status"] == "completed"
    assert git(git_repo, "log", "--format=%s").count("plan: 1 task(s) from prd.md") == 1


# --------------------------------------------------------------------- accidents


def start_gated(repo: Path, gate: Path, *args: str) -> subprocess.Popen:
    """`flow start` in the background, its coder waiting at `gate` (until gate/go exists)."""
    gate.mkdir(exist_ok=True)
    return subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(repo), "flow", "start", *args,
                             *agent_args(repo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "SPECFLUX_TEST_GATE": str(gate)})


def read_until(stream, text: str) -> None:
    for line in stream:
        if text in line:
            return
    raise AssertionError(f"{text!r} never came")


def test_a_closed_pipe_pauses_the_run_and_the_next_start_finishes_the_work_already_committed(project, tmp_path):
    gate = tmp_path / "gate"
    proc = start_gated(project, gate, "1")  # as `specflux flow start 1 | head -2`
    read_until(proc.stdout, "agent line 1")
    proc.stdout.close()  # `head` has its lines and exits
    (gate / "go").touch()
    assert proc.wait(timeout=120) == 130
    err = proc.stderr.read()
    assert "Traceback" not in err, err
    run = state(project)
    assert run["status"] == "paused", run["status"]
    assert "its output closed" in run["failureDetail"]
    assert f"`specflux flow resume {run['runId']}` goes on from here" in err.rstrip().splitlines()[-1]
    assert (project / "work-1.txt").exists()

    # the next start finds the work done and committed: no "no change", the task completes
    done = sf(project, "flow", "start", "1", *agent_args(project))
    assert f"task 1 is also in run {run['runId']}, paused" in done.stderr  # said: `flow resume` was the other way
    assert "run completed" in done.stderr and "no change" not in done.stdout + done.stderr
    assert state(project)["tasks"][0]["status"] == "complete"


def test_a_closed_terminal_pauses_the_run_and_resume_goes_on(project, tmp_path):
    gate = tmp_path / "gate"
    proc = start_gated(project, gate, "1")
    read_until(proc.stdout, "agent line 1")
    deadline = time.monotonic() + 60
    while not (gate / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(timeout=120) == 130
    run = state(project)
    assert run["status"] == "paused" and run["failureDetail"] == "its terminal closed (SIGHUP)", run
    (gate / "go").touch()
    done = sf(project, "flow", "resume")
    assert "run completed" in done.stderr
    assert state(project)["status"] == "completed"


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 4 MB file system of its own (tmpfs; needs root), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_pauses_the_run_and_resume_goes_on_once_space_is_freed(small_disk, tmp_path):
    repo = small_disk / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Test Author")
    git(repo, "config", "user.email", "author@example.com")
    make_project(repo, tmp_path / "agent.py")
    (repo.parent / "agent.py").write_text(AGENT)
    fill = small_disk / "fill"
    done = sf(repo, "flow", "start", "1", *agent_args(repo), code=1, env={"SPECFLUX_TEST_FILL": str(fill)})
    assert "the disk is full" in done.stderr
    assert "`specflux flow resume" in done.stderr.rstrip().splitlines()[-1], done.stderr
    run = state(repo)
    assert run["status"] == "paused" and "the disk is full" in run["failureDetail"], run
    fill.unlink()
    done = sf(repo, "flow", "resume", env={"SPECFLUX_TEST_FILL": str(fill)})
    assert state(repo)["status"] == "completed", done.stderr
    assert state(repo)["tasks"][0]["status"] == "complete"
