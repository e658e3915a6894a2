"""Whether the user pressed Ctrl-C in this process: a command that records the interruption and
returns normally (a workflow run pauses) still exits 130, as the shell expects of Ctrl-C.

An ordinary accident interrupts the same way, with its reason in `why`: the terminal closing
(SIGHUP) or the program reading the output exiting (`specflux flow start | head -3`, a closed
pipe). `hang_up` is what either calls, from any thread: output that has nowhere to go is dropped
from then on (never a traceback, never a write that fails again), and the main thread is
interrupted as by the first Ctrl-C, so that a run pauses saying why."""

from __future__ import annotations

import os
import sys

pressed = False
why: str | None = None  # set when no Ctrl-C but an accident interrupted: "its terminal closed (SIGHUP)"


def hang_up(reason: str, streams: tuple[str, ...] = ("stdout",)) -> None:
    """`reason` interrupts this process (once): `streams` ("stdout", "stderr") go to /dev/null,
    and the main thread gets a KeyboardInterrupt through the process's SIGINT handler (none when
    SIGINT is ignored, as under nohup: then only the output is dropped)."""
    global why
    for name in streams:
        silence(name)
    if why is not None or pressed:
        return
    why = reason
    import _thread
    import signal

    _thread.interrupt_main(signal.SIGINT)


def silence(name: str) -> None:
    """Point the stream `name` (and its file descriptor) at /dev/null."""
    stream = getattr(sys, name)
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        fd = None
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        if fd is not None:
            os.dup2(null, fd)
    except OSError:
        pass
    finally:
        os.close(null)
    if fd is None:
        setattr(sys, name, open(os.devnull, "w"))
