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
    cache = json.loads((ws.state_dir / "cache" / "summaries.json").read_text())
    assert set(cache["entries"]) == {"1", "2", "3"}
    # poison the cached title: a reused row shows it, proving the file was not parsed again
    cache["entries"]["2"][1][0] = "from the cache"
    (ws.state_dir / "cache" / "summaries.json").write_text(json.dumps(cache))
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
    cache = ws.state_dir / "cache" / "summaries.json"
    entries = json.loads(cache.read_text())["entries"] if cache.exists() else {}
    assert "3" not in entries, "a file written a moment ago is racy: parsed again next time"


def test_a_corrupt_cache_is_ignored_and_the_cache_can_be_off(ws, capsys, monkeypatch):
    (ws.state_dir / "cache").mkdir()
    (ws.state_dir / "cache" / "summaries.json").write_text("{not json")
    assert rows(capsys, ws)["1"]["title"] == "task 1"
    monkeypatch.setenv("SPECFLUX_CACHE", "0")
    (ws.state_dir / "cache" / "summaries.json").unlink()
    assert rows(capsys, ws)["2"]["title"] == "task 2"
    assert not (ws.state_dir / "cache" / "summaries.json").exists()


class Stat:
    """A stat result with chosen times (a test cannot set ctime, nor stop the clock)."""

    def __init__(self, dev: int, ns: int, size: int = 10) -> None:
        self.st_dev, self.st_mtime_ns, self.st_ctime_ns, self.st_size, self.st_ino = dev, ns, ns, size, 1


def test_a_recent_row_is_trusted_without_a_read_only_once_the_file_systems_clock_has_passed_it(
        tmp_path, monkeypatch):
    """Git's racy rule in-process, with the file system's clock read from this process's own
    writes: a file read while the clock may still be at its times is read again (a change in the
    same tick keeps its stat); once a write has seen the clock pass them, an unchanged stat is
    enough."""
    from specflux.base import files

    dev = -7  # a device of its own: no real write moves this clock
    monkeypatch.setattr(summary_cache, "_RECENT", {})
    path = tmp_path / "task-1-state.md"
    reads = []
    real_read = summary_cache.read_bytes
    monkeypatch.setattr(summary_cache, "read_bytes", lambda p: reads.append(p) or real_read(p))

    class Row:
        def __init__(self, title):
            self.title, self.status, self.done, self.total, self.sessions, self.dependencies = title, "pending", 0, 1, 0, []
            self.error = None

    def parse(task_id, data=None):
        return Row(data.decode())

    def row_type(task_id, rel, size, title, *rest):
        return title

    def row(st):  # the row's title: a fresh parse gives the parser's row, a reuse the cache's
        got = summary_cache._parsed(str(path), "1", "t", parse, row_type, st, [st.st_size, 1, st.st_mtime_ns, st.st_ctime_ns])
        return got if isinstance(got, str) else got.title

    path.write_bytes(b"first")
    st = Stat(dev, 100)
    assert row(st) == "first" and len(reads) == 1
    path.write_bytes(b"secnd")  # the same size, in the same tick: the same stat
    assert row(st) == "secnd" and len(reads) == 2, "a row read before the clock passed is not trusted"
    files.observe_clock(Stat(dev, 200))  # a write of ours got a later change time
    assert row(st) == "secnd" and len(reads) == 3  # read once more (now safely)
    assert row(st) == "secnd" and len(reads) == 3, "trusted without a read while the stat is unchanged"
    assert row(Stat(dev, 300)) == "secnd" and len(reads) == 4, "a changed stat is read again"


def test_a_save_removes_what_a_killed_save_left(ws, capsys):
    """A process killed between writing the cache's temporary file and renaming it leaves
    `.summaries.json.PID.N.tmp`; the next save removes it (its process is gone), not a live one's."""
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    cache = ws.state_dir / "cache"
    cache.mkdir(exist_ok=True)
    stale = cache / f".summaries.json.{gone.stdout.strip()}.1.tmp"
    live = cache / f".summaries.json.{os.getppid()}.1.tmp"
    stale.write_text("{")
    live.write_text("{")
    (cache / "summaries.json").unlink(missing_ok=True)
    rows(capsys, ws)  # learns every row: saves
    assert (cache / "summaries.json").exists()
    assert not stale.exists() and live.exists()
    assert sorted(p.name for p in cache.iterdir()) == sorted(["summaries.json", live.name])
