"""Sources: when an imported task completes, tick it in the file it came from, in the same change.

A task's metadata `source` names its `format` ("spec-kit", "harness", ...). The writer for a format
is found through the entry-point group `specflux.source_writers` (looked up the first time a task of
that format completes, then kept), so the store never imports the importers: they register their
writers in their package's metadata. A writer is a `SourceWriter`. A source whose format has no
writer is not ticked, and the outcome says so.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from specflux.base.files import ChangeSet, FileSystemError, check_writable, read_text
from specflux.store.values import Outcome

ENTRY_POINT_GROUP = "specflux.source_writers"


class SourceWriter(Protocol):
    def __call__(self, source: Mapping[str, Any], task_id: str, read: Callable[[str], str],
                 write: Callable[[str, str], None]) -> str | None:
        """Tick `task_id` in its source (the task's metadata `source`), reading and writing through
        `read(path) -> text` and `write(path, text)`, paths relative to the workspace root.
        Returns the source's path when its text changed. A source ticked already is handed to
        `write` unchanged (the completion's commit takes it along); a source whose task line
        cannot be found is left alone (None, nothing written)."""


@functools.cache
def writer_for(fmt: str) -> SourceWriter | None:
    """The writer registered for source format `fmt`, or None when there is none."""
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP, name=fmt):
        return entry.load()
    return None


def write_back(root: Path, task_id: str, source: Any, files: ChangeSet, outcome: Outcome) -> None:
    """An imported task completes: tick it in its source too (its tasks.md line, its feature in
    feature_list.json, ...), queued in `files` so that it rides in the completion's commit."""
    fmt = source.get("format") if isinstance(source, dict) else None
    if not fmt:
        return
    where = source.get("path") or "its source"
    try:
        writer = writer_for(str(fmt))
    except (ImportError, AttributeError) as e:
        outcome.notices.append(f"task {task_id} is not ticked in {where}: the writer for source format "
                               f"{fmt!r} could not be loaded: {e}")
        return
    if writer is None:
        outcome.notices.append(f"task {task_id} is not ticked in {where}: no writer for source format {fmt!r} "
                               f"(none is registered in the entry-point group {ENTRY_POINT_GROUP!r})")
        return

    def read(rel: str) -> str:
        path = root / rel
        return files.text_of(path) or read_text(path, rel)

    refused: list[str] = []

    def write(rel: str, text: str) -> None:
        try:
            check_writable(root / rel, rel)
        except FileSystemError as e:  # the source is the user's: a read-only one is left as it is
            refused.append(str(e))
            return
        files.write(root / rel, text)

    changed = writer(source, task_id, read, write)
    if refused and changed:  # (a source ticked already is handed on unchanged: nothing to refuse)
        outcome.notices.append(f"task {task_id} is not ticked in {changed}: {refused[0]}")
    elif changed:
        outcome.notices.append(f"ticked task {task_id} in {changed}")
