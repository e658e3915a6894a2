"""Inside `not_durable()` (a replay into a throw-away clone) `atomic_write` writes a file's bytes
into the file itself: no temporary file, no rename (which on ext4 starts the new file's writeback
at once); where writing in place would not be what a replace is, it replaces as always."""

from __future__ import annotations

import os
from pathlib import Path

from specflux.base.durability import not_durable
from specflux.base.files import atomic_write, watching_writes


def test_a_write_goes_into_the_file_itself_and_leaves_no_temporary_file(tmp_path: Path):
    path = tmp_path / "task-1-state.md"
    path.write_text("a longer first text\n")
    os.chmod(path, 0o640)
    inode = path.stat().st_ino
    with not_durable(), watching_writes() as wrote:
        atomic_write(path, "shorter é\n")
        atomic_write(tmp_path / "new.md", "made\n")
    assert path.read_text() == "shorter é\n"  # the old tail cut off
    assert path.stat().st_ino == inode and oct(path.stat().st_mode & 0o777) == oct(0o640)
    assert (tmp_path / "new.md").read_text() == "made\n"
    assert wrote == [path, tmp_path / "new.md"]  # (a step's writes are watched either way)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.md", "task-1-state.md"]


def test_outside_it_a_write_replaces_the_file(tmp_path: Path):
    path = tmp_path / "task-1-state.md"
    path.write_text("old\n")
    inode = path.stat().st_ino
    atomic_write(path, "new\n")
    assert path.read_text() == "new\n" and path.stat().st_ino != inode


def test_a_symbolic_link_is_replaced_never_written_through(tmp_path: Path):
    """A task file committed as a link to a file outside the clone: the replay's write puts a file
    in its place, as a replace always did, and the file outside stays as it was."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "task-1-state.md").symlink_to(outside)
    with not_durable():
        atomic_write(clone / "task-1-state.md", "replayed\n")
    assert outside.read_text() == "keep me\n"
    assert not (clone / "task-1-state.md").is_symlink() and (clone / "task-1-state.md").read_text() == "replayed\n"


def test_a_file_of_two_names_is_replaced_and_the_other_name_keeps_its_bytes(tmp_path: Path):
    path = tmp_path / "a.md"
    path.write_text("shared\n")
    os.link(path, tmp_path / "b.md")
    with not_durable():
        atomic_write(path, "mine\n")
    assert path.read_text() == "mine\n" and (tmp_path / "b.md").read_text() == "shared\n"
