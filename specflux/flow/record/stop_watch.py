"""Watching a run's event log for `flow stop` while a step runs, to interrupt it at once."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from specflux.base.errors import SpecfluxError

if TYPE_CHECKING:
    from specflux.flow.record.run import Run

POLL_S = 0.2  # how often a running step checks for `flow stop`


class StopWatcher:
    """While a step runs (between `start` and `stop`), watch the event log for `flow stop` and
    interrupt the step at once. One thread serves every step of a drive: it is started with the
    first step and ends at `close` (a thread started per step cost ~0.7 ms of every step). It
    sleeps between looks, so starting and stopping a step wakes no one."""

    def __init__(self, run: "Run"):
        self.run = run
        self.stopped = False
        self._running = threading.Event()  # a step runs
        self._closed = False
        self._offset = 0
        self._generation = 0  # which step the offset belongs to
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Watch what is appended from now on, until `stop`."""
        try:
            self._offset = self.run.events.path.stat().st_size  # only what is appended while the step runs
        except FileNotFoundError:
            self._offset = 0
        self._generation += 1
        self.stopped = False
        self._running.set()
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._running.clear()

    def close(self) -> None:
        """No more steps: the thread ends (at once when it waits for a step, else after its sleep)."""
        self._closed = True
        self._running.set()

    def _watch(self) -> None:
        from specflux.base.interrupts import interrupt_main

        while True:
            self._running.wait()  # between steps
            if self._closed:
                return
            generation = self._generation
            time.sleep(POLL_S)
            if self._closed:
                return
            if generation != self._generation or not self._running.is_set():
                continue  # that step ended (another may have started: it is looked at after the next sleep)
            offset = self._offset
            try:
                newer, offset = self.run.events.read_from(offset)
            except SpecfluxError:
                continue
            if generation != self._generation or not self._running.is_set():
                continue  # the step ended meanwhile: what was read belongs to no step now
            self._offset = offset
            if any(e["type"] == "control" and e["action"] == "stop" for e in newer):
                self.stopped = True
                if self._running.is_set() and not self._closed:
                    interrupt_main()  # the session sees Ctrl-C and records the interruption
                self.stop()
