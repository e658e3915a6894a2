"""The control room's view of a queue shared through a git remote (`board --serve --remote NAME`):
what `specflux flow status --remote NAME --json` says — claims, workers, leases left, each task's
status on the remote branch, what the integrated runs did and spent — read again every few seconds,
and pushed to the page when it changed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from specflux.base.errors import SpecfluxError

EVERY_S = 3.0  # a fetch of the claims and the branch: a few hundred ms against a hosted remote


class RemoteView:
    def __init__(self, root: Path, remote: str, every: float = EVERY_S):
        self.root, self.remote, self.every = root, remote, every
        self.state: dict[str, Any] = {"remote": remote, "loading": True}

    def page_data(self) -> dict[str, Any]:
        return {"queue": self.state}

    def read(self) -> dict[str, Any]:
        from specflux.flow.remote.queue import open_claims, queue_state

        try:
            return queue_state(open_claims(self.root, self.remote))
        except SpecfluxError as e:
            return {"remote": self.remote, "error": str(e)}

    def watch(self, stop: threading.Event, changed: Callable[[], None]) -> None:
        while not stop.is_set():
            state = self.read()
            if state != self.state:
                self.state = state
                changed()
            stop.wait(self.every)
