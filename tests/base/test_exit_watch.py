"""base/exit_watch.py: a child's exit is seen the moment it happens, and a timeout still holds."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from specflux.base.exit_watch import exit_watch


def test_a_child_that_exits_is_seen_without_polling_and_its_code_is_given():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    with exit_watch(proc) as wait:
        assert wait(60) == 3
    assert proc.returncode == 3


def test_a_child_still_running_at_the_timeout_raises_timeout_expired_and_can_be_waited_for_again():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with exit_watch(proc) as wait:
            began = time.monotonic()
            with pytest.raises(subprocess.TimeoutExpired):
                wait(0.2)
            assert time.monotonic() - began >= 0.19
            proc.kill()
            assert wait(60) == -9
    finally:
        proc.kill()
        proc.wait()
