"""Watching a run's event log for `flow stop` while a step runs, to interrupt it at once."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from specflux.base.errors import SpecfluxError

if TYPE_CHECKING:
    from specflux.flow.record.run import Run

POLL_S = 0.2  # how often a running step checks for `flow stop`


class StopWatcher:
    """While a step runs, watch the event log for `flow stop` and interrupt the step at once."""

    def __init__(self, run: "Run"):
        self.run = run
        self.stopped = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        try:
            self._offset = run.events.path.stat().st_size  # only what is appended while the step runs
        except FileNotFoundError:
            self._offset = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        import _thread

        while not self._done.wait(POLL_S):
            try:
                newer, self._offset = self.run.events.read_from(self._offset)
            except SpecfluxError:
                continue
            if any(e["type"] == "control" and e["action"] == "stop" for e in newer):
                self.stopped = True
                if not self._done.is_set():
                    _thread.interrupt_main()  # the session sees Ctrl-C and records the interruption
                return
