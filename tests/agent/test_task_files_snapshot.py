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


def test_files_git_knows_clean_are_read_from_git_only_when_they_must_be(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(TaskFiles, "RACY_NS", 0)  # every file written before the snapshot is past the racy rule
    folder = folder_of(tmp_path, 4)
    asked: list[str] = []

    def at_head(path: Path) -> bytes:
        asked.append(path.name)
        return f"# {path.name} at HEAD\n".encode()

    own = folder / "task-4-state.md"
    snap = TaskFiles(folder, clean=lambda path: path.name != "task-3-state.md", at_head=at_head, own=own)
    assert set(snap) == {folder / f"task-{n}-state.md" for n in range(1, 5)}
    assert snap[folder / "task-3-state.md"] == b"# Task 3\n" and snap[own] == b"# Task 4\n"  # dirty, own: read
    assert asked == []
    (folder / "task-1-state.md").unlink()
    assert snap.changed() == {folder / "task-1-state.md"}
    assert snap.get(folder / "task-1-state.md") == b"# task-1-state.md at HEAD\n"
    assert snap.get(folder / "task-1-state.md") == b"# task-1-state.md at HEAD\n" and asked == ["task-1-state.md"]
    assert "task-2-state.md" not in asked
    assert dict(snap.items())[folder / "task-2-state.md"] == b"# task-2-state.md at HEAD\n"  # never b""


def test_a_session_puts_back_a_clean_file_from_git_and_a_dirty_one_with_the_users_edit(git_repo: Path, monkeypatch):
    """The agent deletes two other tasks' files: one the person had edited (uncommitted), which
    comes back with that edit byte for byte (its bytes were read before the session), and one
    committed and untouched, which comes back as HEAD has it (asked of git)."""
    import subprocess

    from specflux.agent.command_backend import CommandBackend
    from specflux.agent.session import run_session
    from specflux.cli.main import main
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

    root = git_repo
    assert main(["init", str(root)]) == 0
    for n in (1, 2, 3):
        assert main(["--root", str(root), "new", f"Task {n}", "--ac", "done"]) == 0
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "tasks"], cwd=root, check=True)
    states = root / ".specflux" / "task-states"
    edited = states / "task-2-state.md"
    edited.write_bytes(edited.read_bytes().replace(b"## Requirements", b"## Requirements\n\nThe person's own words."))
    users, committed = edited.read_bytes(), (states / "task-3-state.md").read_bytes()
    monkeypatch.setattr(TaskFiles, "RACY_NS", 0)
    asked: list[str] = []
    real = TaskFiles.get

    def get(self, path, default=None):
        if path in self._later:
            asked.append(path.name)
        return real(self, path, default)

    monkeypatch.setattr(TaskFiles, "get", get)
    agent = CommandBackend("rm .specflux/task-states/task-2-state.md .specflux/task-states/task-3-state.md; "
                           "echo built > out.txt", timeout_s=60, sandbox="off", stream=False)
    report = run_session(TaskStateManager(Workspace(root)), "1", agent, edits_task_file=True, guard=True,
                         say=lambda line: None)
    assert edited.read_bytes() == users
    assert (states / "task-3-state.md").read_bytes() == committed
    assert asked == ["task-3-state.md"]  # the clean file came from git; the edited one was read before
    assert any("task-2-state.md" in n for n in report.notices) and any("task-3-state.md" in n for n in report.notices)
    shown = subprocess.run(["git", "show", "--name-only", "--format=", "HEAD"], cwd=root, capture_output=True,
                           text=True, check=True).stdout.split()
    assert "out.txt" in shown and not {".specflux/task-states/task-2-state.md", ".specflux/task-states/task-3-state.md"} & set(shown)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    assert " M .specflux/task-states/task-2-state.md" in status.splitlines()  # still the person's, uncommitted


def test_a_file_the_file_systems_clock_has_passed_is_not_read_again(tmp_path: Path):
    """A write of this process after the files' last change shows the file system's clock past
    their times (base/files.py clock_passed): a later change gives them a later change time, so
    they are named only if their stat moved, even within RACY_NS of the snapshot."""
    import time

    from specflux.base.files import atomic_write

    folder = tmp_path / "task-states"
    folder.mkdir()
    for n in (1, 2):
        (folder / f"task-{n}-state.md").write_text(f"# Task {n}\n")
    time.sleep(0.05)  # past the file system's clock tick (a few ms where it is coarse)
    atomic_write(tmp_path / "baseline.json", "{}", sync=False)  # as a run's session writes its baseline
    snap = TaskFiles(folder)
    assert snap.unsure == set() and snap.changed() == set()
    time.sleep(0.05)
    (folder / "task-1-state.md").write_text("# Task X\n")  # the same size, a later change time
    assert snap.changed() == {folder / "task-1-state.md"}
    fresh = folder / "task-3-state.md"
    fresh.write_text("# Task 3\n")  # changed, like task 1, after the clock was last seen: unsure, so racy
    later = TaskFiles(folder)
    assert later.unsure == {fresh, folder / "task-1-state.md"} and fresh in later.changed()


def test_a_clean_file_whose_bytes_git_cannot_give_is_left_as_it_is(tmp_path: Path, monkeypatch):
    """It was there before (not a new file to remove): `unknown`, and its old bytes None."""
    monkeypatch.setattr(TaskFiles, "RACY_NS", 0)
    folder = folder_of(tmp_path, 2)
    snap = TaskFiles(folder, clean=lambda path: True, at_head=lambda path: None)
    (folder / "task-1-state.md").write_text("changed\n")
    assert folder / "task-1-state.md" in snap.changed()
    assert snap.get(folder / "task-1-state.md") is None and snap.unknown == {folder / "task-1-state.md"}
    assert folder / "task-1-state.md" in snap and snap.get(folder / "task-1-state.md") is None
