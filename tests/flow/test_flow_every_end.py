"""Every end keeps the work (docs/runs.md): a run that ends on a limit (money, tokens, steps), on an
error inside a lane or on `flow stop` keeps each unfinished lane's work on
`specflux/stopped/<run>/<task>`, its sessions counted by `specflux stats` and `specflux log`; a
budget is checked before each session of every lane, with what is left shared among the sessions
in flight, and the last line says by how much the run went over.

The agent is tests/fixtures/fake_flow_agent.py; its `sh` writes a file and prints the usage line
Claude Code would (a `result` with its own cost: $0.04, 6,400 budgeted tokens)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import fake_agent_plan as plan
from helpers import run
from helpers import specflux_process as specflux
from test_flow_budget import printing
from test_flow_parallel import start, status, task_status


def result(cost: float) -> dict:
    return {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "total_cost_usd": cost,
            "usage": {"input_tokens": 5000, "output_tokens": 400, "cache_read_input_tokens": 0,
                      "cache_creation_input_tokens": 1000}}


@pytest.fixture
def four(git_repo: Path, capsys) -> Path:
    """Four independent tasks, committed."""
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    for fruit in ("apples", "pears", "plums", "figs"):
        assert run(capsys, git_repo, "new", f"Notes on {fruit}", "--ac", f"{fruit.upper()}.md exists")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


FRUIT = {"1": "APPLES", "2": "PEARS", "3": "PLUMS", "4": "FIGS"}


def coders(tmp_path: Path, cost: float = 0.04) -> dict[str, str]:
    """Each task's coder writes its file, says it cost `cost`, and ticks its criterion; the reviewers
    approve and cost as much."""
    state = tmp_path / "agent-state"
    entries = {}
    for task, name in FRUIT.items():
        # every lane's coder waits until all four have started: four sessions in flight at once
        wait = " && ".join(f"while [ ! -e {shlex.quote(str(state / f'coder-{t}-1.txt'))} ]; do sleep 0.05; done"
                           for t in FRUIT)
        sh = f"printf '{name.lower()}\\n' > {name}.md && {wait}; {printing(result(cost))}"
        entries[f"coder__{task}"] = [{"sh": sh, "check": True, "chain": f"{name}.md written"}]
    entries["reviewer"] = [{"approved": True, "sh": printing(result(cost))}]
    return plan(tmp_path, **entries)


def kept_everything(repo: Path, state: dict, tasks: str = "1234") -> None:
    """Each task's lane kept on its branch, with its file and its session; the task files pending."""
    run_id = state["runId"]
    assert state["stoppedBranches"] == {t: f"specflux/stopped/{run_id}/{t}" for t in tasks}, state.get("stoppedBranches")
    for t in tasks:
        branch = state["stoppedBranches"][t]
        assert git(repo, "show", f"{branch}:{FRUIT[t]}.md") == f"{FRUIT[t].lower()}\n"
        assert "Specflux-Role: coder" in git(repo, "log", "-1", "--format=%(trailers)", f"{branch}", "--grep=Specflux-Stop")
        assert task_status(repo, t) == "pending"
    assert not [b for b in git(repo, "branch", "--list", "specflux/*").split()
                if b.startswith("specflux/") and not b.startswith("specflux/stopped/")]


def sessions_counted(repo: Path, tasks: str = "1234") -> dict:
    stats = json.loads(specflux(repo, "stats", "--json").stdout)
    for t in tasks:
        assert stats["tasks"][t]["sessions"] >= 1, stats
    for t in tasks:
        shown = specflux(repo, "log", t).stdout
        assert f"task {t}: session 1" in shown and "6,400 tok" in shown, shown
    return stats


def test_budget_usd_in_four_lanes_keeps_every_lane_and_says_the_overshoot(four, tmp_path):
    done = start(four, coders(tmp_path), "--parallel", "4", "--budget-usd", "0.05", "--allow-unmetered")
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(four)
    assert (state["status"], state["failureReason"]) == ("failed", "budget_usd")
    assert state["metrics"]["costUsd"] == pytest.approx(0.16), "four sessions in flight at most: no review started"
    assert not (tmp_path / "agent-state" / "reviewer-1.count").exists()
    kept_everything(four, state)
    stats = sessions_counted(four)
    assert stats["total"]["sessions"] == 4 and stats["total"]["costUsd"] == pytest.approx(0.16)
    last = done.stdout.strip().splitlines()[-1]
    assert "over the budget by $0.1100" in last and "3 sessions were in flight" in last, done.stdout
    assert "over the budget by $0.1100" in specflux(four, "flow", "log").stdout


def test_token_budget_in_four_lanes_keeps_every_lane(four, tmp_path):
    done = start(four, coders(tmp_path), "--parallel", "4", "--token-budget", "10000")
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(four)
    assert state["failureReason"] == "token_budget"
    assert state["metrics"]["inputTokens"] == 4 * 5000, "no session started once the budget was spoken for"
    kept_everything(four, state)
    sessions_counted(four)
    assert "over the budget by 15,600 tokens" in done.stdout.strip().splitlines()[-1], done.stdout


