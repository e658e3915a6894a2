"""`--agent codex|gemini|aider|opencode` with the real CLIs, offline: each pinned binary (installed by
.ci/run: npm for Codex, Gemini CLI and opencode, a venv of its own for aider) talks to a scripted
model server on 127.0.0.1 (specflux/agent/scripted_openai.py: the Responses API for Codex, Chat
Completions for aider and opencode; scripted_gemini.py for Gemini CLI). Each real CLI reads the
context specflux hands it, edits with its own edit tool, runs `specflux` through its own shell
tool, and hands off: a whole `flow start` (coder, then reviewer with `specflux submit-review`), a
`run` (one coder session completing the task) and a `plan` (planner with `specflux submit-tasks`),
in the sandbox, as a user would run them.

The CLIs are found under $SPECFLUX_TEST_TOOLS (default ~/.cache/specflux-test-tools): codex/,
gemini-cli/, opencode/ (npm prefixes) and aider/ (a venv); a test skips when its CLI is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from conftest import git
from calc_project import PLACEHOLDER, RIGHT, TOOLS, WRONG, calc_project
from helpers import run

from specflux.agent.presets import PRESETS
from specflux.agent.scripted import Reply, ScriptedServer, call
from specflux.agent.scripted_gemini import ScriptedGemini
from specflux.agent.scripted_openai import ScriptedOpenAI

CHAIN = "### Summary\nadd() returns a + b\n\n### For Downstream Tasks\nadd() returns a + b\n"
HAND_OFF = ('python3 test_calc.py && specflux check 1 1 && specflux session 1 --did "add returns the sum" '
            '--issues None --next "review" --no-commit')
VERDICT = {"approved": True, "criteria_results": [{"criterion": "1", "met": True}], "issues": []}
PLAN = {"tasks": [{"key": "sub", "title": "Add sub", "requirements": "sub(a, b) returns a - b",
                   "acceptance_criteria": ["sub(5, 3) == 2"], "priority": 1, "complexity": "simple",
                   "dependencies": []},
                  {"key": "sub-docs", "title": "Document sub", "requirements": "README explains sub",
                   "acceptance_criteria": ["README mentions sub"], "priority": 2, "complexity": "simple",
                   "dependencies": ["sub"]}]}


def hand_in(command: str, payload: dict) -> str:
    """One shell line (aider runs each line of a block on its own) piping JSON to `specflux`."""
    return f"echo '{json.dumps(payload)}' | specflux {command} --json -"


@dataclass
class Cli:
    """One agent CLI under test: where it is, how it is pointed at its scripted server, and what
    its model's turns look like (its own tool names and arguments)."""

    name: str
    binary: Path
    model: str
    server: Callable[..., ScriptedServer]
    configure: Callable[[ScriptedServer, Path], dict[str, str]]  # writes HOME's files, returns env
    coder: Callable[[Path], list[Reply]]
    reviewer: Callable[[Path], list[Reply]]
    planner: Callable[[Path], list[Reply]]
    read_tools: tuple[str, ...] = ()  # the reviewer must be offered these ...
    edit_tools: tuple[str, ...] = ()  # ... and not these
    refusal: str = ""  # or: the reviewer's first turn tries an edit, refused with this
    node: int = 0  # the Node.js major version its npm package needs, if any

    def skip_reason(self) -> str | None:
        if not self.binary.exists():
            return (f"{self.name} is not installed at {self.binary} (.ci/run installs it, pinned to "
                    f"{PRESETS[self.name].verified})")
        if self.node and node_major() < self.node:
            return f"{self.name} needs Node.js {self.node} or later (this node: {node_major() or 'none'})"
        return None


def node_major() -> int:
    """The major version of the `node` on PATH, 0 without one."""
    try:
        done = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return 0
    return int(done.stdout.strip().lstrip("v").split(".")[0] or 0) if done.returncode == 0 else 0


# --------------------------------------------------------------------- Codex


