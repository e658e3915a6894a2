"""`--agent claude` with the real Claude Code CLI, offline: the pinned `claude` binary (installed by
.ci/run with npm) talks to a scripted Messages API on 127.0.0.1 (specflux/agent/scripted_claude.py).
The real CLI reads the context specflux hands it, runs its real tools (Bash, Write, Edit, Read),
and hands off through `specflux`, in the sandbox, in every role of a whole `flow start` run.

The CLI is found at $SPECFLUX_CLAUDE, else under $SPECFLUX_TEST_TOOLS (default
~/.cache/specflux-test-tools)/claude-code/node_modules/.bin/claude; without it the tests skip.
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
from calc_project import PLACEHOLDER, RIGHT, STILL_WRONG, TOOLS, calc_project
from helpers import run

from specflux.agent.presets import CLAUDE
from specflux.agent.scripted import Reply, call
from specflux.agent.scripted_claude import ClaudeCodeServer

CLAUDE_BIN = Path(os.environ.get("SPECFLUX_CLAUDE") or TOOLS / "claude-code" / "node_modules" / ".bin" / "claude")

pytestmark = pytest.mark.skipif(not CLAUDE_BIN.exists(), reason=(
    f"Claude Code is not installed at {CLAUDE_BIN} (.ci/run installs it: npm install --prefix "
    f"{TOOLS}/claude-code @anthropic-ai/claude-code@{CLAUDE.verified})"))



def claude_env(server: ClaudeCodeServer, home: Path) -> dict[str, str]:
    """The CLI and `specflux` on PATH, pointed at the scripted server, with a HOME of its own."""
    path = os.pathsep.join([str(CLAUDE_BIN.parent), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, **server.env(), "PATH": path, "HOME": str(home), "SPECFLUX_CLI_SANDBOX": "auto"}


def specflux(repo: Path, *args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args],
                          capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """Task 1 (fix add: the test fails) and task 2 (document it, depends on 1), [validate] set."""
    return calc_project(git_repo, capsys, document=True)


def chain_output(task_file: Path, summary: str) -> list[Reply]:
    """The coder's hand-off: read the task file, then write its chain output in place."""
    section = (f"### Summary\n{summary}\n\n### For Downstream Tasks\n{summary}\n")
    return [Reply(calls=[call("Read", file_path=str(task_file))]),
            Reply(calls=[call("Edit", file_path=str(task_file), old_string=PLACEHOLDER, new_string=section)])]


def review(approved: bool, criterion: str, issues: list[dict] | None = None) -> Reply:
    verdict = {"approved": approved, "issues": issues or [],
               "criteria_results": [{"criterion": criterion, "met": approved}]}
    command = f"specflux submit-review --json - <<'EOF'\n{json.dumps(verdict)}\nEOF"
    return Reply(calls=[call("Bash", command=command, description="hand in the review")])


