"""A run re-checks each of its holds before every step (flow/record/holds_check.py): a hold whose
file the file system's clock has passed is re-read only when its stat moves, and a hold another
run takes meanwhile (its file written again) is seen at once."""

from __future__ import annotations

import time
from pathlib import Path

from specflux.base.files import atomic_write
from specflux.cli.main import main
from specflux.flow.record.holds import Holds
from specflux.store.workspace import Workspace


def test_a_hold_is_read_again_only_when_its_file_changed(tmp_path: Path, monkeypatch):
    assert main(["init", str(tmp_path)]) == 0
    holds = Holds(Workspace.find(explicit=str(tmp_path)))
    holds.dir.mkdir(parents=True, exist_ok=True)
    with holds.locked():
        holds.claim("run-a", ["1"])
    time.sleep(0.05)  # past the file system's clock tick
    atomic_write(tmp_path / "later.txt", "a write of this process after the hold's", sync=False)
    reads: list[str] = []
    real = Path.read_text

    def read_text(self, *args, **kwargs):
        reads.append(self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    assert holds.hold_of("1")["run"] == "run-a"
    assert holds.hold_of("1")["run"] == "run-a" and reads == ["task-1.json"]  # the second: a stat
    time.sleep(0.05)
    other = Holds(Workspace.find(explicit=str(tmp_path)))
    other.release("run-a")
    with other.locked():
        other.claim("run-b", ["1"])
    assert holds.hold_of("1")["run"] == "run-b"
    other.release("run-b")
    assert holds.hold_of("1") is None
