"""A cache of `list` rows, keyed on each file's stat, like git's index.

A row is reused only while its file's size, inode, mtime and ctime are unchanged (any write,
by specflux, an editor or git, changes ctime). Racy entries, written less than two seconds before
the cache itself, are never stored, so a change in the same clock tick cannot hide. Broken files
are never cached: their error is found afresh every time. The cache lives in the engine's folder
under the git directory (`<git dir>/specflux/cache/`, store/state_dir.py), which no sandboxed
agent can write; deleting it is always safe; SPECFLUX_CACHE=0 turns it off.

The rows it gives are for display (`list`, the board, the MCP server's list) and nothing else:
what a decision needs (a task's status, whether its dependencies are complete, what is ready) is
read from the task files themselves (`TaskStateManager.summaries(cached=False)`, the default), so
a cache written by anything else than specflux can change what `list` shows, never what a run does.
"""

from __future__ import annotations

import json
import os
import time
from _thread import get_ident
from typing import TYPE_CHECKING, Callable

from specflux.base.files import clock_passed, read_bytes
from specflux.base.leftovers import remove_stale_temps

if TYPE_CHECKING:
    from pathlib import Path

    from specflux.store.workspace import Workspace

VERSION = 1
RACY_NS = 2_000_000_000

_FIELDS = ("title", "status", "done", "total", "sessions", "dependencies")

# Rows of files too recently written to be cached on disk (racy), keyed on the file's path, each
# with the bytes it was parsed from, the file's stat key then, and whether that key is safe (the
# file system's clock had passed its times before the bytes were read: base/files.clock_passed):
# a run accepting task after task reads every task's dependencies each time, and would otherwise
# read again each file it wrote in the last 2 s. A safe row is reused while the key is the same;
# any other is reused only while the bytes are.
_RECENT: dict[str, tuple[bytes, list, list[int] | None, bool]] = {}
_RECENT_MAX = 4096
_LOADED: dict[str, tuple[list[int], dict]] = {}  # cache file -> (its stat key, its entries)


def enabled() -> bool:
    return os.environ.get("SPECFLUX_CACHE", "1") != "0"


def _key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]


def cached_rows(ws: "Workspace", ids: list[str], parse: Callable[..., object], row_type, disk: bool = True) -> list:
    """The rows for `ids`, from the cache where the file is unchanged, parsed (and cached) otherwise.
    `parse(task_id, data=None)` gives a task's row (from `data`, the file's bytes, when given).
    `disk=False`: for a decision, the on-disk cache is neither read nor written; only this process's
    own memory of files it read (_RECENT) spares a parse."""
    cache_file = ws.state_dir / "cache" / "summaries.json"
    root = str(ws.root)
    entries = _entries(cache_file) if disk else {}
    fresh: dict[str, list] = {}
    rows = []
    broken = False
    now = time.time_ns()
    base = os.path.join(root, "")
    for task_id in ids:
        rel = ws.task_rel(task_id)
        path = base + rel
        try:
            st = os.stat(path)
            key = [st.st_size, st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
        except OSError:
            st = key = None
        entry = entries.get(task_id)
        if key is not None and entry is not None and entry[0] == key:
            row = _row(row_type, task_id, rel, key[0], entry[1])
            fresh[task_id] = entry
        else:
            row = _parsed(path, task_id, rel, parse, row_type, st, key)
            broken = broken or row.error is not None
            if key is not None and row.error is None and now - max(key[2], key[3]) > RACY_NS:
                fresh[task_id] = [key, [getattr(row, f) for f in _FIELDS]]
                if disk:  # (on the disk from now on; a decision keeps it in memory instead)
                    _RECENT.pop(path, None)
        rows.append(row)
    # Written when it learns a row (a command that meets a broken file writes nothing). Entries
    # of changed files are dropped then, not before: a stale entry's key never matches its file.
    if disk and not broken and any(entries.get(task_id) != entry for task_id, entry in fresh.items()):
        _save(cache_file, fresh)
    return rows


def _entries(cache_file: Path) -> dict:
    """The cache's entries; kept in-process while the file's stat is unchanged (an entry, wherever
    it comes from, is true of any file with its key, so an older copy is never wrong, only smaller)."""
    try:
        key = _key(os.stat(cache_file))
        held = _LOADED.get(str(cache_file))
        if held is not None and held[0] == key:
            return held[1]
        with open(cache_file, "rb") as f:
            data = json.loads(f.read())
        entries = data["entries"] if data.get("version") == VERSION else {}
        if not isinstance(entries, dict):
            return {}
        _LOADED[str(cache_file)] = (key, entries)
        return entries
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _row(row_type, task_id: str, rel: str, size: int, values: list):
    """A row from cached values (in _FIELDS order, which is the row's own after id, path, size)."""
    title, status, done, total, sessions, dependencies = values
    return row_type(task_id, rel, size, title, status, done, total, sessions, list(dependencies))


def _parsed(path: str, task_id: str, rel: str, parse: Callable[..., object], row_type,
            st: os.stat_result | None = None, key: list[int] | None = None):
    """The row of a file the on-disk cache could not vouch for (`st` and `key`: its stat, taken
    before): from _RECENT when its stat is safely the same or its bytes are the ones parsed
    before in this process (a row is a function of the bytes alone), parsed otherwise."""
    seen = _RECENT.get(path)
    if seen is not None and key is not None and seen[3] and seen[2] == key:
        return _row(row_type, task_id, rel, key[0], seen[1])
    safe = st is not None and clock_passed(st)  # judged before the read: see _RECENT
    try:
        data = read_bytes(path)
    except OSError:  # gone, a folder, unreadable: the parser says so in the row
        return parse(task_id)
    if seen is not None and seen[0] == data:
        _RECENT[path] = (data, seen[1], key, safe)
        return _row(row_type, task_id, rel, len(data), seen[1])
    row = parse(task_id, data)
    if row.error is None:
        if len(_RECENT) >= _RECENT_MAX:
            _RECENT.clear()
        fields = [list(v) if isinstance(v, list) else v for v in (getattr(row, f) for f in _FIELDS)]
        _RECENT[path] = (data, fields, key, safe)
    return row


def _save(cache_file: Path, entries: dict) -> None:
    """Best effort: a cache that cannot be written (read-only checkout) only costs speed."""
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(cache_file)  # what a killed process's save left (its pid is gone)
        tmp = cache_file.with_name(f".{cache_file.name}.{os.getpid()}.{get_ident()}.tmp")
        tmp.write_text(json.dumps({"version": VERSION, "entries": entries}, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, cache_file)
        _LOADED[str(cache_file)] = (_key(os.stat(cache_file)), entries)
    except OSError:
        pass
