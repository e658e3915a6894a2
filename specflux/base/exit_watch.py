"""Waiting for a child process to exit with a timeout, woken the moment it exits.

`Popen.wait(timeout)` polls: it sleeps between looks, doubling the sleep up to 50 ms, so a child
that exits in 1 ms is seen a millisecond or more later, and one that runs 30 ms up to 20 ms later;
a run pays that on every agent session and every test command. On Linux a pidfd becomes readable
when the process exits, and `poll` on it wakes at once.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def exit_watch(proc: subprocess.Popen) -> Iterator[Callable[[float | None], int]]:
    """`wait(timeout)`: `proc`'s exit code, or TimeoutExpired after `timeout` seconds (None: no
    limit). On Linux (5.3 and later) it wakes the moment the process exits; elsewhere it is
    `Popen.wait(timeout)`."""
    import select

    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux, or before 5.3 (or the process was reaped)
        yield lambda timeout: proc.wait(timeout=timeout)
        return
    watch = select.poll()
    watch.register(pidfd, select.POLLIN)

    def wait(timeout: float | None) -> int:
        if not watch.poll(None if timeout is None else timeout * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout or 0)
        return proc.wait()

    try:
        yield wait
    finally:
        os.close(pidfd)
