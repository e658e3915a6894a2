"""Whether the user pressed Ctrl-C in this process: a command that records the interruption and
returns normally (a workflow run pauses) still exits 130, as the shell expects of Ctrl-C.

An ordinary accident interrupts the same way, with its reason in `why`: the terminal closing
(SIGHUP) or the program reading the output exiting (`specflux flow start | head -3`, a closed
pipe). `hang_up` is what either calls, from any thread: output that has nowhere to go is dropped
from then on (never a traceback, never a write that fails again), and the main thread is
interrupted as by the first Ctrl-C, so that a run pauses saying why.

`interrupt_main` is how specflux interrupts its own main thread (`flow stop` seen by the stop
watcher, an accident above): a simulated SIGINT, which Python delivers only to a Python handler.
A process started with SIGINT ignored (`specflux flow start &` from a script, some supervisors)
keeps ignoring real ones, through `only_our_own`, which raises for specflux's own and nothing else.
"""

from __future__ import annotations

import os
import sys

pressed = False
why: str | None = None  # set when no Ctrl-C but an accident interrupted: "its terminal closed (SIGHUP)"
_asked = False  # interrupt_main asked: the SIGINT that follows is specflux's own, not a real one


def interrupt_main() -> None:
    """Interrupt the main thread as Ctrl-C does (a KeyboardInterrupt there), from any thread."""
    global _asked
    import _thread
    import signal

    _asked = True
    _thread.interrupt_main(signal.SIGINT)


def only_our_own(signum, frame) -> None:
    """The SIGINT handler of a process started with SIGINT ignored: a real SIGINT is still
    ignored, `interrupt_main`'s raises KeyboardInterrupt (without it, `flow stop` could not
    interrupt the step in flight of a run started that way)."""
    global _asked
    if _asked:
        _asked = False
        raise KeyboardInterrupt


def hang_up(reason: str, streams: tuple[str, ...] = ("stdout",)) -> None:
    """`reason` interrupts this process (once): `streams` ("stdout", "stderr") go to /dev/null,
    and the main thread gets a KeyboardInterrupt (`interrupt_main`)."""
    global why
    for name in streams:
        silence(name)
    if why is not None or pressed:
        return
    why = reason
    interrupt_main()


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
