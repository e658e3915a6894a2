"""The list cache: unchanged files come from it, any change to a file is seen at once."""

from __future__ import annotations

import json
import os
import time

import pytest

from specflux.store import summary_cache
from specflux.cli.main import main
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

OLD = time.time() - 3600  # older than the racy window, so rows are cached


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """Three tasks; the racy window is shrunk to zero (ctime cannot be set back by a test)."""
    monkeypatch.setattr(summary_cache, "RACY_NS", 0)
    ws, _ = Workspace.init(tmp_path)
    manager = TaskStateManager(ws, git=False)
    for n in range(1, 4):
        manager.create(f"task {n}", task_id=str(n), criteria=["a", "b"])
    for n in range(1, 4):
        os.utime(ws.task_path(str(n)), (OLD, OLD))
    return ws


def rows(capsys, ws):
    assert main(["--root", str(ws.root), "list", "--json"]) in (0, 1)
    return {r["id"]: r for r in json.loads(capsys.readouterr().out)}


def test_rows_are_cached_and_reused(ws, capsys):
    first = rows(capsys, ws)
    cache = json.loads((ws.dir / "cache" / "summaries.json").read_text())
    assert set(cache["entries"]) == {"1", "2", "3"}
    # poison the cached title: a reused row shows it, proving the file was not parsed again
    cache["entries"]["2"][1][0] = "from the cache"
    (ws.dir / "cache" / "summaries.json").write_text(json.dumps(cache))
    again = rows(capsys, ws)
    assert again["2"]["title"] == "from the cache"
    assert again["1"] == first["1"]


def test_a_same_size_same_mtime_edit_is_still_seen(ws, capsys):
    rows(capsys, ws)
    path = ws.task_path("2")
    text = path.read_text()
    edited = text.replace("- [ ] a", "- [x] a")
    assert len(edited) == len(text)
    time.sleep(0.01)
    path.write_text(edited)
    os.utime(path, (OLD, OLD))  # same size, same mtime: only ctime tells
    assert rows(capsys, ws)["2"]["criteria"] == {"done": 1, "total": 2}


def test_recent_files_are_not_cached_and_broken_files_never(ws, capsys, monkeypatch):
    monkeypatch.setattr(summary_cache, "RACY_NS", 2_000_000_000)
    ws.task_path("3").write_text(ws.task_path("3").read_text().replace('"status": "pending"', '"status": "nope"'))
    before = sorted(p.name for p in (ws.dir).rglob("*"))
    assert rows(capsys, ws)["3"]["status"] == "broken"
    assert sorted(p.name for p in (ws.dir).rglob("*")) == before, "a listing that meets a broken file writes nothing"
    ws.task_path("3").write_text(ws.task_path("3").read_text().replace('"nope"', '"pending"'))
    assert rows(capsys, ws)["3"]["status"] == "pending"
    cache = ws.dir / "cache" / "summaries.json"
    entries = json.loads(cache.read_text())["entries"] if cache.exists() else {}
    assert "3" not in entries, "a file written a moment ago is racy: parsed again next time"


def test_a_corrupt_cache_is_ignored_and_the_cache_can_be_off(ws, capsys, monkeypatch):
    (ws.dir / "cache").mkdir()
    (ws.dir / "cache" / "summaries.json").write_text("{not json")
    assert rows(capsys, ws)["1"]["title"] == "task 1"
    monkeypatch.setenv("SPECFLUX_CACHE", "0")
    (ws.dir / "cache" / "summaries.json").unlink()
    assert rows(capsys, ws)["2"]["title"] == "task 2"
    assert not (ws.dir / "cache" / "summaries.json").exists()
