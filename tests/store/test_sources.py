"""Sources: completing an imported task ticks its source through the writer registered for its format."""

from __future__ import annotations

from conftest import git

from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

TODO = "- [ ] T1 do it\n- [ ] T2 and this\n"


def test_a_source_format_without_a_writer_is_not_ticked_and_the_outcome_says_so(git_repo):
    ws, _ = Workspace.init(git_repo)
    manager = TaskStateManager(Workspace(ws.root))
    (git_repo / "todo.txt").write_text(TODO)
    manager.create("Imported", task_id="1", extra={"source": {"format": "todo-txt", "path": "todo.txt", "line": 1}})
    manager.create("Native", task_id="2")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tasks")

    imported = manager.complete("1", "done")
    native = manager.complete("2", "done")

    said = [n for n in imported.notices if not n.startswith("warning:")]  # (its criteria are not ticked: warned)
    assert said == ["task 1 is not ticked in todo.txt: no writer for source format 'todo-txt' "
                    "(none is registered in the entry-point group 'specflux.source_writers')"]
    assert [n for n in native.notices if not n.startswith("warning:")] == []
    assert (git_repo / "todo.txt").read_text() == TODO
    assert [p.name for p in imported.changed] == ["task-1-state.md"]
    assert (imported.status, imported.wired, imported.archived) == (native.status, native.wired, native.archived)
    committed = git(git_repo, "show", "--name-only", "--format=", imported.commit).split()
    assert committed == [ws.relative(manager.path("1"))]
    assert git(git_repo, "status", "--porcelain") == ""
