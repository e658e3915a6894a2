"""The command backend: any agent CLI, run through the shell in the repository root."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import alive as _alive

from specflux.agent.backend import SessionRequest
from specflux.agent.command_backend import CommandBackend
from specflux.agent.tools import Toolbox

FAKE_AGENT = """\
import os, pathlib, sys
prompt = sys.stdin.read()
pathlib.Path("agent-out.txt").write_text(
    prompt + "|" + os.environ["SPECFLUX_TASK_ID"] + "|" + os.environ["SPECFLUX_TASK_FILE"]
    + "|" + os.environ["SPECFLUX_ROOT"] + "|" + os.getcwd())
print("agent says hi")
if len(sys.argv) > 1:
    print("it went wrong", file=sys.stderr)
    sys.exit(int(sys.argv[1]))
"""


class Hooks:
    def check_criterion(self, index: int) -> str:
        raise AssertionError("the command backend never calls hooks")

    def end_session(self, handoff) -> str:
        raise AssertionError("the command backend never calls hooks")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


@pytest.fixture
def agent(tmp_path: Path) -> str:
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


REQUEST = SessionRequest(system="RULES", context="TASK CONTEXT", model="any", max_turns=1)
ENV = {"SPECFLUX_TASK_ID": "101", "SPECFLUX_TASK_FILE": ".specflux/task-states/task-101-state.md"}


def test_the_agent_gets_the_prompt_and_the_task_environment(repo: Path, agent: str, capsys):
    outcome = CommandBackend(agent, timeout_s=30).run(REQUEST, Toolbox(repo, Hooks()), env=ENV)
    assert (outcome.stop, outcome.error, outcome.handoff, outcome.turns) == ("end_turn", None, None, 1)
    assert (repo / "agent-out.txt").read_text() == (
        f"RULES\n\nTASK CONTEXT|101|.specflux/task-states/task-101-state.md|{repo}|{repo}")
    assert "agent says hi" in capsys.readouterr().out  # streamed through to the user's terminal


def test_environment_from_the_constructor_and_root_override(repo: Path, agent: str):
    env = {**ENV, "SPECFLUX_ROOT": "/somewhere/else"}
    outcome = CommandBackend(agent, timeout_s=30, env=env, stream=False).run(REQUEST, Toolbox(repo, Hooks()))
    assert outcome.stop == "end_turn"
    assert (repo / "agent-out.txt").read_text().endswith(f"|/somewhere/else|{repo}")


def test_a_failing_agent_is_an_error_with_its_stderr(repo: Path, agent: str):
    outcome = CommandBackend(agent + " 3", timeout_s=30, env=ENV, stream=False).run(REQUEST, Toolbox(repo, Hooks()))
    assert outcome.stop == "error"
    assert outcome.error == "the agent command exited with 3:\nit went wrong"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to see the child")
def test_a_timeout_kills_the_agent_and_its_children(repo: Path):
    backend = CommandBackend("sleep 30 & echo $! > child.pid; wait", timeout_s=0.5, stream=False)
    started = time.monotonic()
    outcome = backend.run(REQUEST, Toolbox(repo, Hooks()))
    assert time.monotonic() - started < 5
    assert outcome.stop == "error" and "timed out after 0.5s" in outcome.error
    child = int((repo / "child.pid").read_text())
    deadline = time.monotonic() + 3
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT to this process")
def test_ctrl_c_interrupts_the_agent(repo: Path):
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    try:
        outcome = CommandBackend("sleep 30", stream=False).run(REQUEST, Toolbox(repo, Hooks()))
    finally:
        timer.cancel()
    assert outcome.stop == "interrupted" and time.monotonic() - started < 10
