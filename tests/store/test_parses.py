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


# The config file, read by every workspace of a process (a worker makes ~6): the same text gives the
# Config made of it once; a changed text is parsed again; a broken one is refused on every read.

CONFIG = '[flow]\nmax_iterations = 7\n\n[remote]\nlease_s = 30\n'


def test_the_config_read_again_unchanged_is_the_config_made_before(tmp_path):
    from specflux.store.config import load_config

    (tmp_path / ".specflux").mkdir()
    path = tmp_path / ".specflux" / "config.toml"
    path.write_text(CONFIG)
    first = load_config(path)
    assert first.flow.max_iterations == 7 and load_config(path) is first
    assert Workspace(tmp_path).config is first  # another workspace of the same folder


def test_a_config_changed_by_a_byte_is_read_again_and_a_broken_one_refused_each_time(tmp_path):
    from specflux.base.errors import ParseError
    from specflux.store.config import load_config

    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    assert load_config(path).flow.max_iterations == 7
    path.write_text(CONFIG.replace("= 7", "= 8"))
    assert load_config(path).flow.max_iterations == 8
    path.write_text(CONFIG.replace("= 8", "= 7").replace("lease_s = 30", "lease_s = "))
    for _ in range(2):
        with pytest.raises(ParseError, match="config is not valid TOML.*line 5"):
            load_config(path)
    path.write_text(CONFIG)
    assert load_config(path).flow.max_iterations == 7