def codex_home(server: ScriptedServer, home: Path) -> dict[str, str]:
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "scripted"\ncheck_for_update_on_startup = false\n\n'
        f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{server.base_url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n')
    return {"OPENAI_API_KEY": "sk-scripted"}  # a variable the preset passes on (OPENAI_*)


def codex_patch(path: str, old: str, new: str) -> Reply:
    """Codex's apply_patch (a freeform tool: the patch is the call's whole input)."""
    body = "".join(f"-{line}\n" for line in old.splitlines()) + "".join(f"+{line}\n" for line in new.splitlines())
    return Reply(calls=[call("apply_patch", input=f"*** Begin Patch\n*** Update File: {path}\n@@\n{body}*** End Patch\n")])


CODEX = Cli(
    name="codex", binary=TOOLS / "codex" / "node_modules" / ".bin" / "codex", model="gpt-5.5",
    server=ScriptedOpenAI, configure=codex_home,
    coder=lambda repo: [
        Reply(calls=[call("exec_command", cmd="cat src/calc.py; echo role=$SPECFLUX_ROLE")]),
        codex_patch("src/calc.py", "    return a - b", "    return a + b"),
        Reply(calls=[call("exec_command", cmd=HAND_OFF)]),
        codex_patch(".specflux/task-states/task-1-state.md", PLACEHOLDER, CHAIN),
        Reply(text="Fixed add; the test passes."),
    ],
    reviewer=lambda repo: [
        Reply(calls=[call("exec_command", cmd="cat src/calc.py && python3 test_calc.py")]),
        Reply(calls=[call("exec_command", cmd=hand_in("submit-review", VERDICT))]),
        Reply(text="Approved."),
    ],
    planner=lambda repo: [
        Reply(calls=[call("exec_command", cmd="cat docs/prd.md")]),
        Reply(calls=[call("exec_command", cmd=hand_in("submit-tasks", PLAN))]),
        Reply(text="Planned."),
    ],
)


# --------------------------------------------------------------------- Gemini CLI


def gemini_home(server: ScriptedServer, home: Path) -> dict[str, str]:
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True}}))
    return {"GOOGLE_GEMINI_BASE_URL": server.base_url, "GEMINI_API_KEY": "scripted"}


GEMINI = Cli(
    name="gemini", binary=TOOLS / "gemini-cli" / "node_modules" / ".bin" / "gemini", model="gemini-2.5-flash",
    server=ScriptedGemini, configure=gemini_home,
    coder=lambda repo: [
        Reply(calls=[call("read_file", file_path=str(repo / "src" / "calc.py"))]),
        Reply(calls=[call("replace", file_path=str(repo / "src" / "calc.py"), old_string="return a - b",
                          new_string="return a + b", instruction="add returns the sum")]),
        Reply(calls=[call("run_shell_command", command=HAND_OFF, description="test, tick, log")]),
        Reply(calls=[call("replace", file_path=str(repo / ".specflux" / "task-states" / "task-1-state.md"),
                          old_string=PLACEHOLDER, new_string=CHAIN, instruction="the chain output")]),
        Reply(text="Fixed add; the test passes."),
    ],
    reviewer=lambda repo: [
        Reply(calls=[call("read_file", file_path=str(repo / "src" / "calc.py"))]),
        Reply(calls=[call("run_shell_command", command=hand_in("submit-review", VERDICT), description="verdict")]),
        Reply(text="Approved."),
    ],
    planner=lambda repo: [
        Reply(calls=[call("read_file", file_path=str(repo / "docs" / "prd.md"))]),
        Reply(calls=[call("run_shell_command", command=hand_in("submit-tasks", PLAN), description="tasks")]),
        Reply(text="Planned."),
    ],
    read_tools=("read_file", "run_shell_command"), edit_tools=("replace", "write_file"), node=20,
)


# --------------------------------------------------------------------- aider


def aider_home(server: ScriptedServer, home: Path) -> dict[str, str]:
    home.mkdir(parents=True)
    (home / ".aider.model.metadata.json").write_text(json.dumps({"openai/scripted": {
        "max_input_tokens": 128000, "max_output_tokens": 8192, "input_cost_per_token": 1e-06,
        "output_cost_per_token": 2e-06, "litellm_provider": "openai", "mode": "chat"}}))
    return {"OPENAI_API_BASE": f"{server.base_url}/v1", "OPENAI_API_KEY": "sk-scripted", "AIDER_EDIT_FORMAT": "diff"}


def aider_edit(path: str, old: str, new: str) -> str:
    """A SEARCH/REPLACE block of aider's `diff` edit format."""
    return f"{path}\n```\n<<<<<<< SEARCH\n{old}\n=======\n{new.rstrip()}\n>>>>>>> REPLACE\n```\n"


