"""The command backend: any agent CLI, run through the shell in the repository root; its token
usage read from the CLI's own JSON output (Claude Code, Codex), and a start that fails at once
marked as a setup error."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import alive as _alive
from patience import patience

from specflux.agent.backend import SessionRequest, Usage
from specflux.agent.command_backend import CommandBackend, OutputTail
from specflux.agent.usage_readers import parse_usage
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
    assert not outcome.setup_error


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to see the child")
def test_a_timeout_kills_the_agent_and_its_children(repo: Path):
    backend = CommandBackend("sleep 30 & echo $! > child.pid; wait", timeout_s=0.5, stream=False)
    started = time.monotonic()
    outcome = backend.run(REQUEST, Toolbox(repo, Hooks()))
    assert time.monotonic() - started < patience(5)
    assert outcome.stop == "error" and "timed out after 0.5s" in outcome.error
    child = int((repo / "child.pid").read_text())
    deadline = time.monotonic() + patience(3)
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT to this process")
def test_ctrl_c_interrupts_the_agent(repo: Path):
    def ctrl_c_once_the_agent_runs():  # not on a timer: on a loaded machine the agent may not have started
        while not (repo / "started").exists():
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c_once_the_agent_runs, daemon=True).start()
    started = time.monotonic()
    outcome = CommandBackend("touch started; sleep 600", stream=False).run(REQUEST, Toolbox(repo, Hooks()))
    assert outcome.stop == "interrupted" and time.monotonic() - started < patience(10)


def test_ctrl_c_while_the_agents_readers_start_stops_the_agent(repo: Path, monkeypatch):
    """A Ctrl-C between the agent's start and its wait (its output's readers starting, on a busy
    machine) is an interruption like any other: the agent is stopped, not left running."""
    from specflux.agent import command_backend

    class Slow(threading.Thread):
        def start(self):
            stderr_reader = self._target is command_backend._pump and self._args[2].__class__.__name__ == "deque"
            super().start()  # (a thread that has run drops its _target: judged before)
            if stderr_reader:
                while not (repo / "pid").exists():
                    time.sleep(0.02)
                raise KeyboardInterrupt  # as the signal would, at this moment

    monkeypatch.setattr(command_backend.threading, "Thread", Slow)
    outcome = CommandBackend("echo $$ > pid; exec sleep 600", stream=False).run(REQUEST, Toolbox(repo, Hooks()))
    assert outcome.stop == "interrupted"
    pid = int((repo / "pid").read_text())
    deadline = time.monotonic() + patience(10)
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"the agent {pid} is still running")


# -- token usage from the CLI's JSON output ------------------------------------------------------

CLAUDE_RESULT = {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 4047,
                 "num_turns": 7, "result": "Done.", "session_id": "20dde46c", "total_cost_usd": 0.079,
                 "usage": {"input_tokens": 120, "output_tokens": 345, "cache_creation_input_tokens": 2000,
                           "cache_read_input_tokens": 15000}}
CLAUDE_USAGE = Usage(input_tokens=120, output_tokens=345, cache_creation_input_tokens=2000,
                     cache_read_input_tokens=15000, cost_usd=0.079, cost_reported=True)  # the CLI's own figure

# A fake agent CLI: reads its prompt, prints what it is given as argv[1] (a JSON file of lines),
# optionally preceded by a lot of noise, and exits with argv[2].
PRINTING_AGENT = """\
import json, sys
sys.stdin.read()
noise, lines = json.load(open(sys.argv[1]))
for _ in range(noise):
    print("x" * 1023)
