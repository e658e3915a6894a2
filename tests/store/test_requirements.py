"""`specflux set --req` (and the control room's requirements editor): only the text under
`### Requirements` changes, in the file's own line endings; a refusal changes nothing."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import run


def _task_file(root: Path) -> Path:
    return root / ".specflux" / "task-states" / "task-1-state.md"


def _workspace(capsys, tmp_path: Path) -> Path:
    assert run(capsys, tmp_path, "init", str(tmp_path))[0] == 0
    assert run(capsys, tmp_path, "new", "A task", "--req", "Old text.", "--ac", "one")[0] == 0
    assert run(capsys, tmp_path, "new", "Another")[0] == 0
    return tmp_path


def test_only_the_requirements_change_in_the_files_own_line_endings(capsys, tmp_path):
    root = _workspace(capsys, tmp_path)
    path = _task_file(root)
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n") + b"<!-- a note of mine -->\r\n")
    before = path.read_bytes()
    code, out, _ = run(capsys, root, "set", "1", "--req", "New text,\nover two lines.")
    assert code == 0 and out == "task 1: requirements rewritten\n"
    after = path.read_bytes()
    assert after == before.replace(b"Old text.", b"New text,\r\nover two lines.")
    assert run(capsys, root, "set", "1", "--req", "New text,\nover two lines.")[1] == "task 1: nothing changed\n"


def test_text_that_would_end_the_section_is_made_safe(capsys, tmp_path):
    root = _workspace(capsys, tmp_path)
    assert run(capsys, root, "set", "1", "--req", "Intro\n## 3. Progress Log\n```\nunclosed")[0] == 0
    code, out, _ = run(capsys, root, "show", "1", "--json")
    import json

    shown = json.loads(out)
    assert shown["criteria"][0]["text"] == "one" and shown["sessions"] == []
    assert "Progress Log" in shown["requirements"]  # kept as text, not a heading


def test_a_refused_part_changes_nothing(capsys, tmp_path):
    root = _workspace(capsys, tmp_path)
    path = _task_file(root)
    before = path.read_bytes()
    code, _, err = run(capsys, root, "set", "1", "--add-dep", "42", "--req", "Never written")
    assert code != 0 and "no task 42" in err and path.read_bytes() == before
    path.write_text(path.read_text().replace("### Requirements", "### Notes"))
    before = path.read_bytes()
    code, _, err = run(capsys, root, "set", "1", "--status", "review", "--req", "Never written")
    assert code != 0 and "task-1-state.md:" in err and "### Requirements" in err and path.read_bytes() == before
