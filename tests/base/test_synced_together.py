"""`synced_together`: a workflow step's writes are made durable at once, at the step's end, once
per file and once per folder, however often each was written; nothing is left unsynced when the
block ends, by an error too; outside the block every write has its own fsyncs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specflux.base import files
from specflux.base.durability import synced_together
from specflux.base.files import atomic_write


@pytest.fixture
def fsyncs(monkeypatch) -> list[str]:
    """The paths fsynced, in order (the real fsync still runs)."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(files.os, "fsync", fsync)
    return seen


def test_three_writes_of_a_file_in_a_step_are_synced_once_at_its_end(tmp_path: Path, fsyncs: list[str]):
    task, summary = tmp_path / "task.md", tmp_path / "run" / "summary.json"
    summary.parent.mkdir()
    with synced_together():
        for n in range(3):
            atomic_write(task, f"version {n}\n")
        atomic_write(summary, "{}")
        assert fsyncs == []  # nothing synced while the step runs
    assert task.read_text() == "version 2\n"
    assert sorted(fsyncs) == sorted([str(task), str(summary), str(tmp_path), str(summary.parent)])
    assert fsyncs.index(str(task)) < fsyncs.index(str(tmp_path))  # files before their folders


def test_an_error_in_the_step_still_syncs_what_it_wrote(tmp_path: Path, fsyncs: list[str]):
    task = tmp_path / "task.md"
    with pytest.raises(RuntimeError), synced_together():
        atomic_write(task, "written\n")
        raise RuntimeError("the agent failed")
    assert str(task) in fsyncs


def test_a_file_removed_during_the_step_is_skipped_and_nesting_syncs_once(tmp_path: Path, fsyncs: list[str]):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with synced_together():
        with synced_together():
            atomic_write(scratch / "handin.json", "{}")
        assert fsyncs == []  # the inner block leaves it to the outer
        (scratch / "handin.json").unlink()
        scratch.rmdir()
    assert fsyncs == []


def test_outside_a_step_each_write_has_its_own_fsyncs(tmp_path: Path, fsyncs: list[str]):
    atomic_write(tmp_path / "a.md", "a\n")
    assert len(fsyncs) == 2  # the file, then its folder
