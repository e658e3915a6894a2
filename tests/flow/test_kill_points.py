"""`kill -9` where it hurts: a `--parallel` run killed in the middle of a lane's merge into the
user's branch, and in the middle of ticking a spec-kit `tasks.md`, then `flow resume`.

The kills are real SIGKILLs, made exactly at named points by `SPECFLUX_CRASH_AT`
(specflux/crashpoint.py), plus a loop of kills at random moments. After each resume: the run
completed as it would have, each lane's work is on the branch exactly once, `tasks.md` is ticked
(byte-identical otherwise, committed), and no worktree, branch, hold or git lock is left."""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git
from helpers import completions
from helpers import fake_agent_plan as plan
from helpers import run
from helpers import specflux_process as specflux

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"

TASKS_MD = (
    "# Tasks: Fruit\r\n\r\n"  # CRLF: a tick keeps the file's own line endings
    "## Phase 1: Core\r\n\r\n"
    "- [ ] T001 [P] Write apples in APPLES.md\r\n"
    "- [ ] T002 [P] Write pears in PEARS.md\r\n"
    "- [ ] T003 [P] Write plums in PLUMS.md\r\n\r\n"
    "## Notes\r\n\r\nKeep this line as it is.\r\n"
)
FRUIT = {"T001": "APPLES.md", "T002": "PEARS.md", "T003": "PLUMS.md"}


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """Three independent tasks imported from a spec-kit tasks.md, committed."""
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    (git_repo / "tasks.md").write_bytes(TASKS_MD.encode())
    code, out, err = run(capsys, git_repo, "import", str(git_repo / "tasks.md"))
    assert code == 0, err
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def fruit_plan(tmp_path: Path, sleep: float = 0.0) -> dict:
    return plan(tmp_path, **{f"coder__{t}": [{"write": {name: f"{name[:-3].lower()}\n"}, "check": True,
                                              "chain": f"{name} written", "sleep": sleep}]
                             for t, name in FRUIT.items()})


def agent_cmd() -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"


def start(repo: Path, env: dict, crash_at: str | None) -> subprocess.CompletedProcess:
    extra = {"SPECFLUX_CRASH_AT": crash_at} if crash_at else {}
    return specflux(repo, "flow", "start", "--agent", "command", "--cmd", agent_cmd(), "--parallel", "2",
                    env={**env, **extra}, timeout=180)


def resume(repo: Path, env: dict) -> subprocess.CompletedProcess:
    env = {**env, "SPECFLUX_CRASH_AT": ""}
    return specflux(repo, "flow", "resume", env=env, timeout=180)


def ticked(text: str, tasks=FRUIT) -> str:
    for t in tasks:
        text = text.replace(f"- [ ] {t} ", f"- [x] {t} ")
    return text


def ticked_or_not(repo: Path) -> None:
    """Each line of tasks.md as it was imported, or that line ticked: never anything else."""
    now = (repo / "tasks.md").read_bytes().decode().split("\r\n")
    for before, after in zip(TASKS_MD.split("\r\n"), now, strict=True):
        assert after in (before, ticked(before)), f"{after!r} is not {before!r} nor ticked"


