"""Workflow runs end to end: real git repositories, real pytest runs as validation, a fake agent
CLI for each role (and the real Anthropic SDK against a local scripted server in
test_flow_sdk.py), control from a second process, kill -9 and resume."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import git
from patience import patience
from helpers import fake_agent_plan as plan
from helpers import hold, run
from helpers import specflux_process as specflux

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
TEST = 'import sys\nsys.path.insert(0, "src")\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n'
VALIDATE = """
[validate]
command = "{python} -m pytest -q -p no:cacheprovider --junitxml=.specflux-junit.xml"
junit_xml = ".specflux-junit.xml"
"""


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """A repo with a bug (add subtracts), its test, [validate], and tasks 1 (fix) and 2 (docs,
    depends on 1), committed."""
    (git_repo / "src").mkdir()
    (git_repo / "src" / "calc.py").write_text(WRONG)
    (git_repo / "tests").mkdir()
    (git_repo / "tests" / "test_calc.py").write_text(TEST)
    (git_repo / ".gitignore").write_text(".specflux-junit.xml\n__pycache__/\n")
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    with open(git_repo / ".specflux" / "config.toml", "a") as f:
        f.write(VALIDATE.format(python=sys.executable))
    assert run(capsys, git_repo, "new", "Fix add", "--ac", "add returns the sum")[0] == 0
    assert run(capsys, git_repo, "new", "Document add", "--dep", "1", "--ac", "README explains add")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def start(repo: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    return specflux(repo, "flow", "start", "--agent", "command", "--cmd", cmd, *extra, env=env)


def status(repo: Path) -> dict:
    done = specflux(repo, "flow", "status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def context(tmp_path: Path, role: str, task: str, n: int) -> str:
    return (tmp_path / "agent-state" / f"{role}-{task}-{n}.txt").read_text()


def trailers(repo: Path, rev: str) -> dict[str, str]:
    text = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", rev)
    return dict(line.split(": ", 1) for line in text.splitlines() if line.strip())


FIX = {"write": {"src/calc.py": RIGHT}, "check": True, "chain": "add() returns a + b"}
DOCS = {"write": {"README.md": "# project\n\nadd(a, b) returns the sum.\n"}, "check": True, "chain": "README explains add"}


# --------------------------------------------------------------------- the queue


def test_a_failing_test_is_named_in_the_retry_and_the_queue_completes(project, tmp_path):
    env = plan(tmp_path, coder__1=[{"write": {"src/calc.py": "def add(a, b):\n    return a * b\n"}}, FIX],
               coder__2=[DOCS], reviewer=[{"approved": True}])
    done = start(project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(project)
    assert state["status"] == "completed"
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    assert state["taskAttempts"] == {"1": 2, "2": 1}
    assert state["metrics"]["tasksCompleted"] == 2 and state["metrics"]["totalReviews"] == 2
    retry = context(tmp_path, "coder", "1", 2)
    assert "tests/test_calc.py::test_add" in retry and "assert 6 == 5" in retry, retry
    assert "tests/test_calc.py::test_add" not in context(tmp_path, "coder", "1", 1)
    # task files: complete, wired downstream, one entry per attempt and review
    shown = json.loads(specflux(project, "show", "2", "--json").stdout)
    assert shown["status"] == "complete" and shown["chain_inputs"][0]["body"].startswith("add() returns a + b")
    task1 = json.loads(specflux(project, "show", "1", "--json").stdout)
    assert len(task1["sessions"]) == 3 and task1["sessions"][-1]["did"][0].startswith("Review: approved")
    # commits carry the run's trailers, the validation is the engine's, the history is committed
    log = git(project, "log", "--format=%H")
    roles = [trailers(project, sha).get("Specflux-Role") for sha in log.split()]
    assert roles.count("coder") == 3 and roles.count("reviewer") == 2
    assert all(trailers(project, sha).get("Specflux-Run") == state["runId"] for sha in log.split()[:6])
    assert "events.jsonl" in git(project, "show", "--name-only", "--format=", "HEAD")
    assert specflux(project, "lint").returncode == 0
    narrative = specflux(project, "flow", "log").stdout
    assert "tests failed: tests/test_calc.py::test_add" in narrative and "task 1 is complete" in narrative


def test_a_rejection_is_answered_with_the_reviewers_issues(project, tmp_path):
    issue = {"severity": "major", "description": "README does not say what add returns"}
    answered = {**DOCS, "write": {"README.md": "# project\n\nadd(a, b) returns the sum of a and b.\n"}}
    env = plan(tmp_path, coder__1=[FIX], coder__2=[DOCS, answered],
               reviewer__1=[{"approved": True}], reviewer__2=[{"approved": False, "issues": [issue]}, {"approved": True}])
    done = start(project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    retry = context(tmp_path, "coder", "2", 2)
    assert "[major] README does not say what add returns" in retry
    assert "Criteria the reviewer found not met" in retry
    state = status(project)
    assert state["status"] == "completed" and state["taskMetrics"]["2"]["reviews"] == 2


def test_retries_exhausted_fail_the_task_and_block_its_dependents(project, tmp_path):
    env = plan(tmp_path, coder__1=[{"write": {"src/calc.py": WRONG}}], coder__2=[DOCS], reviewer=[{"approved": True}])
    done = start(project, env)
    assert done.returncode == 1
    state = status(project)
    assert state["status"] == "failed" and state["failureReason"] == "max_iterations"
    assert state["taskAttempts"] == {"1": 4}, "one attempt and coder-retry's 3"
    assert [t["status"] for t in state["tasks"]] == ["failed", "blocked"]
    assert json.loads(specflux(project, "show", "1", "--json").stdout)["status"] == "failed"
    assert json.loads(specflux(project, "show", "2", "--json").stdout)["status"] == "blocked"
    assert not (tmp_path / "agent-state" / "coder-2-1.txt").exists(), "a blocked task never starts"


def test_the_run_wide_iteration_cap_and_token_budget(project, tmp_path):
    env = plan(tmp_path, coder__1=[{"write": {"src/calc.py": WRONG}}])
    done = start(project, env, "--max-iterations", "2")
    assert done.returncode == 1
    state = status(project)
    assert state["failureReason"] == "max_iterations" and state["iteration"] == 2


def test_a_broken_condition_is_a_located_error_before_anything_runs(project, tmp_path):
    bad = project / "bad.toml"
    bad.write_text('name = "bad"\nstart = "coder"\n\n[[edges]]\nid = "x"\nfrom = "coder"\nto = "reviewer"\n'
                   'when = "coderOutput.selfValidation.passed = = true"\n')
    done = start(project, plan(tmp_path, coder=[FIX]), "--workflow", str(bad))
    assert done.returncode == 1 and f"{bad}:8:" in done.stderr, done.stderr
    assert not (project / ".specflux" / "runs").exists()
    assert not (tmp_path / "agent-state").exists()


# --------------------------------------------------------------------- a person in the loop

APPROVAL_FLOW = """\
name = "gated"
start = "coder"

