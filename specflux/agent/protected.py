"""An agent writes only its task: what a session may not change, and how it is put back.

An agent session changes its own task file (through the tools, or by editing it, for agent CLIs)
and the project's files. It may not change other tasks' files, nor the workspace's settings and
history: `.specflux/config.toml`, `workflows/`, `archives/`, `templates/` and the workspace's own
`.gitignore`/`.gitattributes`. Whatever a session changed there is put back before anything is
committed, and said in the session's notices (which the progress-log entry and the run report).
What was put back is kept in `.specflux/reverted/` (git-ignored with the locks), so that nothing is
lost even when a person edited one of those files while the session ran: specflux cannot tell
whose edit it was.

(The run's own folder, `runs/`, is not in this list: other terminals append to its events while a
session runs. Its events carry a keyed hash chain instead, `flow/events.py`.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager

GUARDED = ("config.toml", ".gitignore", ".gitattributes")
GUARDED_FOLDERS = ("workflows", "archives", "templates")


def snapshot(manager: "TaskStateManager") -> dict[Path, bytes]:
    """The bytes of every guarded file of the workspace now (not the task files: the session has
    its own copy of those)."""
    ws = manager.ws.dir
    paths = [ws / name for name in GUARDED]
    for folder in GUARDED_FOLDERS:
        base = ws / folder
        if base.is_dir():
            paths += [p for p in base.rglob("*") if p.is_file() and not p.is_symlink()]
    out = {}
    for path in paths:
        try:
            out[path] = path.read_bytes()
        except OSError:
            continue
    return out


def put_back(manager: "TaskStateManager", own_task: str, task_files: dict[Path, bytes],
             guarded: dict[Path, bytes], good_version) -> list[str]:
    """Put back every other task's file and every guarded file the session changed, created or
    deleted; returns one notice per file. `good_version(path, old_text)` gives a task file as it was
    before the session with what was committed to it meanwhile (a person's `specflux session`)."""
    from specflux.base.files import atomic_write
    from specflux.store.workspace import STATE_FILE

    ws = manager.ws
    notices = []
    changed = getattr(task_files, "changed", None)  # (restore.TaskFiles: the files that may differ)
    for path in sorted(changed() if changed else set(task_files) | {ws.task_path(t) for t in ws.task_ids()}):
        match = STATE_FILE.fullmatch(path.name)
        if match and match.group(1) == own_task:
            continue
        old = task_files.get(path)
        data = _read(path)
        if data == old:
            continue
        if path in getattr(task_files, "unknown", ()):
            notices.append(f"{ws.relative(path)}: another task's file changed during the session, and its bytes "
                           "from before could not be read from git: left as it is; check it (`git diff`)")
            continue
        if old is not None:
            text = good_version(path, old.decode("utf-8", "surrogateescape"))
            if data is not None and data.decode("utf-8", "surrogateescape") == text:
                continue  # what changed is a commit made meanwhile (a person's session): theirs
        notices.append(_undo(manager, path, old, data, atomic_write,
                             text=None if old is None else good_version(path, old.decode("utf-8", "surrogateescape")),
                             what="another task's file"))
    current = snapshot(manager)
    for path in sorted(set(guarded) | set(current)):
        old, data = guarded.get(path), current.get(path)
        if old == data:
            continue
        notices.append(_undo(manager, path, old, data, atomic_write, text=None, what="a workspace file"))
    return notices


def keep_copy(manager: "TaskStateManager", path: Path, data: bytes | None = None) -> str:
    """Keep `path`'s current bytes (or `data`) in `.specflux/reverted/` before it is put back;
    returns the words that say where (empty when there was nothing to keep or it failed)."""
    if data is None:
        data = _read(path)
    if data is None:
        return ""
    copy = manager.ws.dir / "reverted" / f"{time.strftime('%Y%m%d-%H%M%S')}-{path.name}"
    try:
        manager.ws.ensure_folder(copy.parent)
        copy.write_bytes(data)
    except (OSError, Exception):  # ensure_folder's UsageError too: keeping a copy never stops the put-back
        return ""
    return f" (the changed version is kept in {manager.ws.relative(copy)})"


def _undo(manager, path: Path, old: bytes | None, data: bytes | None, atomic_write, text: str | None,
          what: str) -> str:
    rel = manager.ws.relative(path)
    kept = keep_copy(manager, path, data) if data is not None else ""
    if old is None:
        path.unlink(missing_ok=True)
        return f"{rel}: the agent created {what}, which a session may not; removed{kept}"
    if text is not None:
        atomic_write(path, text)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(old)
    verb = "deleted" if data is None else "changed"
    return f"{rel}: the agent {verb} {what}, which a session may not; put back as it was{kept}"


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
