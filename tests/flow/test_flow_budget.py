"""Budgets in money and tokens for runs of agent CLIs: `flow start --budget-usd` and `[flow]
budget_usd` stop a run between steps once it has spent its budget (`failureReason: "budget_usd"`,
with the numbers); a command agent in flight is stopped when its own streamed usage passes what
the run has left; a session whose usage cannot be read is `unknown`, never 0; `flow status` and
`specflux stats` show what was spent.

The agent is tests/fixtures/fake_flow_agent.py; its `sh` prints the usage lines a CLI would
(Claude Code's `stream-json`: an `assistant` event per message, a `result` with its own cost).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from conftest import git
from helpers import fake_agent_plan as plan
from helpers import specflux_process as specflux
from patience import patience
from test_flow import DOCS, FIX, WRONG, project, start, status, trailers  # noqa: F401


def printing(*events: dict, then: str = "") -> str:
    """A shell command printing `events` as JSON lines (what the agent CLI writes), then `then`."""
    code = "import json,sys;[print(json.dumps(e), flush=True) for e in json.loads(sys.argv[1])]"
    line = f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} {shlex.quote(json.dumps(list(events)))}"
    return f"{line}; {then}" if then else line


def result(cost: float) -> dict:
    """Claude Code's closing `result`, with its own figure for the cost."""
    return {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "total_cost_usd": cost,
            "usage": {"input_tokens": 5000, "output_tokens": 400, "cache_read_input_tokens": 20000,
                      "cache_creation_input_tokens": 1000}}


# Claude Code's stream-json: the model, then one message of 100,000 input tokens ($0.30 at
# claude-sonnet-4-5's $3 per million).
EXPENSIVE = ({"type": "system", "subtype": "init", "model": "claude-sonnet-4-5"},
             {"type": "assistant", "message": {"id": "msg_1", "model": "claude-sonnet-4-5",
                                               "usage": {"input_tokens": 100000, "output_tokens": 0}}})


def last_session(repo: Path) -> dict[str, str]:
    """The trailers of the last session's commit (the run's own history commit may come after it)."""
    sha = git(repo, "log", "-1", "--format=%H", "--grep=^Specflux-Stop: ").strip()
    return trailers(repo, sha)


def test_budget_usd_stops_the_run_between_steps_with_the_numbers(project, tmp_path):
    wrong = {"write": {"src/calc.py": WRONG + "# again\n"}, "sh": printing(result(0.3))}
    env = plan(tmp_path, coder__1=[wrong])
    done = start(project, env, "1", "--budget-usd", "0.5", "--allow-unmetered")  # --agent command: no reader named
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(project)
    assert state["budgetUsd"] == 0.5
    assert (state["status"], state["failureReason"]) == ("failed", "budget_usd")
    assert state["failureDetail"] == ("the run spent $0.6000 of its budget of $0.50; over the budget by $0.1000: "
                                      "1 session was in flight when it was reached")
    assert state["metrics"]["costUsd"] == 0.6 and state["taskMetrics"]["1"]["costUsd"] == 0.6
    assert state["metrics"]["inputTokens"] == 10000 and state["metrics"]["usageUnknown"] == 0
    assert state["iteration"] == 2, "the third step never started"
    narrative = specflux(project, "flow", "log").stdout
    assert "run failed (budget_usd: the run spent $0.6000 of its budget of $0.50; over the budget by $0.1000" in narrative
    shown = specflux(project, "flow", "status").stdout
    assert "cost $0.6000 of a budget of $0.50" in shown, shown
    t = last_session(project)
    assert t.get("Specflux-Cost-Usd") == "0.300000" and t["Specflux-Input-Tokens"] == "5000", git(project, "log", "-4", "--format=%s%n%(trailers)")
    assert "Specflux-Model" not in t, "the result named no model"
    stats = json.loads(specflux(project, "stats", "--json").stdout)
    assert stats["tasks"]["1"]["costUsd"] == 0.6 and stats["tasks"]["1"]["sessions"] == 2
    assert stats["runs"][state["runId"]]["cacheReadTokens"] == 40000 and stats["total"]["costUsd"] == 0.6
    assert stats["pricingDate"]
    text = specflux(project, "stats").stdout
    assert "$0.6000" in text and "total" in text, text
    log = specflux(project, "log", "1").stdout
    assert "SPENT" in log and "26,400 tok $0.3000" in log, log


def test_an_agent_in_flight_is_stopped_when_its_streamed_cost_passes_what_is_left(project, tmp_path):
    with open(project / ".specflux" / "config.toml", "a") as f:
        f.write("\n[flow]\nbudget_usd = 0.1\n")
    git(project, "commit", "-qam", "a budget in money")
    env = plan(tmp_path, coder__1=[{"sh": printing(*EXPENSIVE, then="sleep 600")}])
    began = time.monotonic()
    done = start(project, env, "1", "--allow-unmetered")
    took = time.monotonic() - began
    assert done.returncode == 1, done.stdout + done.stderr
    assert took < patience(40), f"the agent was left running: {took:.0f}s"
    state = status(project)
    assert (state["budgetUsd"], state["failureReason"]) == (0.1, "budget_usd")
    assert state["failureDetail"].startswith("the run spent $0.3000 of its budget of $0.10; over the budget by $0.2000")
    t = last_session(project)
    assert (t["Specflux-Stop"], t["Specflux-Model"], t["Specflux-Cost-Usd"]) == ("budget_usd", "claude-sonnet-4-5",
                                                                               "0.300000")
    session = json.loads(specflux(project, "show", "1", "--json").stdout)["sessions"][-1]
    assert session["usage"]["cost_usd"] == 0.3 and session["usage"]["model"] == "claude-sonnet-4-5"
    assert "past its budget of $0.1000" in session["issues"]


def test_a_token_budget_stops_a_command_agent_in_flight_too(project, tmp_path):
    env = plan(tmp_path, coder__1=[{"sh": printing(*EXPENSIVE, then="sleep 600")}])
    began = time.monotonic()
    done = start(project, env, "1", "--token-budget", "50000")
    assert done.returncode == 1, done.stdout + done.stderr
    assert time.monotonic() - began < patience(40)
    state = status(project)
    assert state["failureReason"] == "token_budget"
    assert last_session(project)["Specflux-Stop"] == "token_budget"


def test_usage_an_agent_does_not_print_is_unknown_never_zero(project, tmp_path):
    env = plan(tmp_path, coder__1=[FIX], coder__2=[DOCS])  # the fake agent prints no usage at all
    done = start(project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(project)
    assert state["metrics"]["usageUnknown"] == 4 and state["metrics"]["inputTokens"] == 0  # 2 coders, 2 reviews
    shown = specflux(project, "flow", "status").stdout
    assert "spent: tokens unknown; cost unknown" in shown and " 0 input" not in shown, shown
    t = last_session(project)
    assert t["Specflux-Usage"] == "unknown" and "Specflux-Input-Tokens" not in t
    sessions = json.loads(specflux(project, "show", "1", "--json").stdout)["sessions"]
    assert all(s["usage"] == {"unknown": True} for s in sessions), sessions
    stats = json.loads(specflux(project, "stats", "--json").stdout)
    assert stats["total"]["usageUnknown"] == 4 and stats["total"]["costUsd"] == 0.0
    assert "unknown" in specflux(project, "stats").stdout
