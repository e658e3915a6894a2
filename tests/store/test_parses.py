"""A manager hands out the same parsed document again while a file's text is unchanged
(format/document.Parses), and parses it anew the moment the text differs, by a byte, a hand edit
or a write of its own; a file that does not parse is never kept."""

from pathlib import Path

import pytest

from specflux.base.errors import SpecfluxError
from specflux.format.document import Parses, TaskDocument
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace


@pytest.fixture
def manager(tmp_path: Path) -> TaskStateManager:
    ws, _ = Workspace.init(tmp_path)
    manager = TaskStateManager(ws, git=False)
    manager.create("the task", task_id="1", criteria=["a", "b"])
    return manager


def test_an_unchanged_file_gives_the_same_document(manager):
    assert manager.load("1") is manager.load("1")


def test_any_change_to_the_text_is_read(manager):
    first = manager.load("1")
    path = manager.path("1")
    path.write_text(path.read_text().replace("the task", "the task, edited by hand"))
    edited = manager.load("1")
    assert edited is not first and edited.title[1] == "the task, edited by hand"
    manager.set_checked("1", [2], True)
    assert manager.load("1").criteria_lines[1][2] is True
    assert first.title[1] == "the task", "a document handed out earlier is never changed"


def test_a_broken_file_is_an_error_every_time(manager):
    manager.load("1")
    path = manager.path("1")
    path.write_text(path.read_text().replace("# ", "", 1).replace("---", "", 1))
    for _ in range(2):
        with pytest.raises(SpecfluxError):
            manager.load("1")


def test_at_most_kept_files_are_held():
    parses = Parses()
    docs = [parses.keep(n, TaskDocument(f"# task {n}\n", f"t{n}")) for n in range(Parses.KEPT + 5)]
    assert parses.of(0, "# task 0\n", "t0") is None, "the oldest went first"
    last = Parses.KEPT + 4
    assert parses.of(last, f"# task {last}\n", f"t{last}") is docs[-1]
    assert parses.of(last, f"# task {last}\n", "elsewhere") is None, "a path of its own"