for line in lines:
    print(line if isinstance(line, str) else json.dumps(line))
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
"""


def run_printing(repo: Path, tmp_path: Path, lines: list, noise: int = 0, code: int = 0):
    script = tmp_path / "printing_agent.py"
    script.write_text(PRINTING_AGENT)
    data = tmp_path / "lines.json"
    data.write_text(json.dumps([noise, lines]))
    cmd = " ".join(shlex.quote(str(a)) for a in (sys.executable, script, data, code))
    return CommandBackend(cmd, timeout_s=60, stream=False).run(REQUEST, Toolbox(repo, Hooks()))


def test_claude_code_json_output_gives_usage_and_turns(repo: Path, tmp_path: Path):
    outcome = run_printing(repo, tmp_path, [CLAUDE_RESULT])  # `claude -p --output-format json`
    assert (outcome.stop, outcome.usage, outcome.turns) == ("end_turn", CLAUDE_USAGE, 7)


def test_claude_code_stream_json_takes_the_final_result(repo: Path, tmp_path: Path):
    stream = [  # `claude -p --output-format stream-json --verbose`: one object a line, the result last
        {"type": "system", "subtype": "init", "session_id": "20dde46c", "tools": ["Read", "Edit", "Bash"]},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "Reading the task."}],
                                          "usage": {"input_tokens": 3, "output_tokens": 9}}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": "ok"}]}},
        CLAUDE_RESULT,
    ]
    outcome = run_printing(repo, tmp_path, stream)
    assert (outcome.usage, outcome.turns) == (CLAUDE_USAGE, 7)


def test_the_result_is_found_after_more_output_than_is_kept(repo: Path, tmp_path: Path):
    outcome = run_printing(repo, tmp_path, ["some words", CLAUDE_RESULT], noise=1536)  # 1.5 MB before it
    assert (outcome.usage, outcome.turns) == (CLAUDE_USAGE, 7)


def test_a_failing_agent_still_reports_what_it_spent(repo: Path, tmp_path: Path):
    error_result = {**CLAUDE_RESULT, "subtype": "error_max_turns", "is_error": True}
    outcome = run_printing(repo, tmp_path, [error_result], code=1)
    assert (outcome.stop, outcome.usage, outcome.turns, outcome.setup_error) == ("error", CLAUDE_USAGE, 7, False)


def test_codex_exec_json_gives_usage_with_cached_input_apart(repo: Path, tmp_path: Path):
    events = [  # `codex exec --json`: cached input is counted inside input_tokens
        {"type": "thread.started", "thread_id": "019a2d7a"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "done"}},
        {"type": "turn.completed", "usage": {"input_tokens": 26549, "cached_input_tokens": 22272,
                                             "output_tokens": 1590}},
    ]
    outcome = run_printing(repo, tmp_path, events)
    assert outcome.usage == Usage(input_tokens=26549 - 22272, output_tokens=1590, cache_read_input_tokens=22272)
    assert outcome.usage.total == 26549 + 1590 and outcome.turns == 1


def test_a_cli_without_json_output_has_unknown_usage_not_zeros(repo: Path, tmp_path: Path):
    outcome = run_printing(repo, tmp_path, ["I changed two files.", '{"not": "a result"}', "{broken json"])
    assert (outcome.stop, outcome.usage, outcome.turns) == ("end_turn", Usage.unknown(), 1)


def test_parse_usage_reads_the_shapes_it_knows_and_nothing_else():
    assert parse_usage(json.dumps([{"type": "system"}, CLAUDE_RESULT])) == (CLAUDE_USAGE, 7)  # json --verbose
    assert parse_usage(json.dumps(CLAUDE_RESULT, indent=2)) == (CLAUDE_USAGE, 7)  # one object over lines
    odd = {**CLAUDE_RESULT, "num_turns": "seven", "usage": {"input_tokens": -1, "output_tokens": True},
           "total_cost_usd": "lots"}
    # numbers not believed make the usage unknown, naming the first (agent/usage_checks.py), never 0
    assert parse_usage(json.dumps(odd)) == (Usage.unknown("input_tokens is -1, a negative number"), 1)
    odd["usage"] = {"input_tokens": 5}
    assert parse_usage(json.dumps(odd)) == (Usage.unknown('total_cost_usd is "lots", not a number'), 1)
    for text in ("", "plain words", "[1, 2]", "null", '{"type": "result"}', '{"type": "result", "usage": 5}'):
        assert parse_usage(text) is None, text


def test_the_output_tail_keeps_the_last_lines_within_its_limit():
    tail = OutputTail(limit=10)
    for line in ("aaaa\n", "bbbb\n", "cccc\n"):
        tail.append(line)
    assert tail.text() == "bbbb\ncccc\n"
    tail.append("0123456789ABCDEF\n")  # longer than the limit alone: its end is kept
    assert tail.text() == "789ABCDEF\n"


# -- a start that fails at once is a setup error -------------------------------------------------

def test_a_program_that_is_not_there_is_a_setup_error(repo: Path):
    outcome = CommandBackend("specflux-no-such-agent-cli -p", timeout_s=30, stream=False).run(
        REQUEST, Toolbox(repo, Hooks()))
    assert outcome.stop == "error" and outcome.setup_error
    assert outcome.error.startswith("the agent command could not start (exit 127; a setup error: check --cmd):")
    assert "not found" in outcome.error


@pytest.mark.skipif(os.name != "posix", reason="execute permission bits")
def test_a_script_that_is_not_executable_is_a_setup_error(repo: Path):
    (repo / "agent.sh").write_text("#!/bin/sh\necho hi\n")
    outcome = CommandBackend("./agent.sh", timeout_s=30, stream=False).run(REQUEST, Toolbox(repo, Hooks()))
    assert outcome.stop == "error" and outcome.setup_error
    assert "exit 126" in outcome.error and "Permission denied" in outcome.error


def test_a_late_exit_127_is_the_agents_own_failure(repo: Path):
    cmd = "sleep 1.2; echo 'make: cc: not found' >&2; exit 127"
    outcome = CommandBackend(cmd, timeout_s=30, stream=False).run(REQUEST, Toolbox(repo, Hooks()))
    assert outcome.stop == "error" and not outcome.setup_error
    assert outcome.error == "the agent command exited with 127:\nmake: cc: not found"


@pytest.mark.skipif(not sys.platform.startswith("linux") or not __import__("shutil").which("setpriv"),
                    reason="the agent dies with specflux through setpriv --pdeathsig (Linux, util-linux)")
def test_an_agent_whose_specflux_is_killed_dies_with_it(git_repo, tmp_path):
    """kill -9 of specflux must not leave the agent CLI changing the work tree behind a resume."""
    import subprocess

    from helpers import run as _unused  # noqa: F401  (helpers on the path)

    pidfile = tmp_path / "agent.pid"
    script = tmp_path / "agent.py"
    script.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    assert subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(git_repo), "init", str(git_repo)],
                          env=env, capture_output=True).returncode == 0
    assert subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(git_repo), "new", "T"],
                          env=env, capture_output=True).returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(git_repo), "run", "1", "--agent",
                             "command", "--cmd", f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline, "the agent never started"
        time.sleep(0.05)
    agent = int(pidfile.read_text())
    assert _alive(agent)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while _alive(agent):
        assert time.monotonic() < deadline, "the agent outlived the specflux that started it"
        time.sleep(0.05)
