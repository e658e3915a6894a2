"""The served page's data, kept current: `Board` regenerates it when a task, archive, run or git's
HEAD changes (file times polled four times a second) and wakes every open page's event stream.

A page holds the data's `version` (a hash of it); the stream sends the whole data again only when
the version moved, so an idle page costs one stat per file per poll and nothing on the wire.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specflux.base.errors import SpecfluxError
from specflux.board.page import gather, render

DATA_MARK_START = '<script type="application/json" id="board-data">'

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager

POLL_S = 0.25


class Board:
    """The page, its data as JSON and its version; `wait(version)` blocks until they differ."""

    def __init__(self, manager: "TaskStateManager", out: Path | None = None, *,
                 extra: Callable[[], dict[str, Any]] | None = None, page_options: dict[str, Any] | None = None):
        self.manager = manager
        self.out = out
        self.extra = extra  # more data for the page (runs started from it, the remote queue)
        self.page_options = page_options or {}
        self.page = b""
        self.data_json = b"{}"
        self.version = ""
        self._signature: Any = None
        self._parsed: dict[str, Any] = {}  # parsed tasks by file stat, the history by HEAD: only what changed is read again
        self._encoded: dict[Any, Any] = {}  # the JSON of each unchanged task and run, kept
        self._changed = threading.Condition()
        self._poke = threading.Event()
        self._gitdir: Path | None = None  # its HEAD and logs/HEAD: a commit changes the history shown
        if manager.git is not None:
            from specflux.vcs.process import run_git as _run

            done = _run(("rev-parse", "--absolute-git-dir"), manager.git.root)
            self._gitdir = Path(done.stdout.strip()) if done.returncode == 0 else None

    def signature(self) -> tuple:
        """What the page depends on, cheaply: names, sizes and mtimes of the files it reads."""
        ws = self.manager.ws
        parts: list[Any] = []
        for folder in (ws.states_dir, ws.archives_dir, ws.dir / "runs"):
            try:
                with os.scandir(folder) as entries:
                    found = list(entries)
            except OSError:
                parts.append((str(folder), None))
                continue
            for e in found:
                try:
                    st = os.stat(os.path.join(e.path, "events.jsonl")) if e.is_dir() else e.stat()
                    parts.append((e.name, st.st_size, st.st_mtime_ns, st.st_ino))
                except OSError:
                    parts.append((e.name, None))
        for name in ("HEAD", "logs/HEAD") if self._gitdir is not None else ():
            try:
                st = (self._gitdir / name).stat()
                parts.append((name, st.st_size, st.st_mtime_ns))
            except OSError:
                parts.append((name, None))
        parts.sort(key=repr)
        return tuple(parts)

    def refresh(self, force: bool = False) -> bool:
        """Regenerate if the files changed (or `force`); whether the data did."""
        signature = self.signature()
        if signature == self._signature and not force:
            return False
        self._signature = signature
        data = gather(self.manager, self._parsed)
        if self.extra is not None:
            data.update(self.extra())
        html, version = render(data, live=True, memo=self._encoded, **self.page_options)
        if version == self.version:
            return False
        start = html.index(DATA_MARK_START) + len(DATA_MARK_START)  # the data as the page embeds it, sent as it is
        body = html[start : html.index("</script>", start)].encode("utf-8")
        with self._changed:
            self.page, self.data_json, self.version = html.encode("utf-8"), body, version
            self._changed.notify_all()
        if self.out is not None:
            from specflux.base.files import atomic_write

            atomic_write(self.out, render(data)[0])
        return True

    def poke(self) -> None:
        """Look again now (after an action of the page's own), not at the next poll."""
        self._poke.set()

    def wait(self, version: str, timeout: float) -> str:
        """The version once it differs from `version`, or after `timeout` seconds."""
        with self._changed:
            self._changed.wait_for(lambda: self.version != version, timeout=timeout)
            return self.version

    def watch(self, stop: threading.Event, every: float = POLL_S) -> None:
        while not stop.is_set():
            self._poke.wait(every)
            force = self._poke.is_set()
            self._poke.clear()
            try:
                self.refresh(force=force)
            except Exception as e:  # noqa: BLE001 - whatever it was, say so and keep serving the last page
                print(f"specflux: board not refreshed: {e if isinstance(e, SpecfluxError) else repr(e)}", file=sys.stderr)

    def snapshot(self) -> tuple[str, bytes]:
        """The version and the data that go with it."""
        with self._changed:
            return self.version, self.data_json

    def version_json(self) -> bytes:
        return json.dumps({"version": self.version}).encode()
