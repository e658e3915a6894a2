"""What the worker in this clone is doing, for `flow status` in another terminal: a small JSON file,
`.specflux/locks/remote-worker.json` (per machine, never committed), written when the worker claims,
works, integrates or waits for an unreachable remote, and removed when it stops. A note whose
process is gone (a worker killed) is shown as such."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from specflux.base.files import atomic_write
from specflux.base.leftovers import alive


class WorkerNote:
    def __init__(self, ws_dir: Path):
        self.path = ws_dir / "locks" / "remote-worker.json"
        self.fields: dict[str, Any] = {}

    def write(self, **fields: Any) -> None:
        self.fields.update(fields, pid=os.getpid(), at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(self.fields, sort_keys=True))

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def read(self) -> dict[str, Any] | None:
        """The note, with `alive` (whether its worker's process still runs), or None."""
        try:
            note = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(note, dict):
            return None
        pid = note.get("pid")
        note["alive"] = isinstance(pid, int) and alive(pid)
        return note


def describe(note: dict[str, Any]) -> str:
    """One line for `flow status`."""
    who = f"worker {note.get('worker')} on {note.get('remote')}/{note.get('branch')}"
    if not note.get("alive"):
        return f"{who}: its process is gone (since {note.get('at')}); its claim expires with its lease"
    doing = note.get("doing", "looking for a task")
    task = f", task {note['task']}" if note.get("task") else ""
    waiting = f"; waiting for the remote since {note['waitingSince']}, work kept locally" if note.get("waitingSince") else ""
    return f"{who}: {doing}{task}{waiting}"
