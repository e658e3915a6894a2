"""Agent CLI presets (specflux/agent/presets.py) and `[agents.NAME]`: the command line each role
gets, where the context goes, a CLI that is not installed, and a user's own agent CLI run by the
real `specflux run` / `flow start` with its context on stdin, as an argument, or in a file."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import run

from specflux.agent.presets import ARG_LIMIT, CLAUDE, PRESETS, Preset, names, resolve
from specflux.base.errors import ParseError, UsageError
from specflux.store.config import load_config

# A user's own agent CLI: saves what it got (argv, stdin, its prompt file, its role) into the
# repository's .specflux/cache (writable in the sandbox), ticks the criteria, writes a file.
AGENT = '''\
import json, os, pathlib, subprocess, sys
role = os.environ.get("SPECFLUX_ROLE", "coder")
seen = {"argv": sys.argv[1:], "stdin": sys.stdin.read(), "role": role,
        "prompt_file": pathlib.Path(os.environ["SPECFLUX_PROMPT_FILE"]).read_text()}
out = pathlib.Path(".specflux/cache/seen-" + role + ".json")
out.write_text(json.dumps(seen))
if role == "coder":
    pathlib.Path("work.txt").write_text("done\\n")
    subprocess.run(["specflux", "check", os.environ["SPECFLUX_TASK_ID"], "1"], check=True)
    task = pathlib.Path(os.environ["SPECFLUX_TASK_FILE"])
    task.write_text(task.read_text().replace("(To be completed)", "### Summary\\nwork.txt\\n\\n### For Downstream Tasks\\nnone"))
else:
    verdict = {"approved": True, "issues": [], "criteria_results": [{"criterion": "1", "met": True}]}
    subprocess.run(["specflux", "submit-review", "--json", "-"], input=json.dumps(verdict), text=True, check=True)
'''


def test_every_role_gets_its_command_line():
    prompt = "the protocol\n\nthe task"
    coder = CLAUDE.command_line("coder", prompt, "/tmp/p.md")
    reviewer = CLAUDE.command_line("reviewer", prompt, "/tmp/p.md", model="opus")
    assert coder.startswith("claude -p --output-format stream-json") and "Edit,Write" in coder
    assert "--model" not in coder  # the CLI's own model unless one is named
    assert "Edit," not in reviewer and reviewer.endswith("--tools Read,Glob,Grep,Bash --allowedTools Read,Glob,Grep,Bash --model opus")
    assert CLAUDE.stdin(prompt) == prompt.encode() and prompt not in coder
    assert "claude" in names() and set(PRESETS) <= set(names())
    for preset in PRESETS.values():
        assert preset.install and preset.program and preset.usage
        assert all(role in ("coder", "reviewer", "planner") for role in preset.roles)


def test_the_context_as_an_argument_or_a_file():
    arg = Preset("a", "agent", "agent run --quiet", handover="arg")
    line = arg.command_line("coder", "it's the context", "/tmp/p f.md")
    assert shlex.split(line) == ["agent", "run", "--quiet", "it's the context"]
    assert arg.stdin("x") == b""
    placed = Preset("a", "agent", "agent --message {prompt} --yes", handover="arg")
    assert shlex.split(placed.command_line("coder", "ctx", "/p"))[:3] == ["agent", "--message", "ctx"]
    long = arg.command_line("coder", "x" * (ARG_LIMIT + 1), "/tmp/p f.md")
    assert "x" * 100 not in long and "/tmp/p f.md" in shlex.split(long)[-1]  # a pointer to the file
    file = Preset("f", "agent", "agent --message-file {prompt_file} --yes", handover="file")
    assert shlex.split(file.command_line("coder", "ctx", "/tmp/p f.md")) == [
        "agent", "--message-file", "/tmp/p f.md", "--yes"]
    braces = Preset("j", "agent", """agent --settings '{"a": 1}'""", handover="file")
    assert shlex.split(braces.command_line("coder", "c", "/p")) == ["agent", "--settings", '{"a": 1}', "/p"]


def test_resolving_a_name():
    assert resolve("claude") is CLAUDE
    assert resolve("command", "my-agent --go").command == "my-agent --go"
    with pytest.raises(UsageError, match="needs --cmd"):
        resolve("command")
    with pytest.raises(UsageError, match="unknown agent 'nope'.*claude.*agents.nope"):
        resolve("nope")
    with pytest.raises(UsageError, match="--cmd is for --agent command"):
        resolve("claude", "claude -p")


def test_agents_in_config_toml_are_read_and_checked(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[agents.mine]\ncommand = "my-agent {prompt_file}"\ncontext = "file"\nusage = "claude"\n'
                    'roles = { reviewer = "--read-only" }\n')
    entry = load_config(path).agents["mine"]
    preset = resolve("mine", agents=load_config(path).agents)
    assert (entry.context, preset.handover, preset.usage, preset.program) == ("file", "file", "claude", "my-agent")
    assert preset.command_line("reviewer", "c", "/p") == "my-agent /p --read-only"
    for text, message in [('[agents.x]\ncontext = "stdin"\n', "needs a command"),
                          ('[agents.x]\ncommand = "a"\ncontext = "pipe"\n', "context must be one of"),
                          ('[agents.x]\ncommand = "a"\nflavour = 1\n', "unknown setting"),
                          ('[agents.command]\ncommand = "a"\n', "built-in"),
                          ('[agents.x]\ncommand = "a"\nroles = { boss = "b" }\n', "roles")]:
        path.write_text(text)
        with pytest.raises(ParseError, match=message):
            load_config(path)


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    (git_repo / "agent.py").write_text(AGENT)
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "Do work", "--ac", "work.txt exists")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def specflux(repo: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPECFLUX_CLI_SANDBOX": "auto",
           "PATH": path if path is not None else os.pathsep.join([str(Path(sys.executable).parent),
                                                                 os.environ.get("PATH", "")])}
    return subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args], capture_output=True,
                          text=True, env=env, timeout=300)


def add_agent(repo: Path, context: str, command: str) -> None:
    with open(repo / ".specflux" / "config.toml", "a") as f:
        f.write(f"\n[agents.mine]\ncommand = {json.dumps(command)}\ncontext = \"{context}\"\n"
                'roles = { reviewer = "--as-reviewer" }\n')


@pytest.mark.parametrize("context", ["stdin", "arg", "file"])
def test_a_users_own_agent_cli_runs_a_whole_flow(project, context):
    command = f"{shlex.quote(sys.executable)} agent.py --given"
    add_agent(project, context, command + (" --file {prompt_file}" if context == "file" else ""))
    done = specflux(project, "flow", "start", "--all", "--agent", "mine")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    state = json.loads(specflux(project, "flow", "status", "--json").stdout)
    assert [t["status"] for t in state["tasks"]] == ["complete"]
    coder = json.loads((project / ".specflux" / "cache" / "seen-coder.json").read_text())
    reviewer = json.loads((project / ".specflux" / "cache" / "seen-reviewer.json").read_text())
    assert "Do work" in coder["prompt_file"] and reviewer["argv"][-1 if context != "arg" else -2] == "--as-reviewer"
    if context == "stdin":
        assert "Do work" in coder["stdin"] and coder["argv"] == ["--given"]
    elif context == "arg":
        assert coder["stdin"] == "" and "Do work" in coder["argv"][-1]
    else:
        assert coder["stdin"] == "" and coder["argv"][:2] == ["--given", "--file"]
        assert Path(coder["argv"][2]).name == "prompt.md"


def test_a_cli_that_is_not_installed_is_one_line(project):
    before = (project / ".specflux" / "task-states" / "task-1-state.md").read_bytes()
    done = specflux(project, "run", "1", "--agent", "claude", path=str(Path(sys.executable).parent))
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "npm install -g @anthropic-ai/claude-code" in done.stderr and "Traceback" not in done.stderr
    assert (project / ".specflux" / "task-states" / "task-1-state.md").read_bytes() == before
    flow = specflux(project, "flow", "start", "--all", "--agent", "claude", path=str(Path(sys.executable).parent))
    assert flow.returncode == 1 and flow.stderr.count("\n") == 1 and "npm install -g" in flow.stderr
    assert not (project / ".specflux" / "runs").exists() or not list((project / ".specflux" / "runs").glob("run-*"))
    (project / "prd.md").write_text("# A PRD\n")
    planned = specflux(project, "plan", str(project / "prd.md"), "--agent", "claude",
                       path=str(Path(sys.executable).parent))
    assert planned.returncode == 1 and "npm install -g" in planned.stderr and "Traceback" not in planned.stderr
    with open(project / ".specflux" / "config.toml", "a") as f:
        f.write('\n[agents.odd]\ncommand = "true"\nusage = "mystery"\n')
    odd = specflux(project, "flow", "start", "--all", "--agent", "odd")
    assert odd.returncode == 1 and "usage = 'mystery' names no reader" in odd.stderr
    unknown = specflux(project, "run", "1", "--agent", "nope")
    assert unknown.returncode == 2 and "unknown agent 'nope'" in unknown.stderr
