"""A session's closing `git status` starts as its agent stops and runs beside specflux's own
writes (agent/session.py): the status then stands for now with those writes added, and is read
again wherever it could not (a file specflux removed, or wrote where git may ignore it)."""

from __future__ import annotations

from pathlib import Path

from conftest import git
from test_session import project  # noqa: F401 - fixture

from specflux.agent.session import _as_now
from specflux.base.files import atomic_write, watching_writes
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace


def _manager(repo: Path) -> TaskStateManager:
    return TaskStateManager(Workspace.find(explicit=repo))


def test_a_status_started_early_reads_what_status_reads(project):
    manager = _manager(project)
    (project / "src" / "app.py").write_text("changed\n")
    (project / "src" / "new.py").write_text("new\n")
    (project / "README.md").unlink()
    soon = manager.git.status_soon()
    now = manager.git.status()
    assert soon() == now
    assert {path: entry.v1 for path, entry in now[1].items()} == {
        "src/app.py": " M", "src/new.py": "??", "README.md": " D"}
    assert soon() is soon(), "read once: asked again, it answers the same"


def test_the_files_specflux_wrote_meanwhile_are_added(project):
    manager = _manager(project)
    task = manager.path("101")
    soon = manager.git.status_soon()
    soon()  # the status is read before the write below: it shows the task file clean
    with watching_writes() as wrote:
        atomic_write(task, task.read_text() + "\nA line specflux added.\n")
    head, entries = _as_now(soon, manager, manager.git, wrote)
    assert wrote == [task]
    rel = task.relative_to(project).as_posix()
    assert entries[rel].v1 == "??", "committed as it is now"
    assert head == git(project, "rev-parse", "HEAD").strip()


def test_a_write_git_may_ignore_or_a_removal_means_reading_it_again(project):
    manager = _manager(project)
    cache = manager.ws.dir / "cache"
    cache.mkdir(exist_ok=True)
    soon = manager.git.status_soon()
    with watching_writes() as wrote:
        atomic_write(cache / "rows.json", "{}")  # ignored by .specflux/.gitignore: no status shows it
    assert _as_now(soon, manager, manager.git, wrote) is None
    soon = manager.git.status_soon()
    gone = manager.ws.dir / "task-states" / "task-999-state.md"
    with watching_writes() as wrote:
        atomic_write(gone, "x")
        gone.unlink()
    assert _as_now(soon, manager, manager.git, wrote) is None


def test_writes_are_watched_per_thread_and_nested_blocks_pass_theirs_out(tmp_path):
    import threading

    with watching_writes() as outer:
        atomic_write(tmp_path / "a", "a")
        with watching_writes() as inner:
            atomic_write(tmp_path / "b", "b")
        other = threading.Thread(target=atomic_write, args=(tmp_path / "c", "c"))
        other.start()
        other.join()
    assert inner == [tmp_path / "b"]
    assert outer == [tmp_path / "a", tmp_path / "b"], "another thread's write is not this block's"