def test_a_whole_run_with_the_real_claude_code(project, tmp_path):
    task1 = project / ".specflux" / "task-states" / "task-1-state.md"
    task2 = project / ".specflux" / "task-states" / "task-2-state.md"
    calc = project / "src" / "calc.py"
    issue = {"severity": "major", "description": "README does not say what add returns"}
    turns = [
        # task 1, coder 1: a wrong fix; the engine's [validate] fails it
        Reply(calls=[call("Bash", command="cat src/calc.py && echo $SPECFLUX_ROLE", description="look")]),
        Reply(calls=[call("Write", file_path=str(calc), content=STILL_WRONG)]),
        Reply(text="I changed add."),
        # task 1, coder 2: told which test failed, fixes it, ticks the criterion, hands off
        Reply(calls=[call("Read", file_path=str(calc))]),
        Reply(calls=[call("Edit", file_path=str(calc), old_string="a * b", new_string="a + b")]),
        Reply(calls=[call("Bash", command="python3 test_calc.py && specflux check 1 1", description="test, tick")]),
        *chain_output(task1, "add() returns a + b"),
        Reply(text="Fixed add; the test passes."),
        # task 1, reviewer: approves
        review(True, "add returns the sum"), Reply(text="Approved."),
        # task 2, coder 1: a README, handed off
        Reply(calls=[call("Write", file_path=str(project / "README.md"), content="# project\n\nadd(a, b).\n")]),
        Reply(calls=[call("Bash", command="specflux check 2 1", description="tick")]),
        *chain_output(task2, "README explains add"),
        Reply(text="Documented."),
        # task 2, reviewer: rejects
        review(False, "README explains add", [issue]), Reply(text="Rejected."),
        # task 2, coder 2: answers the rejection
        Reply(calls=[call("Write", file_path=str(project / "README.md"),
                          content="# project\n\nadd(a, b) returns the sum of a and b.\n")]),
        Reply(text="README now says what add returns."),
        # task 2, reviewer 2: approves
        review(True, "README explains add"), Reply(text="Approved."),
    ]
    with ClaudeCodeServer(turns) as server:
        env = claude_env(server, tmp_path / "home")
        done = specflux(project, "flow", "start", "--all", "--agent", "claude", env=env)
        requests = list(server.requests)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert len(requests) == len(turns), f"{len(requests)} agent requests for {len(turns)} scripted turns"
    # the real CLI read the real context: the task, its role, and on the retry the failed test
    first = json.dumps(requests[0]["messages"][0])
    assert "Fix add" in first and "add returns the sum" in first
    retry = json.dumps(requests[3]["messages"][0])
    assert "AssertionError" in retry or "failed" in retry.lower(), retry[:2000]
    answer = json.dumps(requests[len(turns) - 4]["messages"][0])
    assert "README does not say what add returns" in answer
    # its real tools ran: Bash saw the role in its environment; the reviewer's tools were read-only ones
    tool_results = json.dumps(requests[1]["messages"])
    assert "return a - b" in tool_results and "coder" in tool_results
    reviewer_tools = {tool["name"] for tool in requests[10]["tools"]}
    assert "Bash" in reviewer_tools and not {"Edit", "Write"} & reviewer_tools
    # the run: both tasks complete and wired, the code fixed, a rejection answered
    state = json.loads(specflux(project, "flow", "status", "--json", env=env).stdout)
    assert state["status"] == "completed", state
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    assert state["taskAttempts"] == {"1": 2, "2": 2}
    assert calc.read_text() == RIGHT
    assert "returns the sum" in (project / "README.md").read_text()
    shown = json.loads(specflux(project, "show", "2", "--json", env=env).stdout)
    assert shown["chain_inputs"][0]["body"].startswith("add() returns a + b")
    assert shown["status"] == "complete"
    roles = git(project, "log", "--format=%(trailers:key=Specflux-Role,valueonly)").split()
    assert roles.count("coder") == 4 and roles.count("reviewer") == 3
    # usage came from Claude Code's own result lines
    assert state["metrics"]["inputTokens"] > 0


def test_one_session_with_run(project, tmp_path):
    """`specflux run 1 --agent claude`: one coder session outside a run; its hand-off completes
    the task, wired into task 2, and the commit carries Claude Code's own usage."""
    task1 = project / ".specflux" / "task-states" / "task-1-state.md"
    turns = [
        Reply(calls=[call("Edit", file_path=str(project / "src" / "calc.py"), old_string="a - b",
                          new_string="a + b")]),
        Reply(calls=[call("Bash", command="python3 test_calc.py && specflux check 1 1", description="test")]),
        *chain_output(task1, "add() returns a + b"),
        Reply(text="Done."),
    ]
    with ClaudeCodeServer(turns) as server:
        done = specflux(project, "run", "1", "--agent", "claude", env=claude_env(server, tmp_path / "home"))
        tested = json.dumps(server.requests[2]["messages"][-1])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ok\\ntask 1: checked 1" in tested  # the test ran, and the tick, for real
    assert (project / "src" / "calc.py").read_text() == RIGHT
    shown = json.loads(specflux(project, "show", "2", "--json", env=dict(os.environ)).stdout)
    assert shown["chain_inputs"][0]["body"].startswith("add() returns a + b")
    trailers = git(project, "log", "-1", "--format=%(trailers:only,unfold)")
    assert "Specflux-Task: 1" in trailers and "Specflux-Status: complete" in trailers
    assert "Specflux-Input-Tokens: 500" in trailers  # 5 turns of 100, as Claude Code's result says


