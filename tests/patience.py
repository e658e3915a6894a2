"""How long a test may wait: every bound in seconds that a busy machine could overrun goes through
`patience`, so that no test's outcome depends on the machine's load.

A test waits on events wherever it can (a file appears, a process ends, a line is printed); where a
bound in time is the point (an agent stopped rather than waited for, a session timeout, a lease),
the bound is `patience(seconds)`: the seconds it takes on a quiet machine, times a factor. The
factor is SPECFLUX_TEST_PATIENCE (default 3: the suite under pytest-xdist on 2 cores, with other
work beside it); raise it on a slower or busier machine rather than editing a test. What a test
proves with such a bound must not need a tight one: a process that should have been killed sleeps
far longer than any patience, so that waiting for it still fails.
"""

from __future__ import annotations

import os
import time
from typing import Callable

FACTOR = float(os.environ.get("SPECFLUX_TEST_PATIENCE") or 3)
if not FACTOR >= 1:
    raise ValueError(f"SPECFLUX_TEST_PATIENCE must be a number >= 1, not {os.environ['SPECFLUX_TEST_PATIENCE']!r}")


def patience(seconds: float) -> float:
    """`seconds` on a quiet machine, scaled for this one."""
    return seconds * FACTOR


def wait_until(predicate: Callable[[], object], seconds: float, what: str = "the awaited thing") -> None:
    """Poll `predicate` until it is true; fail after patience(seconds), naming `what`."""
    deadline = time.monotonic() + patience(seconds)
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {patience(seconds):.0f}s"
        time.sleep(0.05)
