"""The run's write journal: the task files a decision's effects change, recorded in the run's
event log before they are written, so that one fsync (the log's) makes a step durable.

Accepting a task rewrites its file (status, chain output) and its dependents' (chain inputs).
Each such write used to be fsynced on its own, with its folder: three fsyncs for an accepting
step. Instead, `RunJournal.before` appends one `files` event holding every file's text after the
write (and a hash of its bytes before), fsyncs the log, and the files are then replaced without
fsyncs (still atomically for readers: temporary file and rename). The engine's next
`step_started` is then left to the next fsync: the step's one fsync was this one.

After a power loss the disk may hold a replaced file's new name without its new bytes (an empty
file, on file systems that do not order a rename after its data) or still the old file.
`redo_lost_writes`, at the start of every drive, writes the journal's text again, durably, into
a file that is empty where the run wrote text, or that still holds exactly the bytes the run
replaced (only the empty case for an effect a crash cut short, which the engine carries out
again anyway). A file holding anything else was changed since, by a person or a later write,
and is left as it is.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specflux.base.files import atomic_write

if TYPE_CHECKING:
    from specflux.flow.record.run import Run
    from specflux.vcs.git import Git

FILES, UNDONE = "files", "files_undone"  # the journal's event types


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class RunJournal:
    """The WriteJournal (base/files.py) of one decision's effects: `record(event)` appends an
    event to the run's log, fsynced (the engine's `_record`, which syncs FILES and UNDONE)."""

    def __init__(self, root: Path, decision: int, record: Callable[[dict[str, Any]], None]):
        self.root, self.decision, self.record = root, decision, record

    def before(self, writes: list[tuple[Path, bytes | None, str]]) -> None:
        files = [{"path": _relative(path, self.root), "before": None if before is None else digest(before),
                  "text": text} for path, before, text in writes]
        self.record({"type": FILES, "decision": self.decision, "files": files})

    def undone(self) -> None:
        self.record({"type": UNDONE, "decision": self.decision})


def redo_lost_writes(run: "Run", root: Path, git: "Git | None") -> list[str]:
    """Write again what a power loss took from the files the run's journal holds (see the module's
    text); returns a line for each file restored, and commits them."""
    try:
        if f'"type":"{FILES}"'.encode() not in run.events.path.read_bytes():
            return []  # (a run that journaled nothing: no need to parse its whole log)
    except FileNotFoundError:
        return []
    events, _, _ = run.events.read_verified_from(0, "")
    latest: dict[str, tuple[bool, str | None, str]] = {}  # path -> (its effect done, hash before, text after)
    for event in events:
        kind = event.get("type")
        if kind == FILES and isinstance(event.get("files"), list):
            for f in event["files"]:
                latest[f["path"]] = (False, f.get("before"), f["text"])
        elif kind == UNDONE:
            latest = {p: v for p, v in latest.items() if v[0]}
        elif kind is not None:  # an event after the writes: they were made, and committed
            latest = {p: (True, before, text) for p, (_, before, text) in latest.items()}
    committed, lines = [], []
    for rel, (done, before, text) in latest.items():
        path = root / rel
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError:
            continue
        wanted = text.encode("utf-8")
        if data == wanted:
            continue
        empty = (data == b"" and wanted != b"") or (data is None and before is None)
        replaced = data is not None and before is not None and digest(data) == before
        # An effect cut short (no event after its writes) is carried out again by the engine,
        # from the file as it is, and committed then: only bytes it could not read are put back.
        if not (empty or (replaced and done)):
            continue
        atomic_write(path, text)
        if done:
            committed.append(path)
        lines.append(f"{rel}: restored from the run's journal ({'its bytes were lost' if empty else 'its last write was lost'}"
                     " in a crash)")
    if committed and git is not None:
        git.commit(committed, f"run {run.id}: task files restored from its journal",
                   {"Specflux-Run": run.id, "Specflux-Role": "engine"})
    return lines


def _relative(path: Path, root: Path) -> str:
    return os.path.relpath(path, root)
