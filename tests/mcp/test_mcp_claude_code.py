"""`specflux mcp` under a real MCP client: the pinned Claude Code CLI (installed by .ci/run) loads
it with `--mcp-config`, and a scripted model (specflux/agent/scripted_claude.py) lists the ready
tasks, reads a context, ticks a criterion, logs a session and completes the task through the MCP
tools; the task file and git history show it. The tool list is measured as Claude Code sends it
to the model, and the README's figure is checked against it.

The CLI is found as in tests/agent/test_claude_code.py; without it the tests skip.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

from specflux.agent.presets import CLAUDE
from specflux.agent.scripted import Reply, call
from specflux.agent.scripted_claude import ClaudeCodeServer

pytest.importorskip("mcp")

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("SPECFLUX_TEST_TOOLS", Path.home() / ".cache" / "specflux-test-tools"))
CLAUDE_BIN = Path(os.environ.get("SPECFLUX_CLAUDE") or TOOLS / "claude-code" / "node_modules" / ".bin" / "claude")

pytestmark = pytest.mark.skipif(not CLAUDE_BIN.exists(), reason=(
    f"Claude Code is not installed at {CLAUDE_BIN} (.ci/run installs it: npm install --prefix "
    f"{TOOLS}/claude-code @anthropic-ai/claude-code@{CLAUDE.verified})"))


def specflux(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def repo(git_repo: Path) -> Path:
    assert specflux(git_repo, "init", str(git_repo)).returncode == 0
    assert specflux(git_repo, "new", "Fix add", "--ac", "add returns the sum", "--ac", "it has a test").returncode == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tasks")
    return git_repo


def claude_with_mcp(repo: Path, turns: list[Reply], home: Path) -> tuple[subprocess.CompletedProcess, ClaudeCodeServer]:
    config = {"mcpServers": {"specflux": {"command": sys.executable,
                                          "args": ["-m", "specflux.cli", "--root", str(repo), "mcp"]}}}
    with ClaudeCodeServer(turns) as server:
        env = {**os.environ, **server.env(), "HOME": str(home)}
        done = subprocess.run([str(CLAUDE_BIN), "-p", "--output-format", "stream-json", "--verbose",
                               "--strict-mcp-config", "--mcp-config", json.dumps(config),
                               "--tools", "", "--allowedTools", "mcp__specflux"],
                              input=b"Work on the next ready task through the specflux tools.", cwd=repo, env=env,
                              capture_output=True, timeout=300)
    return done, server


def tool_results(request: dict) -> str:
    return json.dumps([m for m in request["messages"] if m["role"] == "user"])


def test_claude_code_works_a_task_through_specflux_mcp(repo, tmp_path):
    turns = [
        Reply(calls=[call("mcp__specflux__ready_tasks")]),
        Reply(calls=[call("mcp__specflux__task_context", id="1")]),
        Reply(calls=[call("mcp__specflux__check_criteria", id="1", indices=[1, 2])]),
        Reply(calls=[call("mcp__specflux__log_session", id="1", did=["fixed add", "added its test"],
                          next="nothing")]),
        Reply(calls=[call("mcp__specflux__complete_task", id="1", summary="add returns a + b",
                          downstream="use add(a, b)")]),
        Reply(text="Task 1 is complete."),
    ]
    done, server = claude_with_mcp(repo, turns, tmp_path / "home")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(server.requests) == len(turns)
    # each tool's answer reached the model: the ready list, the context, the writes
    assert '\\"title\\": \\"Fix add\\"' in tool_results(server.requests[1])
    assert "add returns the sum" in tool_results(server.requests[2])
    assert "isError" not in json.dumps(server.requests[-1]["messages"][-1]) and \
        '"is_error": true' not in json.dumps(server.requests[-1]["messages"])
    # the task file says it, and git holds it
    shown = json.loads(specflux(repo, "show", "1", "--json").stdout)
    assert shown["status"] == "complete"
    assert [c["checked"] for c in shown["criteria"]] == [True, True]
    assert shown["sessions"][-1]["did"] == ["fixed add", "added its test"]
    assert shown["chain_output"]["summary"].startswith("add returns a + b")
    log = git(repo, "log", "--format=%s%n%(trailers:key=Specflux-Task,valueonly)")
    assert log.count("\n1\n") >= 2, log  # the session's commit and the completion's
    assert git(repo, "status", "--porcelain") == ""


def test_the_tool_list_as_claude_code_sends_it(repo, tmp_path):
    done, server = claude_with_mcp(repo, [Reply(text="nothing to do")], tmp_path / "home")
    assert done.returncode == 0, done.stderr[-3000:]
    sent = [t for t in server.requests[0]["tools"] if t["name"].startswith("mcp__specflux__")]
    assert sorted(t["name"].removeprefix("mcp__specflux__") for t in sent) == sorted(
        ["list_tasks", "show_task", "ready_tasks", "task_context", "flow_status", "check_criteria", "log_session",
         "complete_task", "set_task"])
    chars = len(json.dumps(sent, separators=(",", ":")))
    tokens = chars // 4
    readme = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    figure = re.search(r"as\s+Claude\s+Code\s+sends\s+it.{0,400}?about\s+([\d,]+)\s+tokens", readme, re.S)
    assert figure, "docs/mcp.md gives the tool list's size as Claude Code sends it"
    said = int(figure.group(1).replace(",", ""))
    assert abs(tokens - said) <= said * 0.1, f"README says about {said} tokens; Claude Code sends {chars} chars, ~{tokens}"
