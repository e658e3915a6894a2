"""Lint: each rule on a file that breaks only that rule, reported as `path:line: message`; and the
commands that meet a broken file (`list`, `check`) say where it is broken and change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specflux.cli.main import main
from specflux.store.lint import lint_workspace
from specflux.format.outline import split_lines
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

FIXTURES = Path(__file__).parent.parent / "fixtures"
STATUS_LINE = "unknown status 'done' (expected one of: pending, in_progress, review, complete, failed, blocked)"


def seed(letter: str) -> str:
    return (FIXTURES / f"seed-example-{letter}.md").read_bytes().decode("utf-8")


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def line_of(text: str, needle: str) -> int:
    return len(split_lines(text[: text.index(needle) + 1]))


def rel(task_id: str) -> str:
    return f".specflux/task-states/task-{task_id}-state.md"


def workspace(tmp_path: Path, files: dict[str, str]) -> Workspace:
    ws, _ = Workspace.init(tmp_path / "ws")
    for task_id, text in files.items():
        ws.task_path(task_id).write_bytes(text.encode("utf-8"))
    return ws


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------- one rule at a time


def bad_json_missing_comma():
    text = replace_once(seed("a"), '"epic_id": 15,', '"epic_id": 15')
    return {"201": text}, [("201", line_of(text, '"status"'), "metadata is not valid JSON: Expecting ',' delimiter (column 3)")]


def bad_json_trailing_comma_crlf():
    text = replace_once(seed("a"), '"total_sessions": 0\n}', '"total_sessions": 0,\n}').replace("\n", "\r\n")
    return {"201": text}, [("201", 10, "metadata is not valid JSON: Expecting property name enclosed in double quotes (column 1)")]


def bad_json_trailing_comma_cr():
    text = replace_once(seed("a"), '"total_sessions": 0\n}', '"total_sessions": 0,\n}').replace("\n", "\r")
    return {"201": text}, [("201", 10, "metadata is not valid JSON: Expecting property name enclosed in double quotes (column 1)")]


def no_status():
    text = replace_once(seed("a"), '  "status": "in_progress",\n', "")
    return {"201": text}, [("201", 4, 'metadata has no "status"')]


def not_utf8():
    byte = seed("a").encode().index(b"in_progress") + len("in_progr")
    return {"201": seed("a")}, [("201", 8, f"not valid UTF-8 (byte {byte})")]


def no_metadata_block():
    text = replace_once(seed("a"), seed("a")[seed("a").index("```json") : seed("a").index("## 1.")], "\n")
    return {"201": text}, [("201", 3, "the Metadata section has no ```json block")]


def no_metadata_section():
    a = seed("a")
    text = a[: a.index("## 0.")] + a[a.index("## 1.") :]
    return {"201": text}, [("201", 1, "no `## 0. Metadata` section with a ```json block")]


def unclosed_metadata_block():
    text = replace_once(seed("a"), "}\n```\n", "}\n")
    return {"201": text}, [("201", 4, "the metadata ```json block is never closed")]


def no_title():
    text = replace_once(seed("a"), "# Task #201: Add dark mode toggle\n", "Task 201: Add dark mode toggle\n")
    return {"201": text}, [("201", 1, "no title: the first heading should be `# Task #<id>: <title>`")]


def unknown_status():
    text = replace_once(seed("a"), '"status": "in_progress"', '"status": "done"')
    return {"201": text}, [("201", 8, STATUS_LINE)]


def repeated_session():
    text = replace_once(seed("c"), "### Session 3 - ", "### Session 2 - ")
    return {"101": text}, [("101", line_of(text, "### Session 2 - 2024-11-26 12:00"), "session 2 appears more than once")]


def backwards_session():
    text = replace_once(seed("c"), "### Session 2 - ", "### Session X - ")
    text = replace_once(text, "### Session 3 - ", "### Session 2 - ").replace("### Session X - ", "### Session 3 - ")
    return {"101": text}, [("101", line_of(text, "### Session 2 - "), "session 2 comes after session 3: numbers go backwards")]


def wrong_total():
    text = replace_once(seed("c"), '"total_sessions": 5', '"total_sessions": 4')
    return {"101": text}, [("101", 9, "total_sessions is 4 but the progress log has 5 session(s)")]


def task_id_mismatch():
    return {"999": seed("a")}, [("999", 6, "task_id 201 does not match the file name (task 999)")]


def unknown_dependency():
    text = replace_once(seed("a"), '"status": "in_progress",\n', '"status": "in_progress",\n  "dependencies": [305, 999],\n')
    return {"201": text, "305": seed("d")}, [("201", 9, "depends on task 999, which does not exist")]


def dependency_not_an_id():
    text = replace_once(seed("a"), '"status": "in_progress",\n', '"status": "in_progress",\n  "dependencies": ["../305"],\n')
    return {"201": text, "305": seed("d")}, [
        ("201", 9, "\"dependencies\" holds '../305', which is not a task id (letters, digits, '.', '_' or '-')")]


def with_deps(letter: str, task_id: int, deps: list[int]) -> str:
    text = seed(letter)
    old = f'"task_id": {json.loads(text[text.index("{") : text.index("}") + 1])["task_id"]},\n'
    return replace_once(text, old, f'"task_id": {task_id},\n  "dependencies": {json.dumps(deps)},\n')


def cycle_of_two():
    files = {"1": with_deps("a", 1, [2]), "2": with_deps("d", 2, [1])}
    return files, [("1", 7, "dependency cycle: 1 -> 2 -> 1"), ("2", 7, "dependency cycle: 1 -> 2 -> 1")]


def cycle_of_three():
    files = {"1": with_deps("a", 1, [3]), "2": with_deps("d", 2, [1]), "3": with_deps("a", 3, [2]), "4": with_deps("d", 4, [1])}
    loop = "dependency cycle: 1 -> 3 -> 2 -> 1"
    return files, [("1", 7, loop), ("3", 7, loop), ("2", 7, loop)]


CASES = [
    bad_json_missing_comma,
    bad_json_trailing_comma_crlf,
    bad_json_trailing_comma_cr,
    no_status,
    not_utf8,
    no_metadata_block,
    no_metadata_section,
    unclosed_metadata_block,
    no_title,
    unknown_status,
    repeated_session,
    backwards_session,
    wrong_total,
    task_id_mismatch,
    unknown_dependency,
    dependency_not_an_id,
    cycle_of_two,
    cycle_of_three,
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_each_rule_reports_its_place(tmp_path, capsys, case):
    files, expected = case()
    ws = workspace(tmp_path, files)
    if case is not_utf8:  # a Latin-1 byte inside the "status" value
        data = ws.task_path("201").read_bytes()
        ws.task_path("201").write_bytes(data.replace(b'"in_progress"', b'"in_progr\xe9ss"'))
    before = snapshot(ws.root)
    code, out, err = run(capsys, "--root", str(ws.root), "lint")
    assert code == 1
    assert sorted(err.splitlines()) == sorted(f"{rel(t)}:{line}: {message}" for t, line, message in expected)
    assert "ok:" not in out
    assert snapshot(ws.root) == before

    problems = lint_workspace(ws)
    assert sorted((p.path, p.line, p.message) for p in problems if p.severity == "error") == sorted(
        (rel(t), line, message) for t, line, message in expected
    )


def test_line_numbers_in_the_cases_point_at_what_they_claim():
    """Guard the hand-written line numbers above against drift in the fixtures."""
    assert line_of(seed("a"), '"status"') == 8
    assert line_of(seed("c"), '"total_sessions"') == 9
    assert line_of(seed("a"), '"task_id"') == 6
    assert line_of(seed("a"), "```json") == 4
    assert line_of(cycle_of_two()[0]["1"], '"dependencies"') == 7
    assert line_of(unknown_dependency()[0]["201"], '"dependencies"') == 9


def test_lint_json_and_explicit_paths(tmp_path, capsys):
    files, _ = unknown_status()
    ws = workspace(tmp_path, {**files, "305": seed("d")})
    code, out, err = run(capsys, "--root", str(ws.root), "lint", "--json")
    assert code == 1 and err == ""
    report = json.loads(out)
    assert report["ok"] is False
    assert report["problems"] == [{"path": rel("201"), "line": 8, "message": STATUS_LINE, "severity": "error"}]

    code, out, err = run(capsys, "lint", str(ws.task_path("305")))
    assert (code, err) == (0, "")
    assert out.strip() == "ok: 1 file(s)"


def test_clean_workspace_passes(tmp_path, capsys):
    ws = workspace(tmp_path, {"101": seed("c"), "102": seed("b"), "201": seed("a"), "305": seed("d")})
    TaskStateManager(ws, git=False).create("Database Schema", task_id="100", criteria=["users table"])
    before = snapshot(ws.root)
    code, out, err = run(capsys, "--root", str(ws.root), "lint")
    assert (code, err) == (0, "")
    assert out.strip() == "ok: 5 file(s)"
    assert snapshot(ws.root) == before


def test_crlf_workspace_is_clean_too(tmp_path, capsys):
    ws = workspace(tmp_path, {"101": seed("c").replace("\n", "\r\n"), "201": seed("a").replace("\n", "\r\n")})
    code, out, err = run(capsys, "--root", str(ws.root), "lint")
    assert (code, err) == (0, "")


# --------------------------------------------------------------------- other commands on a broken file


def broken_workspace(tmp_path: Path) -> tuple[Workspace, str]:
    broken = replace_once(seed("b"), '"epic_id": 10,', '"epic_id": 10')
    ws = workspace(tmp_path, {"101": seed("c"), "102": broken, "201": seed("a"), "305": seed("d")})
    line = line_of(broken, '"status"')
    reason = f"{rel('102')}:{line}: metadata is not valid JSON: Expecting ',' delimiter (column 3)"
    return ws, reason


def test_list_shows_every_other_task_and_the_broken_one(tmp_path, capsys):
    ws, reason = broken_workspace(tmp_path)
    before = snapshot(ws.root)
    code, out, err = run(capsys, "--root", str(ws.root), "list")
    assert code == 1
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert set(rows) == {"101", "102", "201", "305"}
    assert rows["101"].split()[1:4] == ["complete", "4/4", "5"] and rows["101"].endswith("JWT Service")
    assert rows["201"].split()[1:4] == ["in_progress", "0/3", "0"] and rows["201"].endswith("Add dark mode toggle")
    assert rows["305"].split()[1:4] == ["in_progress", "0/2", "0"]
    assert rows["102"].split()[1] == "BROKEN" and rows["102"].endswith(reason)
    assert err.splitlines() == [reason]
    assert snapshot(ws.root) == before


def test_list_json_marks_the_broken_task(tmp_path, capsys):
    ws, reason = broken_workspace(tmp_path)
    code, out, _ = run(capsys, "--root", str(ws.root), "list", "--json")
    assert code == 1
    rows = {r["id"]: r for r in json.loads(out)}
    assert set(rows) == {"101", "102", "201", "305"}
    assert rows["102"]["status"] == "broken"
    assert rows["102"]["error"] == {"path": rel("102"), "line": 8, "message": reason.split(": ", 1)[1]}
    assert rows["201"]["criteria"] == {"done": 0, "total": 3} and rows["201"]["error"] is None


def test_check_on_a_broken_file_fails_and_changes_nothing(tmp_path, capsys):
    ws, reason = broken_workspace(tmp_path)
    before = ws.task_path("102").read_bytes()
    code, out, err = run(capsys, "--root", str(ws.root), "check", "102", "2")
    assert (code, out) == (1, "")
    assert err.splitlines() == [reason]
    assert ws.task_path("102").read_bytes() == before


def test_check_out_of_range_fails_and_changes_nothing(tmp_path, capsys):
    ws, _ = broken_workspace(tmp_path)
    before = snapshot(ws.root)
    code, out, err = run(capsys, "--root", str(ws.root), "check", "201", "1", "4")
    assert (code, out) == (1, "")
    assert err.splitlines() == [f"{rel('201')}:22: no acceptance criterion 4 (the task has 3)"]
    after = snapshot(ws.root)
    assert after[rel("201")] == before[rel("201")]  # criterion 1 was not ticked alone either
    assert {k: v for k, v in after.items() if "locks/" not in k} == {k: v for k, v in before.items() if "locks/" not in k}
