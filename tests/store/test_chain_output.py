"""`specflux handoff`: the chain output alone — no status change, no wiring, no commit — what an
agent CLI writes inside a workflow run, where `complete` is refused."""

from __future__ import annotations

import json

from tests.helpers import run


def test_handoff_writes_the_chain_output_and_nothing_else(capsys, tmp_path, monkeypatch):
    assert run(capsys, tmp_path, "init", str(tmp_path))[0] == 0
    assert run(capsys, tmp_path, "new", "Upstream", "--ac", "one")[0] == 0
    assert run(capsys, tmp_path, "new", "Downstream", "--dep", "1")[0] == 0
    path = tmp_path / ".specflux" / "task-states" / "task-1-state.md"
    path.write_text(path.read_text().replace("(To be completed)", "### Files Created\n- `a.py` - mine\n"))
    downstream = (tmp_path / ".specflux" / "task-states" / "task-2-state.md").read_bytes()
    monkeypatch.setenv("SPECFLUX_RUN", "run-x")  # inside a run: complete is refused, handoff is not
    monkeypatch.setenv("SPECFLUX_ROLE", "coder")
    monkeypatch.setenv("SPECFLUX_TASK_ID", "1")
    assert run(capsys, tmp_path, "complete", "1", "--summary", "no")[0] != 0
    code, out, _ = run(capsys, tmp_path, "handoff", "1", "--summary", "a.py: f()", "--downstream", "import f")
    assert code == 0 and "chain output written" in out
    shown = json.loads(run(capsys, tmp_path, "show", "1", "--json")[1])
    assert shown["status"] == "pending"
    assert shown["chain_output"]["summary"] == "a.py: f()" and shown["chain_output"]["downstream"] == "import f"
    assert "### Files Created\n- `a.py` - mine" in path.read_text()  # a person's subsection stays
    assert (tmp_path / ".specflux" / "task-states" / "task-2-state.md").read_bytes() == downstream  # not wired
    before = path.read_bytes()
    code, _, err = run(capsys, tmp_path, "handoff", "1", "--summary", "   ")
    assert code == 2 and "summary" in err and path.read_bytes() == before
