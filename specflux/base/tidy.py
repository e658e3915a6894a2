"""Throw-away folders removed in the background: a session's HOME and temporary folder, a step's
hand-in folder. Removing one is a few hundred unlink/rmdir calls that nobody waits for; one thread
does them while the run goes on, and the process waits for it at exit (up to EXIT_WAIT_S), so no
folder is left behind by a run that ends normally. A folder a kill -9 leaves behind is in the
system's temporary folder or the engine's private one, both tidied by their owners.
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import threading

EXIT_WAIT_S = 10.0  # at most this long at exit for folders still being removed

_queue: "queue.Queue[str | threading.Event]" = queue.Queue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def remove_later(folder: str | os.PathLike) -> None:
    """Remove `folder` and everything in it, soon, in a background thread (errors ignored, as
    `shutil.rmtree(ignore_errors=True)`). The folder's name must not be reused meanwhile: these
    are fresh `mkdtemp` folders."""
    global _thread
    with _lock:
        if _thread is None:
            atexit.register(wait)
        if _thread is None or not _thread.is_alive():  # (a fork's child has none running)
            _thread = threading.Thread(target=_work, name="specflux-tidy", daemon=True)
            _thread.start()
    _queue.put(os.fspath(folder))


def wait(timeout: float = EXIT_WAIT_S) -> None:
    """Until every folder handed to `remove_later` so far is gone (or `timeout` passed)."""
    if _thread is None or not _thread.is_alive():
        return
    done = threading.Event()
    _queue.put(done)
    done.wait(timeout)


def _work() -> None:
    while True:
        item = _queue.get()
        if isinstance(item, threading.Event):
            item.set()
            continue
        shutil.rmtree(item, ignore_errors=True)