def test_max_iterations_in_four_lanes_keeps_every_lane(four, tmp_path):
    done = start(four, coders(tmp_path, cost=0.0), "--parallel", "4", "--max-iterations", "4")
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(four)
    assert state["failureReason"] == "max_iterations"
    kept_everything(four, state)
    sessions_counted(four)


def test_budget_usd_in_two_lanes(four, tmp_path):
    env = coders(tmp_path)
    # two lanes: tasks 1 and 2 only (the coders wait for each other)
    wait_for_two = {}
    state_dir = tmp_path / "agent-state"
    for task in "12":
        name = FRUIT[task]
        wait = " && ".join(f"while [ ! -e {shlex.quote(str(state_dir / f'coder-{t}-1.txt'))} ]; do sleep 0.05; done"
                           for t in "12")
        wait_for_two[f"coder__{task}"] = [{"sh": f"printf '{name.lower()}\\n' > {name}.md && {wait}; "
                                                 f"{printing(result(0.04))}", "check": True, "chain": "x"}]
    env = plan(tmp_path, **wait_for_two, reviewer=[{"approved": True, "sh": printing(result(0.04))}])
    done = start(four, env, "--parallel", "2", "1", "2", "--budget-usd", "0.05", "--allow-unmetered")
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(four)
    assert state["metrics"]["costUsd"] == pytest.approx(0.08)
    kept_everything(four, state, "12")
    sessions_counted(four, "12")
    assert "over the budget by $0.0300" in done.stdout.strip().splitlines()[-1]


def test_a_run_its_last_session_took_past_the_budget_completes_and_says_the_overshoot(four, tmp_path):
    # the reviewer hands in its verdict, then prints what it spent, past the $0.01 left: the work is
    # done (the task accepted, exit 0), and the last line says by how much the budget was passed
    env = plan(tmp_path, coder__1=[{"sh": "printf 'apples\\n' > APPLES.md; " + printing(result(0.04)), "check": True,
                                    "chain": "x"}], reviewer=[{"approved": True, "then": printing(result(0.04))}])
    done = start(four, env, "1", "--budget-usd", "0.05", "--allow-unmetered")
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(four)
    assert state["status"] == "completed" and state["metrics"]["costUsd"] == pytest.approx(0.08)
    last = done.stdout.strip().splitlines()[-1]
    assert "over the budget by $0.0300" in last and "1 session was in flight" in last, done.stdout


def test_budget_usd_in_one_lane_says_the_overshoot(four, tmp_path):
    # the reviewer prints what it spent, past the $0.01 left, then waits: it is stopped there, before it
    # hands in (without the wait, a busy machine let its hand-in land before the stop: accepted, exit 0)
    env = plan(tmp_path, coder__1=[{"sh": "printf 'apples\\n' > APPLES.md; " + printing(result(0.04)), "check": True,
                                    "chain": "x"}], reviewer=[{"approved": True, "sh": printing(result(0.04), then="sleep 20")}])
    done = start(four, env, "1", "--budget-usd", "0.05", "--allow-unmetered")
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(four)
    assert state["metrics"]["costUsd"] == pytest.approx(0.08)
    last = done.stdout.strip().splitlines()[-1]
    assert "over the budget by $0.0300" in last and "1 session was in flight" in last, done.stdout
    assert sessions_counted(four, "1")["total"]["sessions"] == 2


def test_an_error_in_one_lane_keeps_the_other_lanes_work(four, tmp_path):
    state_dir = tmp_path / "agent-state"
    marker = state_dir / "pears-half-done"
    # task 1's lane cannot be set up (its setup fails, once task 2's coder has written half its work)
    setup = (f"case \"$(git rev-parse --abbrev-ref HEAD)\" in */1-*) "
             f"while [ ! -e {shlex.quote(str(marker))} ]; do sleep 0.05; done; exit 4;; esac")
    with open(four / ".specflux" / "config.toml", "a") as f:
        f.write(f"\n[flow]\nworktree_setup = {json.dumps(setup)}\n")
    git(four, "commit", "-q", "-am", "setup")
    env = plan(tmp_path, coder__2=[{"sh": f"printf 'pears\\n' > PEARS.md && touch {shlex.quote(str(marker))} && sleep 60"}])
    done = start(four, env, "--parallel", "2", "1", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(four)
    assert state["failureReason"] == "error" and "exited with 4" in done.stderr
    run_id = state["runId"]
    assert state["stoppedBranches"] == {"2": f"specflux/stopped/{run_id}/2"}
    assert git(four, "show", f"specflux/stopped/{run_id}/2:PEARS.md") == "pears\n"
    assert task_status(four, "2") == "pending"
    assert f"unfinished work kept: task 2 on specflux/stopped/{run_id}/2" in specflux(four, "flow", "log").stdout
