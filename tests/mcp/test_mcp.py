"""`specflux mcp` end to end: the real server as a subprocess, driven through the MCP SDK's own
stdio client, in real temporary git repositories; its answers compared with the CLI's `--json`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Awaitable, Callable

import pytest

from specflux.mcp_server import NAMES

from conftest import git

pytest.importorskip("mcp")

from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

SPECFLUX = [sys.executable, "-m", "specflux.cli"]
TOKEN_BUDGET = 3000  # the whole tool list, as chars / 4


def cli(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`specflux ARGS...` as a subprocess in `root`."""
    done = subprocess.run([*SPECFLUX, *args], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"})
    if check:
        assert done.returncode == 0, f"specflux {' '.join(args)} -> {done.returncode}: {done.stderr}"
    return done


def cli_json(root: Path, *args: str):
    return json.loads(cli(root, *args, check=False).stdout)


def served(root: Path, body: Callable[[ClientSession], Awaitable], *options: str, env: dict | None = None):
    """Start `specflux mcp OPTIONS` in `root`, run `body` on an initialized client session, stop
    the server; the server's stderr must hold no traceback (an error is a result, never a crash)."""
    errlog_path = root.parent / "mcp-stderr.txt"

    async def main():
        params = StdioServerParameters(command=SPECFLUX[0], args=[*SPECFLUX[1:], "mcp", *options], cwd=str(root),
                                       env=env)
        with errlog_path.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    result = asyncio.run(main())
    assert "Traceback" not in errlog_path.read_text(), errlog_path.read_text()
    return result


async def call(session: ClientSession, name: str, **arguments):
    """The tool's JSON answer; fails the test on an error result."""
    result = await session.call_tool(name, arguments)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def error(session: ClientSession, name: str, **arguments) -> str:
    """The text of the tool's error result; fails the test when the call succeeds."""
    result = await session.call_tool(name, arguments)
    assert result.is_error, f"{name} {arguments} succeeded: {result.content[0].text}"
    return result.content[0].text


@pytest.fixture
def ws(git_repo) -> Path:
    """Three tasks: 1 with two criteria, 2 depending on 1, 3 on its own."""
    cli(git_repo, "init")
    cli(git_repo, "new", "Schema", "--req", "Tables for users.", "--ac", "users table", "--ac", "migration runs")
    cli(git_repo, "new", "Auth API", "--dep", "1", "--ac", "login returns a token")
    cli(git_repo, "new", "Docs", "--ac", "README explains login")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tasks")
    return git_repo


def task_text(root: Path, task_id: str) -> str:
    return (root / ".specflux" / "task-states" / f"task-{task_id}-state.md").read_text()


# --------------------------------------------------------------------- the tool list


def test_tool_list_is_small_described_and_within_the_token_budget(ws):
    async def body(session):
        return (await session.list_tools()).tools

    tools = served(ws, body)
    assert [t.name for t in tools] == list(NAMES)
    for tool in tools:
        assert tool.description and len(tool.description) < 200, tool.name
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    listing = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
    tokens = len(listing) / 4
    print(f"tool list: {len(listing)} chars, ~{tokens:.0f} tokens")
    assert tokens < TOKEN_BUDGET


# --------------------------------------------------------------------- reading: the CLI's --json


def test_reads_are_the_cli_json_shapes(ws):
    cli(ws, "check", "1", "1")
    cli(ws, "session", "1", "--did", "Created the users table", "--next", "Write the migration")

    async def body(session):
        return {
            "list": await call(session, "list_tasks"),
            "list pending": await call(session, "list_tasks", status="pending"),
            "show 1": await call(session, "show_task", id="1"),
            "show 2": await call(session, "show_task", id="2"),
            "ready": await call(session, "ready_tasks"),
            "context 2": await call(session, "task_context", id="2"),
        }

    got = served(ws, body)
    assert got["list"] == cli_json(ws, "list", "--json")
    assert [t["id"] for t in got["list"]] == ["1", "2", "3"]
    assert got["list pending"] == cli_json(ws, "list", "--status", "pending", "--json")
    assert [t["id"] for t in got["list pending"]] == ["2", "3"]
    assert got["show 1"] == cli_json(ws, "show", "1", "--json")
    assert got["show 1"]["criteria"][0] == {"index": 1, "text": "users table", "checked": True}
    assert got["show 1"]["sessions"][0]["did"] == ["Created the users table"]
    assert got["show 2"] == cli_json(ws, "show", "2", "--json")
    assert got["ready"] == cli_json(ws, "ready", "--json")
    assert [t["id"] for t in got["ready"]] == ["1", "3"]
    assert got["context 2"] == cli_json(ws, "context", "2", "--json")
    assert "Auth API" in got["context 2"]["context"] and got["context 2"]["tokens"] > 0


def test_flow_status_is_the_cli_json(ws):
    async def no_run(session):
        return await error(session, "flow_status")

    assert "no workflow runs yet" in served(ws, no_run)
    started = cli(ws, "flow", "start", "3", "--agent", "command", "--cmd", "true", "--max-iterations", "1", check=False)
    run_id = started.stdout.split()[0]
    assert run_id.startswith("run-"), started.stderr

    async def body(session):
        return (await call(session, "flow_status"), await call(session, "flow_status", run=run_id[:12]),
                await error(session, "flow_status", run="run-nope"))

    latest, named, unknown = served(ws, body)
    assert latest == cli_json(ws, "flow", "status", "--json") == named
    assert latest["runId"] == run_id and [t["id"] for t in latest["tasks"]] == ["3"]
    assert "run-nope" in unknown


# --------------------------------------------------------------------- writing


def test_check_session_complete_and_set_write_the_files(ws):
    before = git(ws, "rev-parse", "HEAD").strip()

    async def body(session):
        return {
            "check": await call(session, "check_criteria", id="1", indices=[1]),
            "again": await call(session, "check_criteria", id="1", indices=[1]),
            "session": await call(session, "log_session", id="1", did=["Created the users table", "Wrote the migration"],
                                  issues="none", next="Review", check=[2]),
            "complete": await call(session, "complete_task", id="1", summary="users table and migration",
                                   downstream="users(id, email)"),
            "set": await call(session, "set_task", id="3", status="blocked", priority=2, add_deps=["1"]),
            "uncheck": await call(session, "check_criteria", id="3", indices=[1], checked=False),
            "show 2": await call(session, "show_task", id="2"),
        }

    got = served(ws, body)
    assert got["check"]["criteria"] == [{"index": 1, "text": "users table", "changed": True}]
    assert got["check"]["changed"] == [".specflux/task-states/task-1-state.md"] and got["check"]["commit"] is None
    assert got["again"]["criteria"] == [{"index": 1, "text": "users table", "changed": False}] and got["again"]["changed"] == []

    session = got["session"]
    assert session["session"] == 1 and session["status"] == "in_progress" and session["commit"]
    log = git(ws, "log", "-3", "--format=%H%n%B")
    assert session["commit"] in log and "Specflux-Task: 1" in log and "Specflux-Session: 1" in log
    assert git(ws, "rev-list", "--count", f"{before}..HEAD").strip() == "2", "one commit for the session, one for complete"

    complete = got["complete"]
    assert complete["status"] == "complete" and complete["wired"] == ["2"] and complete["commit"]
    assert git(ws, "rev-parse", "HEAD").strip() == complete["commit"]
    text = task_text(ws, "1")
    assert "- [x] users table" in text and "- [x] migration runs" in text
    assert "- Created the users table" in text and "users table and migration" in text
    assert '"status": "complete"' in text
    assert got["show 2"]["chain_inputs"][0]["task_id"] == "1"
    assert "users(id, email)" in got["show 2"]["chain_inputs"][0]["body"]

    assert got["set"]["fields"] == ["status pending -> blocked", "priority 2", "depends on 1"]
    assert got["uncheck"]["criteria"] == [{"index": 1, "text": "README explains login", "changed": False}]
    shown = cli_json(ws, "show", "3", "--json")
    assert shown["status"] == "blocked" and shown["metadata"]["priority"] == 2 and shown["dependencies"] == ["1"]
    assert shown["chain_inputs"][0]["task_id"] == "1", "a complete dependency is wired in at once, as by the CLI"
    assert git(ws, "status", "--porcelain", "--", ".specflux/task-states/task-1-state.md").strip() == ""


def test_writes_keep_the_cli_rules(ws):
    async def body(session):
        return {
            "nothing": await error(session, "set_task", id="1"),
            "numbers": await call(session, "set_task", id=3, add_deps=[1]),  # ids as JSON numbers, as agents write them
            "cycle": await error(session, "set_task", id="1", add_deps=["2"]),
            "unknown dep": await error(session, "set_task", id="1", add_deps=["42"]),
            "criterion": await error(session, "check_criteria", id="1", indices=[9]),
            "summary": await error(session, "complete_task", id="1", summary="  "),
            "no commit": await call(session, "log_session", id="3", did=["Drafted"], commit=False),
        }

    before = {t: task_text(ws, t) for t in ("1", "2", "3")}
    head = git(ws, "rev-parse", "HEAD")
    got = served(ws, body)
    assert "nothing to set" in got["nothing"]
    assert got["cycle"].endswith("task 1 cannot depend on 2: that closes the cycle 1 -> 2 -> 1")
    assert got["unknown dep"].endswith("no task 42: a dependency must be an existing task")
    assert got["criterion"].endswith(".specflux/task-states/task-1-state.md:17: no acceptance criterion 9 (the task has 2)")
    assert "needs a summary" in got["summary"]
    assert got["no commit"]["commit"] is None and got["no commit"]["session"] == 1
    assert got["numbers"]["id"] == "3" and got["numbers"]["fields"] == ["depends on 1"]
    assert task_text(ws, "1") == before["1"] and task_text(ws, "2") == before["2"], "a refused write changes nothing"
    assert task_text(ws, "3") != before["3"] and git(ws, "rev-parse", "HEAD") == head


def test_complete_is_refused_for_the_task_a_workflow_run_drives(ws):
    async def body(session):
        return await error(session, "complete_task", id="1", summary="done"), await call(session, "show_task", id="2")

    before = task_text(ws, "1")
    refused, _ = served(ws, body, env={"SPECFLUX_RUN": "run-x", "SPECFLUX_ROLE": "coder", "SPECFLUX_TASK_ID": "1"})
    assert "inside workflow run run-x" in refused and "## 4. Chain Output" in refused
    assert task_text(ws, "1") == before


# --------------------------------------------------------------------- errors are results, never a crash


def test_a_bad_id_is_an_error_result_naming_it(ws):
    async def body(session):
        return (await error(session, "show_task", id="99"), await error(session, "log_session", id="99", did=["x"]),
                await error(session, "task_context", id="../etc"), await call(session, "list_tasks"))

    missing, session, invalid, listed = served(ws, body)
    assert "no task 99" in missing and ".specflux/task-states/task-99-state.md" in missing
    assert "no task 99" in session
    assert "../etc" in invalid
    assert len(listed) == 3, "the server goes on serving after an error"


def test_a_broken_task_file_is_an_error_result_with_path_and_line(ws):
    path = ws / ".specflux" / "task-states" / "task-2-state.md"
    path.write_text(path.read_text().replace('"status": "pending"', '"status": "pending",,'))
    cli_error = cli(ws, "show", "2", check=False)
    assert cli_error.returncode == 1
    where = cli_error.stderr.strip()
    assert re.match(r"\.specflux/task-states/task-2-state\.md:\d+: ", where), where

    async def body(session):
        return (await error(session, "show_task", id="2"), await error(session, "check_criteria", id="2", indices=[1]),
                await call(session, "list_tasks"), await session.call_tool("ready_tasks", {}))

    shown, checked, listed, ready = served(ws, body)
    assert where in shown and where in checked
    broken = next(t for t in listed if t["id"] == "2")
    assert broken["status"] == "broken" and broken["error"]["line"] == int(where.split(":")[1])
    assert listed == cli_json(ws, "list", "--json")
    assert not ready.is_error and json.loads(ready.content[0].text) == cli_json(ws, "ready", "--json")
    assert where in ready.content[1].text, "ready's problems (the CLI's stderr) come as a second text block"


# --------------------------------------------------------------------- --tools, and the mcp package missing


def test_tools_option_offers_only_the_named_tools(ws):
    async def body(session):
        names = [t.name for t in (await session.list_tools()).tools]
        return names, await error(session, "log_session", id="1", did=["x"])

    names, refused = served(ws, body, "--tools", "show_task, list_tasks")
    assert names == ["list_tasks", "show_task"]
    assert "log_session" in refused
    assert "Session 1" not in task_text(ws, "1")


def test_an_unknown_tool_name_is_a_usage_error_listing_the_valid_ones(ws):
    done = cli(ws, "mcp", "--tools", "show_task,delete_everything", check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert "delete_everything" in done.stderr and all(name in done.stderr for name in NAMES)
    assert len(done.stderr.strip().splitlines()) == 1


def test_without_the_mcp_package_it_says_what_to_install(ws):
    code = ("import sys; sys.modules['mcp'] = None; from specflux.cli.main import main; sys.exit(main(['mcp']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ws, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["specflux: the MCP server needs the mcp package: pip install 'specflux[mcp]'"]


def test_common_commands_do_not_import_mcp(ws):
    code = ("import sys; from specflux.cli.main import main; main(['list', '--json']); main(['show', '1']); "
            "print('MCP', sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ws, capture_output=True, text=True)
    assert "MCP []" in done.stdout, done.stdout + done.stderr