def test_planning_with_plan(project, tmp_path):
    """`specflux plan PRD --agent claude`: the planner reads the PRD with Read and hands its tasks
    in with `specflux submit-tasks`; a hand-in with an unknown dependency is refused back to it."""
    prd = project / "docs" / "prd.md"
    prd.parent.mkdir()
    prd.write_text("# Subtraction\n\nAdd sub(a, b) to src/calc.py, then document it.\n")
    tasks = [{"key": "sub", "title": "Add sub", "requirements": "sub(a, b) returns a - b",
              "acceptance_criteria": ["sub(5, 3) == 2"], "priority": 1, "complexity": "simple", "dependencies": []},
             {"key": "sub-docs", "title": "Document sub", "requirements": "README explains sub",
              "acceptance_criteria": ["README mentions sub"], "priority": 2, "complexity": "simple",
              "dependencies": ["sub"]}]
    wrong = [tasks[0], {**tasks[1], "dependencies": ["subtract"]}]

    def hand_in(items):
        payload = json.dumps({"tasks": items})
        return Reply(calls=[call("Bash", command=f"specflux submit-tasks --json - <<'EOF'\n{payload}\nEOF",
                                 description="hand in the tasks")])

    turns = [Reply(calls=[call("Read", file_path=str(prd))]), hand_in(wrong), hand_in(tasks), Reply(text="Planned.")]
    with ClaudeCodeServer(turns) as server:
        done = specflux(project, "plan", str(prd), "--agent", "claude", "--json",
                        env=claude_env(server, tmp_path / "home"))
        assert len(server.requests) >= 3, done.stdout[-3000:] + done.stderr[-3000:]
        refusal = json.dumps(server.requests[2]["messages"][-1])
        planner_tools = {tool["name"] for tool in server.requests[0]["tools"]}
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "subtract" in refusal  # the refusal named the unknown dependency, back to the agent
    assert not {"Edit", "Write"} & planner_tools
    # stdout: Claude Code's own stream (passed through), then plan's JSON
    result = json.loads(done.stdout[max(done.stdout.rfind('\n{"prd"'), done.stdout.rfind('\n{\n  "prd"')):])
    assert [t["title"] for t in result["tasks"]] == ["Add sub", "Document sub"]
    created = {t["key"]: t["id"] for t in result["tasks"]}
    shown = json.loads(specflux(project, "show", created["sub-docs"], "--json", env=dict(os.environ)).stdout)
    assert shown["dependencies"] == [created["sub"]]


def test_parallel_lanes_with_the_real_claude_code(git_repo, capsys, tmp_path):
    """`flow start --parallel 2 --agent claude`: two Claude Code sessions at once, each in its
    lane's worktree and sandbox, hand off through `specflux` (the reviewers' hand-ins land in the
    run's folder, outside the worktrees); both tasks are merged back."""
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    for n in ("1", "2"):
        assert run(capsys, git_repo, "new", f"File {n}", "--ac", f"file{n}.txt exists")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tasks")

    def coder(n: str) -> list[Reply]:
        hand_off = (f"echo {n} > file{n}.txt && specflux check {n} 1 && sed -i 's/^(To be completed)$/"
                    f"### Summary\\nfile{n}.txt written\\n\\n### For Downstream Tasks\\nnone/' \"$SPECFLUX_TASK_FILE\"")
        return [Reply(calls=[call("Bash", command=hand_off, description="work and hand off")]), Reply(text="Done.")]

    def route(body: dict) -> tuple[str, str]:
        first = json.dumps(body["messages"][0])
        found = re.search(r"(Review of|Session on) task #(\w+)", first)
        assert found, first[:2000]
        return ("reviewer" if found.group(1) == "Review of" else "coder", found.group(2))

    scripts = {("coder", n): coder(n) for n in ("1", "2")}
    scripts.update({("reviewer", n): [review(True, f"file{n}.txt exists"), Reply(text="Approved.")] for n in ("1", "2")})
    with ClaudeCodeServer(scripts, route=route) as server:
        done = specflux(git_repo, "flow", "start", "--all", "--parallel", "2", "--agent", "claude",
                        env=claude_env(server, tmp_path / "home"))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    state = json.loads(specflux(git_repo, "flow", "status", "--json", env=dict(os.environ)).stdout)
    assert [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    assert (git_repo / "file1.txt").read_text() == "1\n" and (git_repo / "file2.txt").read_text() == "2\n"
    assert server.served == {key: 2 for key in scripts}
