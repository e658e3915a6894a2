"""Numbers from agents are data, not truth: a run whose agent prints usage that cannot be believed
(`1e400`, `NaN`, negative tokens or cost, JSON nested past any parser's depth) or none at all ends
as it would have, its work committed, the usage `unknown` with the value named in the narrative
and the progress entry, and the budget that could not count it said; a budget in money that the
agent's output cannot feed is refused at the start unless `--allow-unmetered`, and announced.

The agent is tests/fixtures/fake_flow_agent.py run with `--agent command`; its `sh` prints the
lines a CLI would, written out raw (JSON text json.dumps would never produce).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from conftest import git
from helpers import fake_agent_plan as plan
from helpers import specflux_process as specflux
from test_flow import AGENT, DOCS, FIX, project, start, status, trailers  # noqa: F401

BUDGETS = ("--budget-usd", "5", "--allow-unmetered", "--token-budget", "100000")


def raw(*lines: str) -> str:
    """A shell command printing `lines` exactly as given."""
    return "printf '%s\\n' " + " ".join(shlex.quote(line) for line in lines)


def result(usage: str, cost: str = "0.01") -> str:
    """Claude Code's closing `result` line with `usage` and `total_cost_usd` as raw JSON text."""
    return f'{{"type":"result","subtype":"success","num_turns":1,"total_cost_usd":{cost},"usage":{usage}}}'


def coder_commits(repo: Path) -> list[dict[str, str]]:
    shas = git(repo, "log", "--format=%H", "--grep=^Specflux-Role: coder").split()
    return [trailers(repo, sha) for sha in shas]


def narrative(repo: Path) -> str:
    return specflux(repo, "flow", "log").stdout


def entries(repo: Path, task: str) -> list[dict]:
    return json.loads(specflux(repo, "show", task, "--json").stdout)["sessions"]


def ends_cleanly(repo: Path, done: subprocess.CompletedProcess) -> dict:
    """The run completed both tasks (not stuck `running`), each coder's work committed."""
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    state = status(repo)
    assert state["status"] == "completed", state
    assert "a - b" not in (repo / "src" / "calc.py").read_text()
    assert git(repo, "status", "--porcelain", "--", "src", "README.md").strip() == ""
    assert "returns the sum" in git(repo, "show", "HEAD:README.md")
    for task in ("1", "2"):
        assert json.loads(specflux(repo, "show", task, "--json").stdout)["status"] == "complete"
    return state


def test_1e400_tokens_are_unknown_named_and_the_run_ends_with_its_work_committed(project, tmp_path):
    coder = {**FIX, "sh": raw(result('{"input_tokens":1e400,"output_tokens":10}'))}
    env = plan(tmp_path, coder__1=[coder], coder__2=[DOCS])
    done = start(project, env, *BUDGETS)
    state = ends_cleanly(project, done)
    said = "input_tokens is 1e400, not a finite number"
    assert f"usage unknown: {said}; the token budget and the budget in money could not count this session" \
        in done.stderr, done.stderr
    log = narrative(project)
    assert f"coder finished on task 1: complete, tests passed\n  - usage unknown: {said}" in log, log
    assert state["metrics"]["usageUnknown"] == 4 and state["metrics"]["inputTokens"] == 0
    first = coder_commits(project)[-1]
    assert (first["Specflux-Task"], first["Specflux-Usage"]) == ("1", "unknown"), first
    text = (project / ".specflux" / "task-states" / "task-1-state.md").read_text()  # the progress entry too
    assert f"**Usage:** unknown ({said}; the token budget" in text, text


def test_negative_tokens_and_nan_are_unknown_never_zero(project, tmp_path):
    env = plan(tmp_path, coder__1=[{**FIX, "sh": raw(result('{"input_tokens":-5,"output_tokens":300}'))}],
               coder__2=[{**DOCS, "sh": raw(result('{"input_tokens":100,"output_tokens":NaN}'))}])
    done = start(project, env, *BUDGETS)
    state = ends_cleanly(project, done)
    log = narrative(project)
    assert "usage unknown: input_tokens is -5, a negative number" in log, log
    assert "usage unknown: output_tokens is NaN, not a finite number" in log, log
    assert state["metrics"]["outputTokens"] == 0, "300 output tokens of a session not believed were counted"
    assert [c["Specflux-Usage"] for c in coder_commits(project)] == ["unknown", "unknown"]


def test_a_negative_cost_is_unknown_not_a_free_session(project, tmp_path):
    coder = {**FIX, "sh": raw(result('{"input_tokens":1000,"output_tokens":10}', cost="-5"))}
    env = plan(tmp_path, coder__1=[coder], coder__2=[DOCS])
    done = start(project, env, *BUDGETS)
    state = ends_cleanly(project, done)
    assert "usage unknown: total_cost_usd is -5, a negative number; the token budget and the budget in money " \
           "could not count this session" in narrative(project)
    assert state["metrics"]["costUsd"] == 0 and state["metrics"]["usageUnknown"] == 4
    assert entries(project, "1")[0]["usage"] == {"unknown": True}


