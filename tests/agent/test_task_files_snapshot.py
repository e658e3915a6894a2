"""A session's snapshot of the task files (agent/restore.py `TaskFiles`) tells after it which
files may have changed without reading every file again: new, deleted, replaced or rewritten
files are named, untouched ones are not, and a same-size rewrite made in the same clock tick as
the snapshot (which leaves every time as it was) is still caught: files changed that recently
are always looked at again."""

from __future__ import annotations

import os
from pathlib import Path

from specflux.agent.restore import TaskFiles


def folder_of(tmp_path: Path, count: int) -> Path:
    folder = tmp_path / "task-states"
    folder.mkdir()
    for n in range(1, count + 1):
        (folder / f"task-{n}-state.md").write_text(f"# Task {n}\n")
    old = 1_600_000_000
    for path in folder.iterdir():  # written long before the session: not racy
        os.utime(path, (old, old))
    return folder


def stat_key(path: Path) -> tuple[int, int, int, int]:
    st = os.lstat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def test_only_what_moved_is_named(tmp_path: Path):
    folder = folder_of(tmp_path, 5)
    (folder / "notes.txt").write_text("not a task file")
    snap = TaskFiles(folder)
    assert snap[folder / "task-3-state.md"] == b"# Task 3\n" and len(snap) == 5
    snap.taken_ns = max(key[3] for key in snap.stats.values()) + 10 * TaskFiles.RACY_NS  # a snapshot taken later
    assert snap.changed() == set()
    (folder / "task-2-state.md").write_text("# Task 2, changed\n")
    (folder / "task-4-state.md").unlink()
    (folder / "task-9-state.md").write_text("# Task 9\n")
    assert snap.changed() == {folder / "task-2-state.md", folder / "task-4-state.md", folder / "task-9-state.md"}


def test_a_rewrite_that_leaves_every_time_as_it_was_is_caught_by_the_racy_rule(tmp_path: Path):
    """A same-size rewrite in the file system's same clock tick leaves inode, size and times as
    they were (made here by taking the snapshot's record of the file after the rewrite): the file
    is still named, because it had changed within RACY_NS of the snapshot."""
    folder = folder_of(tmp_path, 1)
    path = folder / "task-1-state.md"
    snap = TaskFiles(folder)
    path.write_text("# Task X\n")  # the same size
    snap.stats[path] = stat_key(path)  # as if nothing the snapshot recorded had moved
    assert snap[path] == b"# Task 1\n" and path in snap.changed()
    snap.taken_ns = snap.stats[path][3] + 10 * TaskFiles.RACY_NS  # long after: not racy, and so not seen
    assert path not in snap.changed()
