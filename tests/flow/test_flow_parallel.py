"""Parallel lanes (`flow start --parallel N`): real git worktrees, a fake agent CLI per role,
merges made by the run into the user's branch, conflicts seen by the decision logic, kill -9 and
resume, `flow stop`, and the user's own merge never touched."""

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
from helpers import fake_agent_plan as plan
from helpers import run
from helpers import specflux_process as specflux
from patience import patience

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """Tasks 1 and 2 (independent) and 3 (depends on 1), committed."""
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "Notes on apples", "--ac", "NOTES.md names apples")[0] == 0
    assert run(capsys, git_repo, "new", "Notes on pears", "--ac", "NOTES.md names pears")[0] == 0
    assert run(capsys, git_repo, "new", "Index", "--dep", "1", "--ac", "INDEX.md exists")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def agent_cmd() -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"


def start(repo: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    return specflux(repo, "flow", "start", "--agent", "command", "--cmd", agent_cmd(), *extra, env=env)


def status(repo: Path) -> dict:
    done = specflux(repo, "flow", "status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def times(tmp_path: Path, role: str, task: str, n: int = 1) -> tuple[float, float, str]:
    began, ended, cwd = (tmp_path / "agent-state" / f"{role}-{task}-{n}.times").read_text().split(" ", 2)
    return float(began), float(ended), cwd


def context(tmp_path: Path, role: str, task: str, n: int) -> str:
    return (tmp_path / "agent-state" / f"{role}-{task}-{n}.txt").read_text()


def no_lanes_left(repo: Path) -> None:
    assert not (repo / ".specflux" / "worktrees").exists()
    left = [b for b in git(repo, "branch", "--list", "specflux/*").split() if not b.startswith("specflux/stopped/")]
    assert left == [], left
    listed = git(repo, "worktree", "list", "--porcelain")
    assert listed.count("worktree ") == 1, listed


def task_status(repo: Path, task: str) -> str:
    done = specflux(repo, "show", task, "--json")
    return json.loads(done.stdout)["metadata"]["status"]


APPLES = {"write": {"NOTES.md": "apples\n"}, "check": True, "chain": "NOTES.md names apples", "sleep": 1.0}
PEARS = {"write": {"NOTES.md": "pears\n"}, "check": True, "chain": "NOTES.md names pears", "sleep": 1.0}
BOTH = {"write": {"NOTES.md": "apples\npears\n"}, "check": True, "chain": "NOTES.md names pears too"}
INDEX = {"write": {"INDEX.md": "see NOTES.md\n"}, "check": True, "chain": "INDEX.md"}


def test_independent_tasks_run_at_once_in_their_own_worktrees_and_are_merged(project, tmp_path):
    env = plan(tmp_path, coder__1=[APPLES], coder__2=[{**PEARS, "write": {"PEARS.md": "pears\n"}}], coder__3=[INDEX])
    done = start(project, env, "--parallel", "2")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "[task 1] fake coder on task 1, attempt 1" in done.stdout  # each lane's agent output, named
    assert "[task 2] fake coder on task 2, attempt 1" in done.stdout
    one, two = times(tmp_path, "coder", "1"), times(tmp_path, "coder", "2")
    assert one[0] < two[1] and two[0] < one[1], "tasks 1 and 2 did not overlap"
    assert one[2] != two[2] and ".specflux/worktrees/" in one[2] and ".specflux/worktrees/" in two[2]
    three = times(tmp_path, "coder", "3")
    assert three[0] > one[1], "task 3 started before its dependency finished"
    assert "NOTES.md names apples" in context(tmp_path, "coder", "3", 1)  # its chain input, merged first
    for name in ("NOTES.md", "PEARS.md", "INDEX.md"):
        assert (project / name).is_file(), name
    assert git(project, "status", "--porcelain", "--untracked-files=no").strip() == ""
    merges = git(project, "log", "--merges", "--format=%s").splitlines()
    assert sorted(m.split(":")[0] for m in merges) == ["Merge task 1", "Merge task 2", "Merge task 3"]
    assert all(task_status(project, t) == "complete" for t in "123")
    state = status(project)
    assert state["status"] == "completed" and state["parallel"] == 2 and state["targetBranch"] == "main"
    assert "2 lanes into branch main: none open" in specflux(project, "flow", "status").stdout
    no_lanes_left(project)


def test_two_tasks_writing_the_same_file_the_second_merge_conflicts_and_is_redone(project, tmp_path):
    # task 1 is quick and merges first; task 2, slower, wrote the same file in its own lane
    env = plan(tmp_path, coder__1=[{**APPLES, "sleep": 0.2}], coder__2=[{**PEARS, "sleep": 2.5}, BOTH])
    done = start(project, env, "--parallel", "2", "1", "2")
    assert done.returncode == 0, done.stderr + done.stdout
    assert (project / "NOTES.md").read_text() == "apples\npears\n"
    retry = context(tmp_path, "coder", "2", 2)
    assert "conflicts in NOTES.md" in retry and "+pears" in retry  # the conflict and the last attempt's change
    state = status(project)
    assert state["status"] == "completed", state
    edges = state["edgeIterations"]
    assert edges["merge-conflict"] == {"2": 1}
    log = specflux(project, "flow", "log").stdout
    assert "merge-conflict" in log
    text = (project / ".specflux" / "task-states" / "task-2-state.md").read_text()
    assert text.count("### Session ") >= 2, "the conflicted attempt's session was lost"
    assert task_status(project, "1") == task_status(project, "2") == "complete"
    no_lanes_left(project)


def test_a_task_that_fails_in_its_lane_is_not_merged_and_its_log_is_kept(project, tmp_path):
    broken = {"write": {"PEARS.md": "half done\n"}, "exit": 3}
    env = plan(tmp_path, coder__1=[APPLES], coder__2=[broken], coder__3=[INDEX])
    done = start(project, env, "--parallel", "2")
    assert done.returncode == 1
    state = status(project)
    assert state["status"] == "failed" and state["failureReason"] == "max_iterations", state
    assert task_status(project, "2") == "failed"
    assert task_status(project, "1") == task_status(project, "3") == "complete"  # the other lanes went on
    assert not (project / "PEARS.md").exists()  # nothing of the failed lane's change is merged
    text = (project / ".specflux" / "task-states" / "task-2-state.md").read_text()
    assert text.count("### Session ") == 4, "the failed lane's sessions were not carried over"
    kept = f"specflux/stopped/{state['runId']}/2"  # its change too, on a branch of its own (docs/runs.md)
    assert state["stoppedBranches"] == {"2": kept} and git(project, "show", f"{kept}:PEARS.md") == "half done\n"
    no_lanes_left(project)


def test_a_failed_lanes_log_carried_over_keeps_a_crlf_task_file_crlf(project, tmp_path):
    path = project / ".specflux" / "task-states" / "task-2-state.md"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    git(project, "commit", "-q", "-am", "task 2 in CRLF")
    env = plan(tmp_path, coder__1=[APPLES], coder__2=[{"write": {"PEARS.md": "half\n"}, "exit": 3}])
    assert start(project, env, "--parallel", "2", "1", "2").returncode == 1
    data = path.read_bytes()
    assert data.count(b"### Session ") == 4, "the failed lane's sessions were not carried over"
    assert data.count(b"\n") == data.count(b"\r\n"), "a line ending changed"
    no_lanes_left(project)


def test_the_conflict_limit_fails_the_task_in_the_decision_logic():
    from specflux.flow.decisions import AgentResponse, DecisionContext
    from specflux.flow.workflow.edges import MERGE_RETRIES, EdgeSpec
    from specflux.flow.workflow.workflow_file import load_workflow

    spec = EdgeSpec(load_workflow("queue", Path(".")), parallel=2)
    tasks = [{"id": "1", "status": "pending", "dependencies": []}, {"id": "2", "status": "pending", "dependencies": []}]
    state = {"tasks": tasks, "openSteps": {}, "edgeIterations": {"merge-conflict": {"2": MERGE_RETRIES - 1}}}
    conflict = AgentResponse("s9", "merge", "OK", {"taskId": "2", "merged": False, "conflicts": ["NOTES.md"]}, "r", "2")
    again = spec.on_agent_completed(state, conflict, DecisionContext(1, 1))
    assert [a.work_kind for a in again.actions] == ["coder"] and again.actions[0].payload["after"] == "conflict"
    state["edgeIterations"]["merge-conflict"]["2"] = MERGE_RETRIES
    failed = spec.on_agent_completed(state, conflict, DecisionContext(1, 1))
    assert failed.actions[0].key == "failed:2" and "merge_conflict" in failed.actions[0].value["reason"]
    assert [(a.work_kind, a.payload["taskId"]) for a in failed.actions[1:]] == [("coder", "1")]  # a lane is free
    merged = spec.on_agent_completed(state, AgentResponse("s9", "merge", "OK", {"taskId": "2", "merged": True}, "r", "2"),
                                     DecisionContext(1, 1))
    assert merged.actions[0].key == "accepted:2"


def test_worktree_setup_runs_in_each_new_worktree_before_the_agent(project, tmp_path):
    log = tmp_path / "setup.log"
    script = tmp_path / "setup.py"
    script.write_text(f"import os, time\nopen('.setup-ran', 'w').write('x')\n"
                      f"open({str(log)!r}, 'a').write(f'{{os.getcwd()}} {{time.time()}}\\n')\n")
    with open(project / ".specflux" / "config.toml", "a") as f:
        f.write(f"\n[flow]\nworktree_setup = {json.dumps(shlex.join([sys.executable, str(script)]))}\n")
    git(project, "commit", "-q", "-am", "setup")
    env = plan(tmp_path, coder__1=[APPLES], coder__2=[{**PEARS, "write": {"PEARS.md": "pears\n"}}])
    done = start(project, env, "--parallel", "2", "1", "2")
    assert done.returncode == 0, done.stderr + done.stdout
    ran = dict(line.rsplit(" ", 1) for line in log.read_text().splitlines())
    for task in ("1", "2"):
        began, _, cwd = times(tmp_path, "coder", task)
        assert cwd in ran and float(ran[cwd]) < began  # set up first, in the agent's own worktree
    assert ".setup-ran" not in git(project, "log", "--all", "--stat", "--format=")  # never committed
    no_lanes_left(project)


def test_a_failing_worktree_setup_fails_the_run_saying_why(project, tmp_path):
    with open(project / ".specflux" / "config.toml", "a") as f:
        f.write(f"\n[flow]\nworktree_setup = {json.dumps(shlex.join([sys.executable, '-c', 'import sys; sys.exit(4)']))}\n")
    git(project, "commit", "-q", "-am", "setup")
    done = start(project, plan(tmp_path, coder=[APPLES]), "--parallel", "2", "1", "2")
    assert done.returncode == 1
    assert "worktree_setup" in done.stderr and "exited with 4" in done.stderr
    assert not (tmp_path / "agent-state").exists()  # no agent ran
    no_lanes_left(project)


def test_parallel_needs_committed_task_files_and_a_branch(project, tmp_path, capsys):
    (project / ".specflux" / "task-states" / "task-1-state.md").write_text(
        (project / ".specflux" / "task-states" / "task-1-state.md").read_text() + "\nedited\n")
    done = start(project, plan(tmp_path), "--parallel", "2")
    assert done.returncode == 1 and "changes not committed" in done.stderr and "task-1-state.md" in done.stderr
    git(project, "checkout", "-q", "--", ".")
    git(project, "checkout", "-q", "--detach")
    done = start(project, plan(tmp_path), "--parallel", "2")
    assert done.returncode == 1 and "detached" in done.stderr


def _background(repo: Path, env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(repo), "flow", "start", "--agent",
                             "command", "--cmd", agent_cmd(), *args], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(predicate, timeout: float = 60) -> None:
    end = time.monotonic() + patience(timeout)
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _agents_running(state_dir: Path) -> list[int]:
    """The fake agents (and their children) still running for this test, found by their environment."""
    mark = f"SPECFLUX_FAKE_STATE={state_dir}".encode()
    pids = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                pids.append(int(environ.parent.name))
        except OSError:  # gone meanwhile, or not ours to read
            pass
    return pids


def test_kill_9_during_a_parallel_run_then_resume_finishes_it_and_cleans_up(project, tmp_path):
    slow = {"sleep": 2.0}
    env = plan(tmp_path, coder__1=[{**APPLES, **slow}], coder__2=[{**PEARS, **slow, "write": {"PEARS.md": "pears\n"}}],
               coder__3=[INDEX])
    proc = _background(project, env, "--parallel", "2")
    state_dir = tmp_path / "agent-state"
    _wait_for(lambda: (state_dir / "coder-1-1.txt").exists() and (state_dir / "coder-2-1.txt").exists())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (project / ".specflux" / "worktrees").is_dir()  # the lanes, left where the crash left them
    _wait_for(lambda: not _agents_running(state_dir))  # the orphaned agents finish their writes in the worktrees
    done = specflux(project, "flow", "resume", env=env, timeout=180)
    assert done.returncode == 0, done.stderr + done.stdout
    state = status(project)
    assert state["status"] == "completed", state
    assert all(task_status(project, t) == "complete" for t in "123")
    assert (project / "NOTES.md").read_text() == "apples\n" and (project / "PEARS.md").is_file()
    no_lanes_left(project)
    # each task's attempt is in the history once as the crashed one and once as the one that finished
    assert specflux(project, "lint").returncode == 0


def test_flow_stop_stops_every_lane_and_removes_the_worktrees(project, tmp_path):
    env = plan(tmp_path, coder__1=[{**APPLES, "sleep": 600}], coder__2=[{**PEARS, "sleep": 600}])
    proc = _background(project, env, "--parallel", "2", "1", "2")
    state_dir = tmp_path / "agent-state"
    _wait_for(lambda: (state_dir / "coder-1-1.txt").exists() and (state_dir / "coder-2-1.txt").exists())
    began = time.monotonic()
    done = specflux(project, "flow", "stop")
    assert done.returncode == 0, done.stderr
    out, err = proc.communicate(timeout=patience(60))
    assert time.monotonic() - began < patience(20), "stop waited for the agents to finish"
    assert status(project)["status"] == "user_exit"
    no_lanes_left(project)
    assert not (project / "NOTES.md").exists()


def test_ctrl_c_stops_the_lanes_agents_and_resume_finishes_the_run(project, tmp_path):
    env = plan(tmp_path, coder__1=[{**APPLES, "sleep": 600}, APPLES], coder__2=[{**PEARS, "sleep": 600, "write": {"PEARS.md": "p\n"}},
                                                                              {**PEARS, "write": {"PEARS.md": "p\n"}}],
               coder__3=[INDEX])
    proc = _background(project, env, "--parallel", "2")
    state_dir = tmp_path / "agent-state"
    _wait_for(lambda: (state_dir / "coder-1-1.txt").exists() and (state_dir / "coder-2-1.txt").exists())
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=patience(60))
    assert proc.returncode == 130, "Ctrl-C exits 130, as the README says"
    assert time.monotonic() - began < patience(20), "Ctrl-C waited for the agents to finish"
    assert not (state_dir / "coder-1-1.times").exists()  # the agents were stopped, not waited for
    state = status(project)
    assert state["status"] == "paused" and state["pausedFor"] == "user"
    done = specflux(project, "flow", "resume", env=env, timeout=180)
    assert done.returncode == 0, done.stderr + done.stdout
    assert all(task_status(project, t) == "complete" for t in "123")
    no_lanes_left(project)


def test_a_merge_while_the_users_merge_is_in_progress_waits_for_the_other_lanes_then_pauses(project, tmp_path):
    (project / "README.md").write_text("# project, on main\n")
    git(project, "commit", "-q", "-am", "main's README")
    git(project, "checkout", "-q", "-b", "side", "HEAD~1")
    (project / "README.md").write_text("# project, on side\n")
    git(project, "commit", "-q", "-am", "side's README")
    git(project, "checkout", "-q", "main")
    env = plan(tmp_path, coder__1=[{**APPLES, "sleep": 0.2}], coder__2=[{**PEARS, "sleep": 4, "write": {"PEARS.md": "p\n"}}])
    proc = _background(project, env, "--parallel", "2", "1", "2")
    state_dir = tmp_path / "agent-state"
    _wait_for(lambda: (state_dir / "coder-2-1.txt").exists())
    subprocess.run(["git", "merge", "-q", "side"], cwd=project, capture_output=True)  # conflicts: in progress
    assert (project / ".git" / "MERGE_HEAD").exists()
    _, err = proc.communicate(timeout=120)
    state = status(project)
    assert state["status"] == "paused" and state["pausedFor"].startswith("git: a merge is in progress"), err
    assert state["taskAttempts"] == {"1": 1, "2": 1} and state["metrics"]["totalReviews"] == 2, err  # lane 2 finished
    assert (project / ".git" / "MERGE_HEAD").exists()  # the user's merge, untouched
    git(project, "merge", "--abort")
    done = specflux(project, "flow", "resume", env=env, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert task_status(project, "1") == task_status(project, "2") == "complete"
    assert state_dir.joinpath("coder-2.count").read_text() == "1"  # nothing was run twice
    no_lanes_left(project)


def test_stopping_a_paused_parallel_run_removes_its_lanes(project, tmp_path):
    env = plan(tmp_path, coder__1=[{**APPLES, "sleep": 600}], coder__2=[{**PEARS, "sleep": 600}])
    proc = _background(project, env, "--parallel", "2", "1", "2")
    state_dir = tmp_path / "agent-state"
    _wait_for(lambda: (state_dir / "coder-1-1.txt").exists() and (state_dir / "coder-2-1.txt").exists())
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert status(project)["status"] == "paused"
    assert len(list((project / ".specflux" / "worktrees").iterdir())) == 1  # the run's folder of lanes
    done = specflux(project, "flow", "stop")
    assert done.returncode == 0 and "run stopped" in done.stdout
    no_lanes_left(project)


def _sdk_lanes(api, route_tasks: dict[str, tuple[str, str]]):
    """The scripted Messages API for lanes: per task, a coder that writes one file and hands over,
    and a reviewer that approves; requests routed by the task and role they are for."""
    import re

    from specflux.agent.scripted import Reply, call

    def route(body: dict) -> tuple[str, str]:
        first = "\n".join(b.get("text", "") for b in body["messages"][0]["content"])
        role = "reviewer" if any(t["name"] == "submit_review" for t in body["tools"]) else "coder"
        return re.search(r"# Task #(\d+)", first).group(1), role

    scripts = {}
    for task, (name, text) in route_tasks.items():
        scripts[(task, "coder")] = [
            Reply(calls=[call("write_file", path=name, content=text), call("check_criterion", index=1)]),
            Reply(calls=[call("end_session", did=[f"Wrote {name}"], issues="", next="",
                              chain_output={"summary": f"{name} written", "downstream": ""})])]
        scripts[(task, "reviewer")] = [Reply(calls=[call("submit_review", approved=True, issues=[],
                                                         criteria_results=[{"criterion": "1", "met": True}])])]
    return api(scripts, route=route)


def test_lanes_through_the_real_sdk_run_their_sessions_at_once_and_merge(project, api, capsys):
    """The default `--agent anthropic`, in-process against the scripted Messages API: the coder and
    reviewer sessions of two lanes, in their worktrees and threads, each recorded, each merged."""
    server = _sdk_lanes(api, {"1": ("APPLES.md", "apples\n"), "2": ("PEARS.md", "pears\n")})
    code, out, err = run(capsys, project, "flow", "start", "1", "2", "--parallel", "2")
    assert code == 0, out + err
    assert (project / "APPLES.md").read_text() == "apples\n" and (project / "PEARS.md").read_text() == "pears\n"
    assert server.served == {("1", "coder"): 2, ("1", "reviewer"): 1, ("2", "coder"): 2, ("2", "reviewer"): 1}
    assert task_status(project, "1") == task_status(project, "2") == "complete"
    runs = sorted((project / ".specflux" / "runs").iterdir())
    assert len(list((runs[-1] / "recordings").glob("*.jsonl"))) == 4  # every session recorded
    no_lanes_left(project)


def test_lanes_share_what_is_left_of_the_runs_token_budget(project, api, capsys):
    """Two lanes at once each get half of what the run has left: of 300 tokens, 150 for a session,
    which stops after its second reply (240 tokens), not its third."""
    import re

    from specflux.agent.scripted import Reply, call

    def route(body: dict) -> tuple[str, str]:
        first = "\n".join(b.get("text", "") for b in body["messages"][0]["content"])
        return re.search(r"# Task #(\d+)", first).group(1), "coder"

    reads = [Reply(calls=[call("read_file", path="README.md")]) for _ in range(3)]  # 120 tokens each
    server = api({("1", "coder"): list(reads), ("2", "coder"): list(reads)}, route=route)
    code, out, err = run(capsys, project, "flow", "start", "1", "2", "--parallel", "2", "--token-budget", "300")
    assert code == 1 and "token_budget" in out, out + err
    run_dir = sorted((project / ".specflux" / "runs").iterdir())[-1]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    used = [e["usage"]["inputTokens"] + e["usage"]["outputTokens"] for e in events
            if e["type"] == "step_finished" and e["kind"] == "coder"]
    assert used and max(used) <= 240, used  # alone, a session would have had all 300 and made a third call
    assert sum(server.served.values()) <= 5
    no_lanes_left(project)


def test_a_parallel_run_replays_offline_in_the_order_its_results_came(project, api, capsys, tmp_path, monkeypatch):
    _sdk_lanes(api, {"1": ("APPLES.md", "apples\n"), "2": ("PEARS.md", "pears\n"), "3": ("INDEX.md", "index\n")})
    code, out, err = run(capsys, project, "flow", "start", "--parallel", "2")
    assert code == 0, out + err
    run_id = out.split()[0]
    monkeypatch.delenv("ANTHROPIC_BASE_URL")  # offline: nothing to talk to
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    into = tmp_path / "replayed"
    code, out, err = run(capsys, project, "flow", "replay", run_id, "--into", str(into))
    assert code == 0, out + err
    assert f"replay of {run_id} matches" in out
    for name in ("APPLES.md", "PEARS.md", "INDEX.md"):
        assert (into / name).read_text() == (project / name).read_text()
    assert not (into / ".specflux" / "worktrees").exists()


# --------------------------------------------------------------------- merging, at the library level


def _lane(repo: Path, name: str, path: str, text: str) -> str:
    """A branch off main that writes `path`."""
    git(repo, "branch", name, "main")
    wt = repo.parent / f"wt-{name.replace('/', '-')}"
    git(repo, "worktree", "add", "-q", str(wt), name)
    (wt / path).write_text(text)
    git(wt, "add", path)
    git(wt, "commit", "-q", "-m", f"{name} writes {path}")
    git(repo, "worktree", "remove", "--force", str(wt))
    return name


def test_a_users_merge_in_progress_is_never_touched(git_repo):
    from specflux.flow.lanes.worktrees import UserBusy, Worktrees

    (git_repo / "a.txt").write_text("base\n")
    git(git_repo, "add", "a.txt")
    git(git_repo, "commit", "-q", "-m", "a")
    git(git_repo, "checkout", "-q", "-b", "theirs")
    (git_repo / "a.txt").write_text("theirs\n")
    git(git_repo, "commit", "-q", "-am", "theirs")
    git(git_repo, "checkout", "-q", "main")
    (git_repo / "a.txt").write_text("ours\n")
    git(git_repo, "commit", "-q", "-am", "ours")
    lane = _lane(git_repo, "specflux/r1/1-s1", "b.txt", "lane\n")
    subprocess.run(["git", "merge", "theirs"], cwd=git_repo, capture_output=True)  # conflicts: in progress
    before = (git_repo / "a.txt").read_bytes(), git(git_repo, "rev-parse", "HEAD")
    with pytest.raises(UserBusy, match="a merge is in progress"):
        Worktrees(git_repo, "r1").merge(lane, "main", "merge the lane")
    assert (git_repo / ".git" / "MERGE_HEAD").exists()
    assert ((git_repo / "a.txt").read_bytes(), git(git_repo, "rev-parse", "HEAD")) == before


def test_a_merge_into_a_branch_that_is_not_checked_out_waits(git_repo):
    from specflux.flow.lanes.worktrees import UserBusy, Worktrees

    lane = _lane(git_repo, "specflux/r1/1-s1", "b.txt", "lane\n")
    git(git_repo, "checkout", "-q", "-b", "elsewhere")
    before = git(git_repo, "rev-parse", "main")
    with pytest.raises(UserBusy, match="has branch elsewhere checked out: check out main"):
        Worktrees(git_repo, "r1").merge(lane, "main", "merge the lane")
    assert git(git_repo, "rev-parse", "main") == before and not (git_repo / "b.txt").exists()


def test_a_merge_keeps_the_users_uncommitted_changes_and_refuses_to_overwrite_them(git_repo):
    from specflux.flow.lanes.worktrees import Worktrees

    (git_repo / "mine.txt").write_text("mine\n")
    git(git_repo, "add", "mine.txt")
    git(git_repo, "commit", "-q", "-m", "mine")
    (git_repo / "mine.txt").write_text("mine, edited and not committed\n")
    first = _lane(git_repo, "specflux/r1/1-s1", "lane.txt", "lane\n")
    result = Worktrees(git_repo, "r1").merge(first, "main", "merge lane 1")
    assert result.merged and git(git_repo, "rev-parse", "HEAD").strip() == result.commit
    assert (git_repo / "mine.txt").read_text() == "mine, edited and not committed\n"
    assert (git_repo / "lane.txt").read_text() == "lane\n"
    second = _lane(git_repo, "specflux/r1/2-s2", "mine.txt", "the lane's version\n")
    result = Worktrees(git_repo, "r1").merge(second, "main", "merge lane 2")
    assert not result.merged and not result.conflicts and "could not be checked out" in result.reason
    assert (git_repo / "mine.txt").read_text() == "mine, edited and not committed\n"
    assert git(git_repo, "log", "-1", "--format=%s").strip() == "merge lane 1"


def test_a_task_id_git_would_refuse_in_a_branch_name_still_gets_a_lane(git_repo):
    from specflux.flow.lanes.worktrees import Worktrees

    trees = Worktrees(git_repo, "r1")
    path, branch = trees.open("3..1.lock", "s4", git(git_repo, "rev-parse", "HEAD").strip())
    assert (path / "README.md").is_file() and branch == "specflux/r1/3--1-lock-s4"
    assert trees.clean() and not path.exists()


def test_a_conflicting_merge_is_aborted_and_names_the_paths(git_repo):
    from specflux.flow.lanes.worktrees import Worktrees

    a = _lane(git_repo, "specflux/r1/1-s1", "same.txt", "one\n")
    b = _lane(git_repo, "specflux/r1/2-s2", "same.txt", "two\n")
    trees = Worktrees(git_repo, "r1")
    assert trees.merge(a, "main", "a").merged
    head = git(git_repo, "rev-parse", "HEAD")
    result = trees.merge(b, "main", "b")
    assert not result.merged and result.conflicts == ("same.txt",)
    assert git(git_repo, "rev-parse", "HEAD") == head and (git_repo / "same.txt").read_text() == "one\n"
    assert trees.clean() and git(git_repo, "branch", "--list", "specflux/*").strip() == ""


def test_runs_started_in_one_second_are_ordered_by_their_first_event(tmp_path):
    from specflux.flow.record.run import Run
    from specflux.store.workspace import Workspace

    ws, _ = Workspace.init(tmp_path)
    first = Run.create(ws, {"tasks": []}, run_id="run-20260101-120000-ffff")
    time.sleep(0.01)  # (events are stamped to the millisecond: runs made within one are not told apart)
    second = Run.create(ws, {"tasks": []}, run_id="run-20260101-120000-0000")  # sorts first by name
    assert Run.ids(ws) == [first.id, second.id]
    assert Run.find(ws).id == second.id  # the latest


def test_flow_stop_keeps_each_unfinished_lanes_work_on_a_branch(project, tmp_path):
    half = "printf 'half done\\n' > {name} && touch {written} && sleep 600"
    written = {name: tmp_path / f"{name}.written" for name in ("APPLES.md", "PEARS.md")}
    env = plan(tmp_path, coder__1=[{**APPLES, "sh": half.format(name="APPLES.md", written=written["APPLES.md"])}],
               coder__2=[{**PEARS, "sh": half.format(name="PEARS.md", written=written["PEARS.md"])}])
    proc = _background(project, env, "--parallel", "2", "1", "2")
    state_dir = tmp_path / "agent-state"
    _wait_for(lambda: (state_dir / "coder-1-1.txt").exists() and (state_dir / "coder-2-1.txt").exists())
    _wait_for(lambda: all(path.exists() for path in written.values()))  # the agents have written their half
    assert specflux(project, "flow", "stop").returncode == 0
    proc.communicate(timeout=60)
    state = status(project)
    run_id = state["runId"]
    assert state["status"] == "user_exit"
    kept = state["stoppedBranches"]
    assert kept == {"1": f"specflux/stopped/{run_id}/1", "2": f"specflux/stopped/{run_id}/2"}
    assert git(project, "show", f"{kept['1']}:APPLES.md") == "half done\n", "uncommitted work committed and kept"
    assert git(project, "show", f"{kept['2']}:PEARS.md") == "half done\n"
    no_lanes_left(project)
    assert task_status(project, "1") == "pending" and task_status(project, "2") == "pending"
    shown = specflux(project, "flow", "status").stdout
    assert f"task 1's unfinished work is kept on {kept['1']}" in shown
    assert f"unfinished work kept: task 1 on {kept['1']}" in specflux(project, "flow", "log").stdout
    resumed = specflux(project, "flow", "resume")
    assert f"git merge {kept['1']}" in resumed.stderr, resumed.stderr


@pytest.mark.parametrize("approved", [True, False], ids=["approving", "rejecting"])
def test_a_lanes_review_killed_after_its_commit_resumes_with_its_verdict(project, tmp_path, approved):
    """A lane's reviewer writes its verdict down before its commit, as a one-lane run's does
    (flow/steps/roles.py `_accepting`): `kill -9` after that commit, before the step's summary,
    and the resumed run takes the verdict from the note: the review is not asked for again, and
    is not read as a review that gave none."""
    verdicts = [{"approved": True}] if approved else [
        {"approved": False, "issues": [{"severity": "major", "description": "NOTES.md should say how many"}]},
        {"approved": True}]
    env = plan(tmp_path, coder__2=[{**PEARS, "sleep": 0}, {**PEARS, "sleep": 0}], reviewer__2=verdicts)
    killed = start(project, {**env, "SPECFLUX_CRASH_AT": "atomic:s9-1.session.json"}, "2",  # (s9: the first review)
                   "--parallel", "2")
    assert killed.returncode == -9, killed.stdout + killed.stderr
    again = specflux(project, "flow", "resume", env={**env, "SPECFLUX_CRASH_AT": ""}, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert status(project)["status"] == "completed" and task_status(project, "2") == "complete"
    state = tmp_path / "agent-state"
    assert (state / "reviewer-2.count").read_text() == str(len(verdicts)), "the killed review ran once"
    assert (state / "coder-2.count").read_text() == ("1" if approved else "2")
    if not approved:  # sent back with the reviewer's issues, not "the review gave no verdict"
        retry = context(tmp_path, "coder", "2", 2)
        why = retry[retry.index("## Why "):]
        assert why.startswith("## Why the last attempt was sent back") and "The reviewer requested changes" in why, why
        assert "NOTES.md should say how many" in why, why
    no_lanes_left(project)