def test_json_no_parser_can_read_and_garbage_end_the_session_normally(project, tmp_path):
    code = """print('{"type":"result","usage":' + '[' * 200000 + ']' * 200000 + '}')"""  # json: RecursionError
    deep = f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    garbage = ['{"type":"result","usage":{"input_tokens":', '{"usage": "lots"}', "{not json",
               '{"type":"result","usage":{"input_tokens":"many"}}']
    env = plan(tmp_path, coder__1=[{**FIX, "sh": deep}], coder__2=[{**DOCS, "sh": raw(*garbage)}])
    done = start(project, env, *BUDGETS)
    ends_cleanly(project, done)
    log = narrative(project)
    assert "usage unknown: a line that looks like a usage report is nested too deeply to read" in log, log
    assert 'usage unknown: input_tokens is "many", not a number' in log, log


def test_no_usage_at_all_under_a_budget_in_money_is_refused_without_allow_unmetered(project, tmp_path):
    env = plan(tmp_path, coder__1=[FIX], coder__2=[DOCS])  # the fake agent prints no usage
    done = start(project, env, "--budget-usd", "0.5")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--budget-usd $0.50 cannot be enforced: --agent command names no usage reader" in done.stderr
    assert "--allow-unmetered" in done.stderr and "Traceback" not in done.stderr
    assert not (project / ".specflux" / "runs").exists() or not list((project / ".specflux" / "runs").iterdir())
    with open(project / ".specflux" / "config.toml", "a") as f:
        f.write("\n[flow]\nbudget_usd = 0.5\n")
    git(project, "commit", "-qam", "a budget in money")
    done = start(project, env)
    assert done.returncode == 2 and "[flow] budget_usd $0.50 cannot be enforced" in done.stderr, done.stderr

    done = start(project, env, "--allow-unmetered")
    ends_cleanly(project, done)
    announced = ("the run's budget in money ($0.50) may not bind: --agent command "
                 "names no usage reader")
    assert announced in done.stderr, done.stderr
    log = narrative(project)
    assert announced in log.split("\n- ", 2)[1], log  # said with the run's creation, first
    assert "usage unknown: the agent printed no usage specflux can read; the token budget and the budget in " \
           "money could not count this session" in log, log


def test_a_token_budget_the_agent_cannot_feed_is_announced_not_refused(project, tmp_path):
    env = plan(tmp_path, coder__1=[FIX], coder__2=[DOCS])
    done = start(project, env, "--token-budget", "50000")
    ends_cleanly(project, done)
    assert "warning: the run's token budget (50,000) may not bind: --agent command names no usage reader" \
        in done.stderr, done.stderr


def test_a_resume_after_a_session_whose_numbers_overflow_works(project, tmp_path):
    flag = tmp_path / "printed"
    go = tmp_path / "go"
    wait = f"touch {shlex.quote(str(flag))}; while [ ! -e {shlex.quote(str(go))} ]; do sleep 0.05; done"
    coder = {**FIX, "sh": raw(result('{"input_tokens":1e400}')) + "; " + wait}
    env = plan(tmp_path, coder__1=[coder], coder__2=[DOCS])
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    import os

    proc = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(project), "flow", "start",
                             "--agent", "command", "--cmd", cmd, *BUDGETS], env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not flag.exists():  # the agent has printed its line: pause the run after this step
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        assert specflux(project, "flow", "pause").returncode == 0
        go.touch()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err, out + err
    assert status(project)["status"] == "paused", err
    assert coder_commits(project)[0]["Specflux-Usage"] == "unknown"
    resumed = specflux(project, "flow", "resume", env=env)
    ends_cleanly(project, resumed)
    assert "usage unknown: input_tokens is 1e400" in narrative(project)


def test_a_single_session_says_its_token_budget_may_not_bind_and_commits_past_1e400(project):
    fix = "printf 'def add(a, b):\\n    return a + b\\n' > src/calc.py"
    cmd = raw(result('{"input_tokens":1e400}')) + "; " + fix
    done = specflux(project, "run", "1", "--agent", "command", "--cmd", cmd, "--token-budget", "50000")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert "warning: the session's token budget (50,000) may not bind: --agent command names no usage reader" \
        in done.stderr, done.stderr
    said = "input_tokens is 1e400, not a finite number; the token budget could not count this session"
    assert f"usage unknown: {said}" in done.stderr
    assert f"tokens: unknown ({said})" in done.stdout, done.stdout
    assert git(project, "status", "--porcelain", "--", "src").strip() == ""
    assert "a + b" in git(project, "show", "HEAD:src/calc.py")
    assert trailers(project, "HEAD")["Specflux-Usage"] == "unknown"
