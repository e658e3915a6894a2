"""The command line in real temporary folders: CONTRACT section 3, exit codes, --json shapes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specflux.cli.main import main
from specflux.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ws(tmp_path, capsys) -> Path:
    """An initialised workspace (not a git repository) with three tasks: 1 <- 2, and 3 alone."""
    root = tmp_path / "ws"
    root.mkdir()
    assert run(capsys, "init", str(root))[0] == 0
    assert run(capsys, "--root", str(root), "new", "Database schema", "--id", "1", "--epic", "10",
               "--epic-title", "Auth", "--repo", "backend", "--req", "Users table.", "--ac", "table", "--ac", "migration")[1] == "1\n"
    assert run(capsys, "--root", str(root), "new", "JWT service", "--id", "2", "--dep", "1", "--ac", "sign", "--ac", "verify")[1] == "2\n"
    assert run(capsys, "--root", str(root), "new", "Slug task", "--id", "T3", "--ac", "only")[1] == "T3\n"
    return root


def test_init_creates_workspace_and_is_idempotent(tmp_path, capsys):
    code, out, _ = run(capsys, "init", str(tmp_path))
    assert code == 0 and "created" in out
    assert (tmp_path / ".specflux" / "task-states").is_dir()
    assert (tmp_path / ".specflux" / "config.toml").is_file()
    assert "locks/" in (tmp_path / ".specflux" / ".gitignore").read_text()
    code, out, _ = run(capsys, "init", str(tmp_path))
    assert code == 0 and "already present" in out


def test_new_writes_the_template_with_typed_ids(ws):
    one = (ws / ".specflux/task-states/task-1-state.md").read_text()
    assert one.startswith("# Task #1: Database schema\n")
    assert '"task_id": 1,' in one and '"epic_id": 10,' in one
    assert "**Epic:** Auth (#10)" in one and "**Repository:** backend" in one
    assert "- [ ] table\n- [ ] migration\n" in one
    assert "## 2. Chain Inputs" not in one
    two = (ws / ".specflux/task-states/task-2-state.md").read_text()
    assert '"dependencies": [1]' in two and "## 2. Chain Inputs" in two
    slug = (ws / ".specflux/task-states/task-T3-state.md").read_text()
    assert '"task_id": "T3"' in slug


def test_new_without_id_takes_the_next_number(ws, capsys):
    assert run(capsys, "--root", str(ws), "new", "Another")[1] == "3\n"


def test_list_json_follows_the_contract(ws, capsys):
    code, out, _ = run(capsys, "--root", str(ws), "list", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows] == ["1", "2", "T3"]
    two = rows[1]
    assert two["title"] == "JWT service" and two["status"] == "pending"
    assert two["criteria"] == {"done": 0, "total": 2}
    assert two["sessions"] == 0 and two["dependencies"] == ["1"]
    assert two["size_bytes"] == (ws / two["path"]).stat().st_size
    assert two["error"] is None


def test_list_table_and_status_filter(ws, capsys):
    run(capsys, "--root", str(ws), "check", "1", "1")
    code, out, _ = run(capsys, "--root", str(ws), "list")
    assert code == 0
    header, *lines = out.splitlines()
    assert header.split() == ["ID", "STATUS", "DONE", "SESSIONS", "SIZE", "DEPS", "TITLE"]
    assert re.match(r"1\s+pending\s+1/2\s+0\s+\S+ B\s+-\s+Database schema", lines[0])
    run(capsys, "--root", str(ws), "session", "2", "--did", "started", "--no-commit")
    code, out, _ = run(capsys, "--root", str(ws), "list", "--status", "in_progress", "--json")
    assert [r["id"] for r in json.loads(out)] == ["2"]


def test_show_json_has_every_contract_field(ws, capsys):
    run(capsys, "--root", str(ws), "session", "1", "--did", "made table", "--did", "ran it", "--issues", "none",
        "--next", "migration", "--check", "1", "--no-commit")
    code, out, _ = run(capsys, "--root", str(ws), "show", "1", "--json")
    assert code == 0
    task = json.loads(out)
    for key in ("id", "title", "status", "path", "size_bytes", "metadata", "dependencies", "requirements",
                "criteria", "chain_inputs", "sessions", "archived_summary", "chain_output"):
        assert key in task, key
    assert task["id"] == "1" and task["status"] == "in_progress"
    assert task["metadata"] == {"task_id": 1, "epic_id": 10, "status": "in_progress", "total_sessions": 1}
    assert list(task["metadata"]) == ["task_id", "epic_id", "status", "total_sessions"]
    assert task["requirements"] == "Users table."
    assert task["criteria"] == [{"index": 1, "text": "table", "checked": True},
                                {"index": 2, "text": "migration", "checked": False}]
    session = task["sessions"][0]
    assert session["number"] == 1 and session["did"] == ["made table", "ran it"]
    assert session["issues"] == "none" and session["next"] == "migration"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", session["timestamp"])
    assert task["archived_summary"] is None and task["chain_output"] is None


def test_complete_then_show_chain_output_and_inputs(ws, capsys):
    code, out, err = run(capsys, "--root", str(ws), "complete", "1", "--summary", "Users table: id, email",
                         "--downstream", "Use UUIDs")
    assert code == 0 and "wired into task 2" in out
    assert "not a git repository" in err  # said once, and the work is done anyway
    one = json.loads(run(capsys, "--root", str(ws), "show", "1", "--json")[1])
    assert one["status"] == "complete"
    assert one["chain_output"]["summary"] == "Users table: id, email"
    assert one["chain_output"]["downstream"] == "Use UUIDs"
    two = json.loads(run(capsys, "--root", str(ws), "show", "2", "--json")[1])
    assert two["chain_inputs"] == [{"task_id": "1", "title": "Database schema", "body": "Users table: id, email\n\nUse UUIDs"}]
    ready = json.loads(run(capsys, "--root", str(ws), "ready", "--json")[1])
    assert [r["id"] for r in ready] == ["2", "T3"]


def test_check_and_uncheck_restore_bytes(ws, capsys):
    path = ws / ".specflux/task-states/task-2-state.md"
    before = path.read_bytes()
    assert run(capsys, "--root", str(ws), "check", "2", "2")[0] == 0
    after = path.read_bytes()
    assert [i for i, (a, b) in enumerate(zip(before.splitlines(), after.splitlines())) if a != b] != []
    assert len(before) == len(after)
    assert run(capsys, "--root", str(ws), "uncheck", "2", "2")[0] == 0
    assert path.read_bytes() == before


def test_usage_mistakes_exit_2_without_traceback(ws, capsys):
    code, _, err = run(capsys, "--root", str(ws), "check", "2")
    assert code == 2 and "Traceback" not in err
    code, _, err = run(capsys, "--root", str(ws), "new", "Bad", "--id", "../x")
    assert code == 2 and "not a task id" in err
    code, _, err = run(capsys, "--root", str(ws), "frobnicate")
    assert code == 2


def test_data_problems_exit_1_and_change_nothing(ws, capsys):
    path = ws / ".specflux/task-states/task-2-state.md"
    before = path.read_bytes()
    code, _, err = run(capsys, "--root", str(ws), "check", "2", "9")
    assert code == 1
    assert err.startswith(".specflux/task-states/task-2-state.md:") and "no acceptance criterion 9" in err
    assert path.read_bytes() == before
    code, _, err = run(capsys, "--root", str(ws), "show", "42")
    assert code == 1 and "no task 42" in err
    code, _, err = run(capsys, "--root", str(ws), "new", "Dup", "--id", "1")  # the data says no: 1, not 2
    assert code == 1 and "already exists" in err


def test_broken_file_is_listed_and_every_write_refuses_it(ws, capsys):
    path = ws / ".specflux/task-states/task-2-state.md"
    broken = path.read_text().replace('"status": "pending",', '"status": "pending"')  # missing comma
    path.write_text(broken)
    code, out, err = run(capsys, "--root", str(ws), "list")
    assert code == 1
    assert "BROKEN" in out and "Database schema" in out and "Slug task" in out
    assert re.search(r"task-2-state\.md:\d+: metadata is not valid JSON", err)
    rows = json.loads(run(capsys, "--root", str(ws), "list", "--json")[1])
    assert rows[1]["status"] == "broken" and rows[1]["error"]["line"] > 1
    for argv in (["check", "2", "1"], ["session", "2", "--did", "x", "--no-commit"], ["complete", "2", "--summary", "s"]):
        code, _, err = run(capsys, "--root", str(ws), *argv)
        assert code == 1, argv
        assert "task-2-state.md:" in err and "Traceback" not in err
        assert path.read_text() == broken


def test_lint_json(ws, capsys):
    code, out, _ = run(capsys, "--root", str(ws), "lint", "--json")
    assert code == 0 and json.loads(out) == {"ok": True, "problems": []}


def test_workspace_is_found_upwards_and_by_env(ws, capsys, monkeypatch):
    deep = ws / "src" / "deep"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    assert json.loads(run(capsys, "list", "--json")[1])[0]["id"] == "1"
    monkeypatch.chdir(ws.parent)
    monkeypatch.setenv("SPECFLUX_ROOT", str(ws))
    assert len(json.loads(run(capsys, "list", "--json")[1])) == 3
    monkeypatch.delenv("SPECFLUX_ROOT")
    code, _, err = run(capsys, "list")
    assert code == 1 and "specflux init" in err


def test_graph_is_mermaid(ws, capsys):
    code, out, _ = run(capsys, "--root", str(ws), "graph")
    assert code == 0
    assert out.startswith("flowchart TD\n")
    assert "t_1 --> t_2" in out


def test_workspace_template_override(ws, capsys):
    (ws / ".specflux/templates").mkdir()
    (ws / ".specflux/templates/task-state.md").write_text(
        "# Task #${id}: ${title}\n\n## 0. Metadata\n```json\n${metadata}\n```\n\n## Notes\nour house style\n")
    run(capsys, "--root", str(ws), "new", "Styled", "--id", "9")
    text = (ws / ".specflux/task-states/task-9-state.md").read_text()
    assert "our house style" in text and '"task_id": 9' in text


def test_list_and_show_do_not_import_the_agent_stack(ws):
    probe = (
        "import sys; from specflux.cli.main import main; "
        f"main(['--root', {str(ws)!r}, 'list']); main(['--root', {str(ws)!r}, 'show', '1']); "
        f"main(['--root', {str(ws)!r}, 'check', '1', '1']); "
        "heavy = [m for m in ('anthropic', 'httpx2', 'git', 'mistune', 'filelock') if m in sys.modules]; "
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


def test_the_command_table_lists_every_command_and_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    table = (ROOT / "docs" / "commands.md").read_text()
    assert "(docs/commands.md)" in readme
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in sub.choices:
        assert f"`specflux {name}" in table, f"docs/commands.md does not document `specflux {name}`"
    quick = re.search(r"## Quick start.*?```sh\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    assert len(quick) == 2, "the quick start has exactly two commands"
    assert "specflux demo" in quick[0]
    assert quick[1] in (ROOT / ".ci" / "run").read_text()


def test_sample_workspace_lists_and_shows(capsys):
    code, out, _ = run(capsys, "--root", str(ROOT), "list", "--json")
    assert code == 0
    assert {r["id"] for r in json.loads(out)} == {"100", "101", "102", "201", "305"}
    show = json.loads(run(capsys, "--root", str(ROOT), "show", "102", "--json")[1])
    assert show["dependencies"] == ["100", "101"] and len(show["chain_inputs"]) == 2
    assert run(capsys, "--root", str(ROOT), "lint")[0] == 0


def test_a_dependency_that_is_not_an_id_is_a_located_data_error(ws, capsys):
    path = ws / ".specflux/task-states/task-2-state.md"
    path.write_text(path.read_text().replace('"dependencies": [1]', '"dependencies": ["../1"]'))
    before = path.read_bytes()
    for argv in (["context", "2"], ["show", "2"], ["session", "2", "--did", "x", "--no-commit"]):
        code, _, err = run(capsys, "--root", str(ws), *argv)
        assert code == 1, argv
        assert err.startswith(".specflux/task-states/task-2-state.md:") and "'../1'" in err
    assert path.read_bytes() == before


def test_a_task_file_that_cannot_be_read_is_listed_as_broken(ws, capsys, monkeypatch):
    """A file removed between listing the folder and reading it (or unreadable) is a row, not a traceback."""
    from specflux.store.workspace import Workspace

    real = Workspace.task_ids
    monkeypatch.setattr(Workspace, "task_ids", lambda self: [*real(self), "gone"])
    monkeypatch.setenv("SPECFLUX_CACHE", "0")
    code, out, err = run(capsys, "--root", str(ws), "list")
    assert code == 1
    assert re.search(r"^gone\s+BROKEN", out, re.M) and "Database schema" in out
    assert "task-gone-state.md: cannot read: No such file or directory" in err and "Traceback" not in err