def assert_finished_cleanly(repo: Path, hold_files: bool = False) -> None:
    state = json.loads(specflux(repo, "flow", "status", "--json").stdout)
    assert state["status"] == "completed", state
    log = git(repo, "log", "--format=%H %P%x09%s", "main").splitlines()
    for task, name in FRUIT.items():
        merges = [line for line in log if f"\tMerge task {task}:" in line]
        assert len(merges) == 1, f"task {task} merged {len(merges)} times:\n" + "\n".join(log)
        assert len(merges[0].split("\t")[0].split()) == 3, "a merge commit has two parents"
        changed = git(repo, "log", "--format=%H", "--no-merges", "main", "--", name).split()
        assert len(changed) == 1, f"{name} changed by {len(changed)} commits"
        assert (repo / name).read_bytes() == f"{name[:-3].lower()}\n".encode()
        completions = [line for line in log if f"\ttask {task}: complete" in line]
        assert len(completions) == 1, f"task {task} completed {len(completions)} times"
        meta = json.loads(specflux(repo, "show", task, "--json").stdout)["metadata"]
        assert meta["status"] == "complete"
    # tasks.md: every line ticked, nothing else changed, committed
    assert (repo / "tasks.md").read_bytes() == ticked(TASKS_MD).encode()
    assert subprocess.run(["git", "show", "HEAD:tasks.md"], cwd=repo, capture_output=True).stdout == \
        ticked(TASKS_MD).encode()
    no_leftovers(repo, hold_files)
    lint = specflux(repo, "lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr


def no_leftovers(repo: Path, hold_files: bool = False) -> None:
    status = git(repo, "status", "--porcelain", "--untracked-files=all")
    assert status == "", f"the work tree is not clean:\n{status}"
    assert not (repo / ".specflux" / "worktrees").exists()
    listed = git(repo, "worktree", "list", "--porcelain")
    assert listed.count("worktree ") == 1, listed
    assert git(repo, "branch", "--list", "specflux/*").strip() == ""
    git_locks = [p for p in (repo / ".git").rglob("*.lock") if "specflux" not in p.relative_to(repo / ".git").parts]
    assert not git_locks, git_locks  # (the engine's own lock files live in .git/specflux/: never stale)
    from specflux.flow.record.holds import Holds
    from specflux.store.workspace import Workspace

    assert Holds(Workspace(repo)).held(FRUIT) == {}, "a task is still held"
    holds = Workspace(repo).private_dir / "holds"
    if not hold_files:  # (a kill after the run ended may leave some: stale, their run ended, their process gone)
        assert not holds.is_dir() or not list(holds.glob("*.json")), list(holds.iterdir())
    stray = [p for p in repo.rglob(".*.tmp")]
    assert not stray, stray


MERGE_POINTS = [
    "merge:scratch-made",
    "merge:committed",
    "merge:fast-forwarded",
    "event:step_finished:merge",
    "event:decision:merge",
    "merge:scratch-made@2",
    "merge:committed@2",
    "merge:fast-forwarded@2",
    "merge:fast-forwarded@3",
    "event:step_finished:merge@3",
]
WRITEBACK_POINTS = [
    "writeback:before-write",  # the first completion: nothing written yet
    "writing:tasks.md",  # the task file written, tasks.md not yet
    "writeback:before-write>atomic:task-*-state.md",  # the task file's new text in a temporary file
    "atomic:tasks.md",  # tasks.md's new text in a temporary file, not renamed yet
    "atomic:tasks.md@3",  # (the last completion)
    "wrote:tasks.md",  # tasks.md written, the completion not committed
    "wrote:tasks.md@2",
    "wrote:tasks.md@3",  # the last task's tick written, not committed: no later completion commits it
    "event:task_status:complete",  # the completion committed, not recorded
    "event:task_status:complete@3",
    "recorded:task_status:complete",  # recorded, the steps it leads to not requested yet
]
LANE_POINTS = [
    "atomic:task-T002-state.md",  # in a lane: its coder's session starting, the task file's temp file
    "merge:fast-forwarded>event:step_requested:*",  # the next lane's coder step not yet requested
]
END_POINTS = ["event:status:completed", "clean:removed-one"]
DECISION_POINTS = [  # a step finished (and closed), its decision not yet recorded: it is not asked for again
    "event:decision:reviewer",
    "event:decision:coder@2",
    "event:decision:merge@2",
]
HOLD_POINTS = ["atomic:task-T001.json"]  # the run's hold on a task: its temporary file, not renamed yet


@pytest.mark.parametrize("point", MERGE_POINTS + WRITEBACK_POINTS + LANE_POINTS + END_POINTS + DECISION_POINTS + HOLD_POINTS)
def test_kill_9_at_a_point_then_resume_finishes_the_run_as_it_would_have(project, tmp_path, point):
    env = fruit_plan(tmp_path)
    done = start(project, env, point)
    assert done.returncode == -9, f"the process did not die at {point}: {done.returncode}\n{done.stderr}"
    ticked_or_not(project)
    done = resume(project, env)
    assert done.returncode == 0, done.stderr + done.stdout
    assert_finished_cleanly(project)


def test_kill_9_twice_in_a_row_at_the_same_merge(project, tmp_path):
    env = fruit_plan(tmp_path)
    assert start(project, env, "merge:fast-forwarded").returncode == -9
    again = specflux(project, "flow", "resume", env={**env, "SPECFLUX_CRASH_AT": "merge:fast-forwarded,wrote:tasks.md"},
                     timeout=180)
    assert again.returncode == -9
    done = resume(project, env)
    assert done.returncode == 0, done.stderr + done.stdout
    assert_finished_cleanly(project)


@pytest.mark.parametrize("round_", [1, 2])
def test_kill_9_at_random_moments_then_resume(project, tmp_path, round_):
    """Real kills at random moments of a run whose coders answer quickly (much of its time is
    merges, completions and write-backs), resumed each time, until the run is done."""
    env = fruit_plan(tmp_path, sleep=0.2)
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    kills = 0
    command = ["flow", "start", "--agent", "command", "--cmd", agent_cmd(), "--parallel", "2"]
    for _ in range(20):
        proc = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(project), *command],
                                env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            proc.wait(timeout=rng.uniform(0.4, 1.4))
        except subprocess.TimeoutExpired:
            proc.kill()
            kills += 1
        _, err = proc.communicate()
        assert proc.returncode in (0, -9), f"seed {seed}: exit {proc.returncode}: {err.decode(errors='replace')}"
        if not any((project / ".specflux" / "runs").glob("run-*/events.jsonl")):  # killed before the run existed
            continue                                                               # (a loaded machine): start again
        command = ["flow", "resume"]
        ticked_or_not(project)
        _st = specflux(project, "flow", "status", "--json")
        assert _st.returncode == 0, f"seed {seed}: flow status --json exited {_st.returncode}: {_st.stderr}"
        if json.loads(_st.stdout)["status"] == "completed":
            break
    else:  # (never killed after the run existed, on a very busy machine: started without a kill)
        done = resume(project, env) if command[1] == "resume" else start(project, env, None)
        assert done.returncode == 0, done.stderr + done.stdout
    print(f"seed {seed}: {kills} kills")
    history = git(project, "status", "--porcelain", "--untracked-files=all", "--", ".specflux/runs")
    if history:  # killed after the run ended, before its history was committed: the known gap
        git(project, "add", "--", ".specflux/runs")  # (test_kill_9_after_the_run_ended_...): done here
        git(project, "commit", "-q", "-m", "the run's history", "--", ".specflux/runs")
    assert_finished_cleanly(project, hold_files=True)


