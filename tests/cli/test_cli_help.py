"""A command line that fits: every argument of every command says what it is for, `--help` of each
command works, every `--json` prints JSON, usage mistakes exit 2 and data problems exit 1.

The whole parser tree (`build_parser(full=True)`, the flow commands and the hand-ins included) is
walked, so a command or option added later without help, or a `--json` no test runs, fails here
with its name.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git

from specflux.agent.scripted import Reply, call
from specflux.cli.main import main
from specflux.cli.parser import build_parser

# Commands whose use is not obvious from their options: their --help ends with examples.
WITH_EXAMPLES = ["new", "session", "complete", "set", "run", "plan", "import", "completion", "flow start"]


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for `parser` and every parser below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, (*path, name))


def commands() -> list[tuple[str, ...]]:
    return [path for path, _ in walk(build_parser(full=True))]


def parser_for(path: tuple[str, ...]) -> argparse.ArgumentParser:
    return dict(walk(build_parser(full=True)))[path]


def test_the_tree_is_the_whole_command_line():
    names = {" ".join(p) for p in commands()}
    assert {"list", "ready", "graph", "completion", "mcp", "board", "submit-review", "submit-tasks",
            "flow", "flow start", "flow status", "flow replay"} <= names


def test_every_argument_of_every_command_has_help():
    missing = []
    for path, parser in walk(build_parser(full=True)):
        where = "specflux " + " ".join(path) if path else "specflux"
        for action in parser._actions:
            name = "/".join(action.option_strings) or action.metavar or action.dest
            if not action.help or action.help == argparse.SUPPRESS or not str(action.help).strip():
                missing.append(f"{where}: {name}")
            if isinstance(action, argparse._SubParsersAction):
                helped = {a.dest for a in action._choices_actions if a.help}
                missing += [f"{where} {sub}: the command itself" for sub in action.choices if sub not in helped]
    assert not missing, "arguments without help:\n" + "\n".join(missing)


@pytest.mark.parametrize("command", WITH_EXAMPLES)
def test_commands_that_are_not_obvious_show_examples(command):
    parser = parser_for(tuple(command.split()))
    assert parser.epilog and parser.epilog.startswith("examples:\n"), command
    examples = [line.strip() for line in parser.epilog.splitlines()[1:] if line.strip().startswith("specflux")]
    assert examples and all(line.startswith(f"specflux {command}") for line in examples), parser.epilog
    assert "examples:\n  specflux" in parser.format_help()  # kept as written (RawDescriptionHelpFormatter)


@pytest.mark.parametrize("path", commands(), ids=lambda p: " ".join(p) or "specflux")
def test_every_help_page_prints(path, capsys):
    """`specflux ... --help` exits 0 with a usage line (a stray `%` in a help string would raise)."""
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: specflux")


def test_help_for_one_command_builds_only_it_and_still_has_its_help(capsys):
    """`main` builds only the named command's parser: its help is the same as in the full tree."""
    assert main(["session", "--help"]) == 0
    alone = capsys.readouterr().out
    assert alone == parser_for(("session",)).format_help()


# --------------------------------------------------------------------- --json and exit codes

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"
SPECKIT = "# Tasks\n\n## Phase 1\n\n- [ ] T001 Create the project layout\n- [ ] T002 [P] Add the users table (depends on T001)\n"
HANDIN = [{"key": "schema", "title": "Users table", "requirements": "A users table.", "acceptance_criteria": ["it exists"],
           "priority": 1, "complexity": "simple", "dependencies": []}]


def json_commands() -> set[str]:
    """Every command whose output `--json` turns into JSON (the hand-ins' --json is their input)."""
    found = set()
    for path, parser in walk(build_parser(full=True)):
        if any(a.option_strings == ["--json"] and a.nargs == 0 for a in parser._actions):
            found.add(" ".join(path))
    return found


