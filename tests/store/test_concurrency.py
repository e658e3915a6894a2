"""Real processes appending sessions to one task at once: nothing is lost, nothing is doubled,
numbers run 1..N, with and without archiving kicking in on the way."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from specflux.format.document import TaskDocument
from specflux.store.lint import lint_workspace
from specflux.format.outline import scan
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

WORKERS = 8
SESSIONS_EACH = 25
TOTAL = WORKERS * SESSIONS_EACH

WORKER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from specflux.format.model import SessionInput
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    root, worker, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    manager = TaskStateManager(Workspace(root), git=False)
    go = root / "go"
    while not go.exists():  # start together, after every process has imported specflux
        time.sleep(0.005)
    for k in range(count):
        entry = SessionInput(did=[f"worker {worker} item {k:02d}"], issues="", next="", timestamp="2024-01-01 00:00")
        manager.append_session("101", entry, commit=False)
    """
)


def did_texts() -> list[str]:
    return [f"worker {w} item {k:02d}" for w in range(WORKERS) for k in range(SESSIONS_EACH)]


def make_workspace(tmp_path: Path, archive: str) -> Workspace:
    ws, _ = Workspace.init(tmp_path / "ws")
    (ws.dir / "config.toml").write_text(f"[archive]\n{archive}\n[git]\ncommit = false\n", encoding="utf-8")
    TaskStateManager(ws, git=False).create("Shared task", task_id="101", criteria=["a", "b"])
    return ws


def hammer(ws: Workspace) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(ws.root), str(w), str(SESSIONS_EACH)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(WORKERS)
    ]
    time.sleep(0.5)
    (ws.root / "go").write_text("")
    failures = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        if p.returncode != 0:
            failures.append(err)
    assert not failures, failures[0]


def session_headings(text: str) -> list[int]:
    """Numbers of the `### Session <n>` headings of any markdown text (a state or an archive file)."""
    out = []
    for h in scan(text).headings:
        m = re.match(r"Session (\d+) - ", h.text)
        if h.level == 3 and m:
            out.append(int(m.group(1)))
    return out


def did_lines(text: str) -> list[str]:
    return re.findall(r"(?m)^- (worker \d+ item \d+)$", text)


def assert_lint_clean(ws: Workspace) -> None:
    errors = [str(p) for p in lint_workspace(ws) if p.severity == "error"]
    assert errors == []


def test_eight_processes_append_two_hundred_sessions(tmp_path):
    ws = make_workspace(tmp_path, "archive_kb = 100000\nwarn_kb = 100000")
    hammer(ws)

    text = ws.task_path("101").read_text(encoding="utf-8")
    doc = TaskDocument(text)
    assert [n for n, _, _ in doc.session_regions] == list(range(1, TOTAL + 1))
    assert doc.metadata["total_sessions"] == TOTAL
    assert doc.status == "in_progress"
    assert doc.archived_region is None and not ws.archive_path("101").exists()
    assert sorted(did_lines(text)) == sorted(did_texts())  # every item once: none lost, none doubled
    for w in range(WORKERS):  # each process's own sessions keep their order
        mine = [d for d in did_lines(text) if d.startswith(f"worker {w} ")]
        assert mine == sorted(mine)
    assert_lint_clean(ws)
    leftovers = [p.name for p in ws.states_dir.iterdir() if p.name != "task-101-state.md"]
    assert leftovers == []  # no temporary files left behind


def test_eight_processes_with_archiving_on_the_way(tmp_path):
    ws = make_workspace(tmp_path, "archive_kb = 6\nwarn_kb = 100000\nkeep_sessions = 5")
    hammer(ws)

    state = ws.task_path("101").read_text(encoding="utf-8")
    archive = ws.archive_path("101").read_text(encoding="utf-8")
    doc = TaskDocument(state)
    assert len(state.encode()) <= 6 * 1024

    kept = [n for n, _, _ in doc.session_regions]
    archived = session_headings(archive)
    assert archived == sorted(archived)
    assert sorted(archived + kept) == list(range(1, TOTAL + 1))  # every session in exactly one file
    assert doc.archived_region is not None
    first, last, _ = doc.archived_region
    assert (first, last) == (1, archived[-1]) and kept == list(range(last + 1, TOTAL + 1))

    assert sorted(did_lines(state) + did_lines(archive)) == sorted(did_texts())
    assert doc.metadata["total_sessions"] == TOTAL == doc.session_count
    assert_lint_clean(ws)