def test_kill_9_after_the_run_ended_before_its_history_was_committed(project, tmp_path):
    env = fruit_plan(tmp_path)
    assert start(project, env, "recorded:status:completed").returncode == -9
    done = resume(project, env)
    assert done.returncode == 0, done.stderr + done.stdout
    assert_finished_cleanly(project)


def test_a_merge_that_landed_before_the_kill_is_not_made_again(git_repo):
    """Worktrees.merge of a lane branch already in the user's branch (a kill after the
    fast-forward, before the run recorded it): the merge commit that brought it in, no new one,
    also after the user committed on top of it."""
    from specflux.flow.lanes.worktrees import Worktrees

    trees = Worktrees(git_repo, "run-x")
    path, branch = trees.open("1", "s1", trees.tip("main"))
    (path / "A.md").write_text("a\n")
    git(path, "add", "A.md")
    git(path, "commit", "-q", "-m", "lane work")
    first = trees.merge(branch, "main", "Merge task 1")
    assert first.merged and first.commit == trees.tip("main")
    (git_repo / "B.md").write_text("b\n")  # the user goes on meanwhile
    git(git_repo, "add", "B.md")
    git(git_repo, "commit", "-q", "-m", "mine")
    tip = trees.tip("main")
    again = trees.merge(branch, "main", "Merge task 1")
    assert again.merged and again.commit == first.commit and trees.tip("main") == tip
    assert git(git_repo, "log", "--merges", "--format=%s").splitlines() == ["Merge task 1"]
    assert not (trees.home / "_merge").exists()
    trees.clean()
    no_leftovers(git_repo)


@pytest.mark.parametrize("point", ["event:decision:reviewer", "event:decision:coder@2"])
def test_a_step_done_before_the_kill_is_not_asked_for_again(project, tmp_path, point):
    """Killed after a step finished (and left the open steps) before its decision was recorded:
    the decision before it, whose effects `flow resume` settles first, requested that step — it is
    not requested again (else the task is reviewed, completed and merged twice)."""
    env = fruit_plan(tmp_path)
    done = specflux(project, "flow", "start", "--agent", "command", "--cmd", agent_cmd(),
                    env={**env, "SPECFLUX_CRASH_AT": point}, timeout=180)
    assert done.returncode == -9, f"the process did not die at {point}: {done.returncode}\n{done.stderr}"
    done = resume(project, env)
    assert done.returncode == 0, done.stderr + done.stdout
    (run_dir,) = (project / ".specflux" / "runs").iterdir()
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    requested = [e["stepId"] for e in events if e["type"] == "step_requested"]
    assert len(requested) == len(set(requested)), requested
    assert json.loads(specflux(project, "flow", "status", "--json").stdout)["status"] == "completed"
    log = git(project, "log", "--format=%s").splitlines()
    for task in FRUIT:
        assert completions(project, task) == 1, log
        assert sum(1 for s in log if s.startswith(f"task {task}: session") and "Review" in s) == 1, log