@pytest.fixture
def project(git_repo, capsys, monkeypatch) -> Path:
    """A git repository with tasks 1 and 2 (2 depends on 1), a session on 1, a spec-kit tasks.md,
    a requirements document, and one finished workflow run (a fake agent CLI for each role)."""
    root = git_repo
    for args in (["init", str(root)], ["--root", str(root), "new", "Schema", "--ac", "table", "--ac", "migration"],
                 ["--root", str(root), "new", "Service", "--dep", "1", "--ac", "it answers"],
                 ["--root", str(root), "session", "1", "--did", "the table"]):
        assert main(args) == 0, args
    (root / "tasks.md").write_text(SPECKIT)
    (root / "prd.md").write_text("# Users\n\nUsers are stored in a table.\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "project")
    plan = root.parent / "plan.json"
    plan.write_text(json.dumps({"coder": [{"check": True, "chain": "done"}], "reviewer": [{"approved": True}]}))
    env = {**os.environ, "SPECFLUX_FAKE_PLAN": str(plan), "SPECFLUX_FAKE_STATE": str(root.parent / "agent-state"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    agent = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    done = subprocess.run([sys.executable, "-m", "specflux.cli", "--root", str(root), "flow", "start", "1", "2",
                           "--agent", "command", "--cmd", agent], capture_output=True, text=True, env=env, timeout=180)
    assert done.stdout.strip(), done.stderr  # the run's id, whatever became of the task
    capsys.readouterr()
    return root


JSON_CASES = {
    "list": ["list", "--json"],
    "show": ["show", "1", "--json"],
    "lint": ["lint", "--json"],
    "ready": ["ready", "--json"],
    "log": ["log", "1", "--json"],
    "graph": ["graph", "--json"],
    "context": ["context", "1", "--json"],
    "import": ["import", "tasks.md", "--dry-run", "--json"],
    "plan": ["plan", "prd.md", "--dry-run", "--json"],
    "flow list": ["flow", "list", "--json"],
    "flow status": ["flow", "status", "--json"],
    "flow log": ["flow", "log", "--json"],
    "claims": ["claims", "--json"],
    "stats": ["stats", "--json"],
}


def test_every_json_command_is_checked_below():
    assert json_commands() == set(JSON_CASES)


def test_every_json_command_prints_valid_json(project, capsys, api, monkeypatch):
    monkeypatch.chdir(project)
    bare = project.parent / "origin.git"  # `claims` reads a remote's claims
    git(project.parent, "init", "-q", "--bare", str(bare))
    git(project, "remote", "add", "origin", str(bare))
    git(project, "push", "-q", "origin", "main")
    outputs = {}
    for name, args in JSON_CASES.items():
        if name == "plan":
            api(Reply(calls=[call("submit_tasks", tasks=HANDIN)]))
        code = main(["--root", str(project), *args])
        out, err = capsys.readouterr()
        assert code == 0, f"specflux {' '.join(args)} -> {code}: {err}"
        try:
            outputs[name] = json.loads(out)
        except json.JSONDecodeError as e:
            raise AssertionError(f"specflux {' '.join(args)} printed no JSON ({e}): {out[:300]!r}") from None
    listed = {row["id"]: row for row in outputs["list"]}
    assert outputs["ready"] == [listed[row["id"]] for row in outputs["ready"]], "ready rows are list rows"
    assert outputs["graph"]["edges"] == [{"from": "1", "to": "2"}]
    assert outputs["flow list"] and outputs["flow status"]["runId"] == outputs["flow list"][-1]["runId"]
    assert outputs["claims"] == []
    assert set(outputs["stats"]) == {"tasks", "runs", "models", "total", "pricingDate"}


def test_ready_json_rows_are_list_json_rows_in_ready_order(tmp_path, capsys):
    root = tmp_path / "ws"
    root.mkdir()
    assert main(["init", str(root)]) == 0
    for args in (["new", "B", "--id", "2", "--dep", "1", "--force"], ["new", "A", "--id", "1"], ["new", "C", "--id", "3"],
                 ["complete", "1", "--summary", "done", "--no-commit"]):
        assert main(["--root", str(root), *args]) == 0
    capsys.readouterr()
    assert main(["--root", str(root), "list", "--json"]) == 0
    listed = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert main(["--root", str(root), "ready", "--json"]) == 0
    ready = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in ready] == ["2", "3"]
    assert ready == [listed["2"], listed["3"]]


def test_graph_json_names_missing_tasks_cycles_and_broken_files_and_exits_1(tmp_path, capsys):
    root = tmp_path / "ws"
    root.mkdir()
    assert main(["init", str(root)]) == 0
    for args in (["new", "A", "--id", "1", "--dep", "9", "--dep", "3", "--force"], ["new", "B", "--id", "2", "--dep", "1"],
                 ["new", "C", "--id", "3", "--dep", "2"]):
        assert main(["--root", str(root), *args]) == 0, args
    (root / ".specflux/task-states/task-4-state.md").write_text("no title, no metadata\n")
    capsys.readouterr()
    code = main(["--root", str(root), "graph", "--json"])
    out, err = capsys.readouterr()
    graph = json.loads(out)
    assert code == 1
    assert [n["id"] for n in graph["nodes"]] == ["1", "2", "3"]
    assert {"from": "9", "to": "1"} in graph["edges"] and graph["missing"] == ["9"]
    assert sorted(graph["cycles"][0]) == ["1", "2", "3"]
    assert any("task-4-state.md" in p for p in graph["problems"]) and "task-4-state.md" in err


@pytest.mark.parametrize("args", [
    ["list", "--status", "bogus"],
    ["nonsense"],
    ["show"],
    ["graph", "--bogus"],
    ["completion", "tcsh"],
    ["set", "1"],
    ["flow"],
    ["run", "1", "--agent", "command"],
])
def test_usage_mistakes_exit_2(tmp_path, capsys, args):
    root = tmp_path / "ws"
    root.mkdir()
    assert main(["init", str(root)]) == 0 and main(["--root", str(root), "new", "A"]) == 0
    capsys.readouterr()
    assert main(["--root", str(root), *args]) == 2
    assert capsys.readouterr().err


@pytest.mark.parametrize("args", [["show", "99"], ["show", "99", "--json"], ["list"], ["list", "--json"],
                                  ["ready", "--json"], ["graph", "--json"], ["lint", "--json"]])
def test_data_problems_exit_1_and_json_stays_json(tmp_path, capsys, args):
    root = tmp_path / "ws"
    root.mkdir()
    assert main(["init", str(root)]) == 0 and main(["--root", str(root), "new", "A"]) == 0
    (root / ".specflux/task-states/task-2-state.md").write_text("# Task #2: broken\n\nno metadata\n")
    capsys.readouterr()
    assert main(["--root", str(root), *args]) == 1
    out, err = capsys.readouterr()
    if "--json" in args and out:
        data = json.loads(out)
        if args[0] == "lint":  # lint's output is the problems: in the JSON, not again on stderr
            assert data["ok"] is False and data["problems"]
            return
    assert err
