"""The run engine imported in a thread while a worker's first round trips are on the wire.

A worker's first agent waits on two things that need not wait on each other: the remote (a fetch
and the claim's push, each a round trip) and Python importing the run engine (the steps, the agent
backends: ~50 ms of CPU; pydantic's models load later, where a tool call or a hand-off is first
read: tool_inputs.py). The worker starts the import here, then fetches and claims; by the time
it starts its run the engine is loaded, or nearly. The import is the same one the run makes: a
failure here is left for the worker's own import to report, where it happens anyway.
specflux has no import circles (house.py checks), so two threads importing at once wait on each
other's module locks at worst, and cannot deadlock.
"""

from __future__ import annotations

import importlib
import threading

ENGINE = ("specflux.flow.runs", "specflux.flow.steps.roles")


def warm_up(modules: tuple[str, ...] = ENGINE) -> threading.Thread:
    """Import `modules` in a daemon thread, started now."""
    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException:  # the worker's own import, when it comes, says what went wrong
                return

    thread = threading.Thread(target=load, name="warm-up", daemon=True)
    thread.start()
    return thread