AIDER = Cli(
    name="aider", binary=TOOLS / "aider" / "bin" / "aider", model="openai/scripted",
    server=ScriptedOpenAI, configure=aider_home,
    coder=lambda repo: [
        # aider adds the files a reply names to the chat and asks again; then the edits apply
        Reply(text="I need to see src/calc.py and test_calc.py first."),
        Reply(text="Fixing add.\n\n" + aider_edit("src/calc.py", "    return a - b", "    return a + b") + "\n"
              + aider_edit(".specflux/task-states/task-1-state.md", PLACEHOLDER, CHAIN)
              + f"\nThen test, tick and log:\n\n```bash\n{HAND_OFF}\n```\n"),
    ],
    reviewer=lambda repo: [
        Reply(text=f"src/calc.py returns a + b.\n\n```bash\n{hand_in('submit-review', VERDICT)}\n```\n"),
    ],
    planner=lambda repo: [
        Reply(text=f"Two tasks.\n\n```bash\n{hand_in('submit-tasks', PLAN)}\n```\n"),
    ],
)


# --------------------------------------------------------------------- opencode


def opencode_home(server: ScriptedServer, home: Path) -> dict[str, str]:
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
        "provider": {"scripted": {"npm": "@ai-sdk/openai-compatible", "name": "Scripted",
                                  "options": {"baseURL": f"{server.base_url}/v1", "apiKey": "sk-scripted"},
                                  "models": {"scripted-model": {"name": "Scripted model"}}}}}))
    return {"OPENCODE_DISABLE_MODELS_FETCH": "1"}


OPENCODE = Cli(
    name="opencode", binary=TOOLS / "opencode" / "node_modules" / ".bin" / "opencode",
    model="scripted/scripted-model", server=ScriptedOpenAI, configure=opencode_home,
    coder=lambda repo: [
        Reply(calls=[call("read", filePath=str(repo / "src" / "calc.py"))]),
        Reply(calls=[call("edit", filePath=str(repo / "src" / "calc.py"), oldString="return a - b",
                          newString="return a + b")]),
        Reply(calls=[call("bash", command=HAND_OFF, description="test, tick, log")]),
        Reply(calls=[call("edit", filePath=str(repo / ".specflux" / "task-states" / "task-1-state.md"),
                          oldString=PLACEHOLDER, newString=CHAIN)]),
        Reply(text="Fixed add; the test passes."),
    ],
    reviewer=lambda repo: [
        # its `plan` agent has the edit tool, and refuses to use it
        Reply(calls=[call("edit", filePath=str(repo / "src" / "calc.py"), oldString="a + b", newString="b + a")]),
        Reply(calls=[call("read", filePath=str(repo / "src" / "calc.py"))]),
        Reply(calls=[call("bash", command=hand_in("submit-review", VERDICT), description="verdict")]),
        Reply(text="Approved."),
    ],
    planner=lambda repo: [
        Reply(calls=[call("read", filePath=str(repo / "docs" / "prd.md"))]),
        Reply(calls=[call("bash", command=hand_in("submit-tasks", PLAN), description="tasks")]),
        Reply(text="Planned."),
    ],
    read_tools=("read", "bash"), refusal="prevents you from using this specific tool call",
)

CLIS = [CODEX, GEMINI, AIDER, OPENCODE]


def each_cli():
    return [pytest.param(cli, id=cli.name, marks=pytest.mark.skipif(cli.skip_reason() is not None,
                                                                      reason=cli.skip_reason() or ""))
            for cli in CLIS]


# --------------------------------------------------------------------- running them


# What the CLIs would fetch besides their model (update checks, analytics, price lists, plugins
# from npm) goes to a proxy that is not there and fails at once: the tests never reach the network.
OFFLINE = {name: "http://127.0.0.1:9" for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy",
                                                   "http_proxy", "all_proxy")}