[[edges]]
id = "to-review"
from = "coder"
to = "approval"
when = "coderOutput.selfValidation.passed = true"

[[edges]]
id = "retry"
from = "coder"
to = "coder"
when = "coderOutput.selfValidation.passed = false"
max_iterations = 2

[[edges]]
id = "rejected"
from = "approval"
to = "coder"
when = "approvalOutput.approved = false"
max_iterations = 2

[[edges]]
id = "approved-next"
from = "approval"
to = "coder"
when = "approvalOutput.approved = true and currentTaskIndex < $count(tasks) - 1"
task = "next"
"""


def test_an_approval_gate_waits_for_a_person(project, tmp_path):
    (project / ".specflux" / "workflows").mkdir()
    (project / ".specflux" / "workflows" / "gated.toml").write_text(APPROVAL_FLOW)
    negatives = {**FIX, "write": {"src/calc.py": "def add(a, b):\n    return a + b  # negative numbers too\n"}}
    env = plan(tmp_path, coder__1=[FIX, negatives], coder__2=[DOCS])
    done = start(project, env, "1", "--workflow", "gated")
    assert done.returncode == 0 and "waiting for approval" in done.stdout
    state = status(project)
    assert state["status"] == "paused" and state["pausedFor"] == "approval"
    refused = specflux(project, "flow", "reject", env=env)
    assert refused.returncode == 2 and "--note" in refused.stderr
    done = specflux(project, "flow", "reject", "--note", "also handle negative numbers", env=env)
    assert done.returncode == 0, done.stderr
    assert "A person rejected it: also handle negative numbers" in context(tmp_path, "coder", "1", 2)
    assert status(project)["pausedFor"] == "approval"
    done = specflux(project, "flow", "approve", env=env)
    assert done.returncode == 0, done.stderr
    state = status(project)
    assert state["status"] == "completed" and state["tasks"][0]["status"] == "complete"
    assert specflux(project, "flow", "approve").returncode == 1, "nothing left to approve: the run says no"


# --------------------------------------------------------------------- control from another terminal


def _background(repo: Path, env: dict, *args: str) -> subprocess.Popen:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    return subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args, "--agent", "command",
                             "--cmd", cmd] if args[:2] == ("flow", "start") else
                            [sys.executable, "-m", "specflux.cli", "--root", str(repo), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def _wait_for(predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _started(tmp_path: Path, role: str, task: str, n: int) -> bool:
    return (tmp_path / "agent-state" / f"{role}-{task}-{n}.txt").exists()


def test_pause_resume_and_stop_from_a_second_process(project, tmp_path):
    slow = dict(FIX, sleep=1.5)
    env = plan(tmp_path, coder__1=[slow], coder__2=[dict(DOCS, sleep=600)], reviewer=[{"approved": True}])
    proc = _background(project, env, "flow", "start")
    _wait_for(lambda: _started(tmp_path, "coder", "1", 1))
    paused = specflux(project, "flow", "pause")
    assert paused.returncode == 0 and "pauses after its current step" in paused.stdout
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    state = status(project)
    assert state["status"] == "paused" and state["pausedFor"] == "user"
    assert state["iteration"] == 1, "the step in flight finished; nothing after it started"

    proc = _background(project, env, "flow", "resume")
    _wait_for(lambda: _started(tmp_path, "coder", "2", 1))
    time.sleep(0.5)
    stopped = specflux(project, "flow", "stop")
    assert stopped.returncode == 0, stopped.stderr
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, out + err
    state = status(project)
    assert state["status"] == "user_exit"
    assert state["tasks"][0]["status"] == "complete"
    task2 = json.loads(specflux(project, "show", "2", "--json").stdout)
    assert "interrupted" in task2["sessions"][-1]["did"][0], "the interrupted session says so"
    assert specflux(project, "lint").returncode == 0


def _engine_lock(project: Path) -> Path:
    from specflux.flow.record.run import Run
    from specflux.store.workspace import Workspace

    return Run.find(Workspace(project), status(project)["runId"]).locks_dir / "engine.lock"


@pytest.mark.parametrize("ends", ["soon", "never"])
def test_a_resume_while_the_pausing_process_still_ends_waits_for_it(project, tmp_path, ends):
    """Paused, and its process not yet gone (the board's Resume pressed as the badge turned):
    `flow resume` waits for that process, then drives the run; one that does not end within
    SPECFLUX_LOCK_TIMEOUT is named as driving the run, and the run stays paused."""
    env = plan(tmp_path, coder__1=[dict(FIX, sleep=1.0)], coder__2=[DOCS], reviewer=[{"approved": True}])
    proc = _background(project, env, "flow", "start")
    _wait_for(lambda: _started(tmp_path, "coder", "1", 1))
    assert specflux(project, "flow", "pause").returncode == 0
    proc.communicate(timeout=60)
    assert status(project)["status"] == "paused"

    holder = hold(_engine_lock(project))  # as the process that paused the run does while it ends
    if ends == "soon":
        threading.Timer(1.5, holder.kill).start()
    try:
        began = time.monotonic()
        done = specflux(project, "flow", "resume", env={**env, "SPECFLUX_LOCK_TIMEOUT": "10" if ends == "soon" else "1"})
        took = time.monotonic() - began
    finally:
        holder.kill()
        holder.wait()
    if ends == "soon":
        assert done.returncode == 0, done.stdout + done.stderr
        assert took >= 1.0, "it waited for the lock"
        assert status(project)["status"] == "completed"
    else:
        assert done.returncode != 0 and "already being driven by another process" in done.stderr, done.stderr
        assert status(project)["status"] == "paused" and status(project)["pausedFor"] == "user"


def test_flow_stop_interrupts_a_run_started_with_sigint_ignored(project, tmp_path):
    """`specflux flow start &` from a script starts with SIGINT ignored (so did a whole suite run
    that way, where every `flow stop` test hung): a real SIGINT stays ignored, and `flow stop` still
    interrupts the step in flight, which it does through a simulated SIGINT (base/interrupts.py)."""
    env = plan(tmp_path, coder__1=[dict(FIX, sleep=600)])
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    proc = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(project), "flow", "start", "--agent",
                             "command", "--cmd", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env}, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        _wait_for(lambda: _started(tmp_path, "coder", "1", 1))
        proc.send_signal(signal.SIGINT)  # ignored, as the process was started to
        stopped = specflux(project, "flow", "stop")
        assert stopped.returncode == 0, stopped.stderr
        out, err = proc.communicate(timeout=patience(60))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out + err
    state = status(project)
    assert state["status"] == "user_exit"
    events = [json.loads(line) for line in (project / ".specflux" / "runs" / state["runId"] / "events.jsonl").open()]
    assert not [e for e in events if e["type"] == "status" and e["status"] == "paused"], "the real SIGINT paused it"
    interrupted = [e for e in events if e["type"] == "step_finished" and e["kind"] == "coder"]
    assert interrupted[-1]["error"] == {"type": "INTERRUPTED", "message": "stopped by `flow stop`"}


# --------------------------------------------------------------------- crashes


@pytest.mark.parametrize("lanes", ["1", "2"])
def test_kill_9_while_the_agent_rewrites_its_task_file_then_resume_puts_it_back(project, tmp_path, lanes):
    """The engine killed while its agent is in the middle of rewriting the task file (truncated,
    not yet written: the agent dies with the engine): `flow resume` puts the file back as it was
    before that session, records the crashed attempt and finishes the run (it failed the run,
    "no title", in a CI kill loop)."""
    marker = tmp_path / "truncated"
    mid_write = dict(FIX, sh=f': > "$SPECFLUX_TASK_FILE"; touch {shlex.quote(str(marker))}; sleep 600')
    env = plan(tmp_path, coder__1=[mid_write, FIX], coder__2=[DOCS], reviewer=[{"approved": True}])
    before = (project / ".specflux" / "task-states" / "task-1-state.md").read_bytes()
    proc = _background(project, env, "flow", "start", "--parallel", lanes)  # (2: the file is the lane's)
    try:
        _wait_for(marker.exists)
    finally:
        proc.kill()
        proc.communicate()
    done = specflux(project, "flow", "resume", env=env, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "task-1-state.md: left unreadable by the session the engine's stop cut short" in done.stdout + done.stderr
    assert status(project)["status"] == "completed"
    crashed = git(project, "log", "--format=%B", "--grep=engine stopped during the session")
    assert "Specflux-Stop: crashed" in crashed
    first = git(project, "show", "HEAD~0:.specflux/task-states/task-1-state.md")  # (parses: lint below)
    assert first.startswith(before.decode().split("\n", 1)[0])
    assert specflux(project, "lint").returncode == 0


def _invariants(repo: Path) -> dict:
    state = status(repo)
    events = [json.loads(line) for line in (repo / ".specflux" / "runs" / state["runId"] / "events.jsonl").open()]
    started = [e["stepId"] for e in events if e["type"] == "step_started"]
    finished = [e["stepId"] for e in events if e["type"] == "step_finished"]
    assert len(finished) == len(set(finished)), "no step finished twice"
    coder_steps = {e["stepId"] for e in events if e["type"] == "step_started" and e["kind"] == "coder"}
    assert state["metrics"]["totalAttempts"] == len(coder_steps), "no attempt counted twice"
    assert set(finished) <= set(started)
    assert specflux(repo, "lint").returncode == 0, "no task file broken"
    return state


def test_kill_9_at_many_points_then_resume_ends_as_it_would_have(project, tmp_path):
    env = plan(tmp_path, coder__1=[dict(FIX, write={"src/calc.py": "def add(a, b):\n    return 0\n"}, sleep=0.3),
                                   dict(FIX, sleep=0.3)],
               coder__2=[dict(DOCS, sleep=0.3)], reviewer=[{"approved": True, "sleep": 0.2}])
    import random

    rng = random.Random(7)
    kills = 0
    proc = _background(project, env, "flow", "start")
    deadline = time.monotonic() + 120  # the kills start once the run exists: what is timed is the run, not
    while not any((project / ".specflux" / "runs").glob("run-*/events.jsonl")):  # how long a loaded
        assert proc.poll() is None and time.monotonic() < deadline, "the run was never created"  # machine takes
        time.sleep(0.05)  # to start Python
    while kills < 8:  # then let it finish: on a loaded machine a resume may need longer than any wait
        time.sleep(rng.uniform(0.2, 1.5))
        if proc.poll() is not None:
            break
        os.killpg(proc.pid, signal.SIGKILL) if False else proc.kill()
        proc.wait()
        kills += 1
        _invariants(project)
        proc = _background(project, env, "flow", "resume")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    state = _invariants(project)
    assert state["status"] == "completed", state
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    assert kills >= 2, "the run was killed at several points"
    sessions = json.loads(specflux(project, "show", "1", "--json").stdout)["sessions"]
    crashed = [s for s in sessions if "engine stopped" in s["did"][0]]
    assert len(sessions) >= state["taskMetrics"]["1"]["attempts"] + state["taskMetrics"]["1"]["reviews"] + len(crashed) - 1
    assert open(project / "src" / "calc.py").read() == RIGHT
    assert git(project, "status", "--porcelain", "--", "src").strip() == "", "all the work is committed"


def test_progress_shows_where_the_run_stands_on_a_terminal_and_plain_lines_in_a_pipe(project, tmp_path):
    import io

    from specflux.cli.flow_commands import Progress
    from specflux.flow.record.run import Run
    from specflux.store.workspace import Workspace

    env = plan(tmp_path, coder__1=[FIX], coder__2=[DOCS], reviewer=[{"approved": True}])
    assert start(project, env).returncode == 0
    run_ = Run.find(Workspace(project))

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    pipe, tty = io.StringIO(), Terminal()
    Progress(run_, pipe)("coder on task 1")
    Progress(run_, tty)("coder on task 1")
    assert pipe.getvalue() == "[flow] coder on task 1\n"
    assert "\x1b[2m[00:00 completed 0.0k tok]\x1b[0m coder on task 1" in tty.getvalue()


ONE_SHOT_SPEC = '''
from specflux.flow.decisions import Annotate, Decision, RequestWork, retry_or_give_up


class OneShot:
    """Each task gets one coder try; it is accepted when the tests pass, else failed."""

    name = "one-shot"

    def on_agent_completed(self, state, response, ctx):
        tasks = state["tasks"]
        if response.work_kind == "BOOT":
            return Decision(f"boot-{ctx.now}", (RequestWork("coder", {"taskId": tasks[0]["id"]}),))
        passed = response.content["selfValidation"]["passed"]
        verdict = Annotate(("accepted:" if passed else "failed:") + response.task_id, {"reason": "one try"})
        index = next(i for i, t in enumerate(tasks) if t["id"] == response.task_id)
        if index + 1 < len(tasks) and passed:
            return Decision(f"next-{ctx.now}", (verdict, RequestWork("coder", {"taskId": tasks[index + 1]["id"]})))
        return Decision(f"end-{ctx.now}", (verdict,), finalize=True)

    def on_agent_error(self, state, work_kind, error, attempt):
        return retry_or_give_up(state, work_kind, error, attempt)


class Factory:
    name = "one-shot"
    version = "1.0"

    def create(self, context):
        return OneShot()

    def describe(self):
        return {"name": self.name, "version": self.version, "requiredWorkKinds": ["coder"]}
'''


def test_python_decision_logic_from_a_workflow_file_drives_the_run(project, tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "oneshot.py").write_text(ONE_SHOT_SPEC)
    (project / ".specflux" / "workflows").mkdir()
    (project / ".specflux" / "workflows" / "oneshot.toml").write_text('name = "oneshot"\nspec = "oneshot:Factory"\n')
    env = plan(tmp_path, coder__1=[FIX], coder__2=[DOCS])
    env["PYTHONPATH"] = str(specs) + os.pathsep + env["PYTHONPATH"]
    done = start(project, env, "--workflow", "oneshot")
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(project)
    assert state["status"] == "completed" and state["workflow"] == "oneshot"
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    assert state["metrics"]["totalReviews"] == 0, "this workflow has no reviewer"


def test_a_crash_between_the_last_decision_and_the_end_of_the_run_is_finished_by_resume(project, tmp_path):
    """kill -9 right after the finalizing decision was recorded: resume ends the run, not restarts it."""
    env = plan(tmp_path, coder__1=[FIX], reviewer=[{"approved": True}])
    assert start(project, env, "1").returncode == 0
    state = status(project)
    events = project / ".specflux" / "runs" / state["runId"] / "events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    last_decision = max(i for i, line in enumerate(lines) if json.loads(line)["type"] == "decision")
    events.write_text("".join(lines[: last_decision + 1]))  # as if killed right after it
    (events.parent / "state.json").unlink()
    assert status(project)["status"] == "running"
    done = specflux(project, "flow", "resume", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(project)
    assert state["status"] == "completed" and state["tasks"][0]["status"] == "complete"


@pytest.mark.parametrize("cut_after", ["boot", "step_finished"])
def test_a_crash_before_a_decision_is_recorded_is_decided_on_resume(project, tmp_path, cut_after):
    """kill -9 after the boot or after a step's result, before its decision: resume makes the same
    decision from the recorded result, `now` and seed, and the run goes on. (The whole run has
    already happened when its log is cut: the coder that runs again changes something again, or it
    would be an attempt that changes nothing.)"""
    again = {**FIX, "write": {"src/calc.py": "def add(a, b):\n    return a + b  # again\n"}}
    env = plan(tmp_path, coder__1=[FIX, again], reviewer=[{"approved": True}])
    assert start(project, env, "1").returncode == 0
    run_id = status(project)["runId"]
    events = project / ".specflux" / "runs" / run_id / "events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    kinds = [json.loads(line)["type"] for line in lines]
    cut = kinds.index(cut_after) + 1  # the first boot, or the first step's result
    assert kinds[cut] == "decision"
    events.write_text("".join(lines[:cut]))
    (events.parent / "state.json").unlink()
    done = specflux(project, "flow", "resume", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(project)
    assert state["status"] == "completed" and state["tasks"][0]["status"] == "complete"
    assert "stalled" not in json.dumps(state)


def test_a_garbled_event_is_named_with_its_line_not_a_traceback(project, tmp_path):
    env = plan(tmp_path, coder__1=[FIX], reviewer=[{"approved": True}])
    assert start(project, env, "1").returncode == 0
    run_dir = next((project / ".specflux" / "runs").iterdir())
    events = run_dir / "events.jsonl"
    lines = events.read_text().splitlines(keepends=True)
    lines[4] = "{not json\n"
    events.write_text("".join(lines))
    (run_dir / "state.json").unlink()
    done = specflux(project, "flow", "status")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "events.jsonl:5: not a JSON event" in done.stderr, done.stderr