OFFLINE |= {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def cli_env(cli: Cli, server: ScriptedServer, home: Path) -> dict[str, str]:
    """The CLI and `specflux` on PATH, pointed at the scripted server, with a HOME of its own."""
    extra = cli.configure(server, home)
    path = os.pathsep.join([str(cli.binary.parent), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # SPECFLUX_AGENT_HOSTS: the scripted server, for the CLIs whose base URL is in their own
    # config file (Codex, opencode), which a confined network lets them reach only when named
    return {**os.environ, **extra, **OFFLINE, "PATH": path, "HOME": str(home), "SPECFLUX_CLI_SANDBOX": "auto",
            "SPECFLUX_AGENT_HOSTS": server.base_url}


def specflux(repo: Path, *args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args],
                          capture_output=True, text=True, env=env, timeout=timeout)


def tool_names(body: dict) -> set[str]:
    """The names of the tools a request offers (Chat Completions', or Gemini's declarations)."""
    names = {tool["function"]["name"] for tool in body.get("tools") or [] if "function" in tool}
    for tool in body.get("tools") or []:
        names |= {declared["name"] for declared in tool.get("functionDeclarations") or []}
    return names


def role_of(body: dict) -> str:
    return "reviewer" if "# Review of task" in json.dumps(body) else "coder"


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """Task 1: fix add (its test fails); [validate] runs the test."""
    return calc_project(git_repo, capsys)


@pytest.mark.parametrize("cli", each_cli())
def test_a_run_codes_and_reviews_with_the_real_cli(cli: Cli, project: Path, tmp_path: Path):
    """`flow start 1 --agent CLI`: the coder fixes the code with the CLI's edit tool, tests, ticks and
    logs through `specflux` with its shell tool, writes the chain output; the engine's tests pass;
    the reviewer reads the code and hands in with `specflux submit-review`; the task completes."""
    scripts = {"coder": cli.coder(project), "reviewer": cli.reviewer(project)}
    with cli.server(scripts, route=role_of) as server:
        env = cli_env(cli, server, tmp_path / "home")
        done = specflux(project, "flow", "start", "1", "--agent", cli.name, "--model", cli.model, env=env)
        requests = list(server.requests)
        served = dict(server.served)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert served == {"coder": len(scripts["coder"]), "reviewer": len(scripts["reviewer"])}, served
    coder = [body for body in requests if role_of(body) == "coder"]
    reviewer = [body for body in requests if role_of(body) == "reviewer"]
    # the real CLI read the real context, and its real tools ran (their results came back)
    assert "Fix add" in json.dumps(coder[0]) and "add returns the sum" in json.dumps(coder[0])
    assert "return a - b" in json.dumps(coder[1])  # the file as it read it (aider: added to the chat)
    # the test ran and the tick was made through its shell (aider asks no more after running it)
    assert "ok\\ntask 1: checked 1" in json.dumps(coder[-1]) or cli.name == "aider", json.dumps(coder[-1])[-3000:]
    if cli.read_tools:  # the reviewer may read and run commands, not edit
        offered = tool_names(reviewer[0])
        assert set(cli.read_tools) <= offered and not set(cli.edit_tools) & offered, offered
    if cli.name == "aider":  # the preset's note after the context: a hand-in on one line
        assert "hand in on one line" in json.dumps(reviewer[0])
    if cli.refusal:  # offered, but its own permissions refuse a reviewer's edit
        assert cli.refusal in json.dumps(reviewer[1]), json.dumps(reviewer[1])[-2000:]
    # the run: the task complete, its code fixed, one coder and one reviewer commit
    state = json.loads(specflux(project, "flow", "status", "--json", env=env).stdout)
    assert state["status"] == "completed", state
    assert [t["status"] for t in state["tasks"]] == ["complete"]
    assert (project / "src" / "calc.py").read_text() == RIGHT
    shown = json.loads(specflux(project, "show", "1", "--json", env=env).stdout)
    assert shown["criteria"][0]["checked"] and "add returns the sum" in json.dumps(shown["sessions"])
    roles = git(project, "log", "--format=%(trailers:key=Specflux-Role,valueonly)").split()
    assert roles.count("coder") == 1 and roles.count("reviewer") == 1
    assert git(project, "status", "--porcelain", "--", ".", ":!.specflux") == ""  # no CLI litter
    # usage came from the CLI's own output: what the server said, 100 input tokens a request
    assert state["metrics"]["inputTokens"] == 100 * len(requests), state["metrics"]


@pytest.mark.parametrize("cli", each_cli())
def test_planning_with_the_real_cli(cli: Cli, project: Path, tmp_path: Path):
    """`plan PRD --agent CLI`: the planner hands its tasks in with `specflux submit-tasks`."""
    prd = project / "docs" / "prd.md"
    prd.parent.mkdir()
    prd.write_text("# Subtraction\n\nAdd sub(a, b) to src/calc.py, then document it.\n")
    turns = cli.planner(project)
    with cli.server(turns) as server:
        env = cli_env(cli, server, tmp_path / "home")
        done = specflux(project, "plan", str(prd), "--agent", cli.name, "--model", cli.model, "--json", env=env)
        requests = list(server.requests)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(requests) == len(turns)
    assert "Subtraction" in json.dumps(requests[0]) or "prd.md" in json.dumps(requests[0])
    start = max(done.stdout.rfind('{"prd"'), done.stdout.rfind('{\n  "prd"'))  # after the CLI's own output
    result = json.loads(done.stdout[start:])
    assert [t["title"] for t in result["tasks"]] == ["Add sub", "Document sub"]
    created = {t["key"]: t["id"] for t in result["tasks"]}
    shown = json.loads(specflux(project, "show", created["sub-docs"], "--json", env=env).stdout)
    assert shown["dependencies"] == [created["sub"]]


@pytest.mark.parametrize("cli", each_cli())
def test_one_session_with_run(cli: Cli, project: Path, tmp_path: Path):
    """`specflux run 1 --agent CLI`: one coder session outside a run; its hand-off (criterion ticked,
    session logged, chain output written) completes the task, and the commit carries the usage."""
    turns = cli.coder(project)
    with cli.server(turns) as server:
        env = cli_env(cli, server, tmp_path / "home")
        done = specflux(project, "run", "1", "--agent", cli.name, "--model", cli.model, env=env)
        requests = list(server.requests)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len(requests) == len(turns)
    assert (project / "src" / "calc.py").read_text() == RIGHT
    trailers = git(project, "log", "-1", "--format=%(trailers:only,unfold)")
    assert "Specflux-Task: 1" in trailers and "Specflux-Status: complete" in trailers, trailers
    assert f"Specflux-Input-Tokens: {100 * len(turns)}" in trailers, trailers


@pytest.mark.skipif(CODEX.skip_reason() is not None, reason=CODEX.skip_reason() or "")
def test_parallel_lanes_with_codex(git_repo: Path, tmp_path: Path, capsys):
    """`flow start --parallel 2 --agent codex`: two tasks at once, each coder in its own worktree
    (relative paths, its own task file there), each reviewer handing in from its lane; both merge."""
    (git_repo / "src").mkdir()
    (git_repo / "src" / "calc.py").write_text(WRONG)
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "Fix add", "--ac", "add returns the sum")[0] == 0
    assert run(capsys, git_repo, "new", "Write notes", "--ac", "NOTES.md exists")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")

    def coder(task: str, change: Reply) -> list[Reply]:
        log = f'specflux check {task} 1 && specflux session {task} --did "done" --issues None --next "review" --no-commit'
        return [change, Reply(calls=[call("exec_command", cmd=f"pwd; {log}")]),
                codex_patch(f".specflux/task-states/task-{task}-state.md", PLACEHOLDER, CHAIN), Reply(text="Done.")]

    reviewer = [Reply(calls=[call("exec_command", cmd=hand_in("submit-review", VERDICT))]), Reply(text="Approved.")]

    notes = Reply(calls=[call("apply_patch", input="*** Begin Patch\n*** Add File: NOTES.md\n+add returns the sum\n"
                                                   "*** End Patch\n")])
    scripts = {("coder", "1"): coder("1", codex_patch("src/calc.py", "    return a - b", "    return a + b")),
               ("coder", "2"): coder("2", notes),
               ("reviewer", "1"): reviewer, ("reviewer", "2"): list(reviewer)}

    def route(body: dict) -> tuple[str, str]:
        text = json.dumps(body)
        task = "1" if "task #1: Fix add" in text else "2"
        return role_of(body), task

    with ScriptedOpenAI(scripts, route=route) as server:
        env = cli_env(CODEX, server, tmp_path / "home")
        done = specflux(git_repo, "flow", "start", "--parallel", "2", "--agent", "codex", "--model", CODEX.model, env=env)
        served = dict(server.served)
        outputs = {item["output"] for body in server.requests for item in body["input"]
                   if item.get("type") == "function_call_output" and "session 1 recorded" in item["output"]}
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert served == {key: len(turns) for key, turns in scripts.items()}, served
    assert len(outputs) == 2 and all("/.specflux/worktrees/" in out for out in outputs), outputs  # pwd: its lane
    state = json.loads(specflux(git_repo, "flow", "status", "--json", env=env).stdout)
    assert state["status"] == "completed" and [t["status"] for t in state["tasks"]] == ["complete", "complete"]
    assert (git_repo / "src" / "calc.py").read_text() == RIGHT
    assert (git_repo / "NOTES.md").read_text() == "add returns the sum\n"
