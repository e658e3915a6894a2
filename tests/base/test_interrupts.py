"""Ctrl-C held over a write and its commit (base/files.py `deferred_interrupts`)."""

from __future__ import annotations

import os
import signal

import pytest

from specflux.base.files import deferred_interrupts


def test_a_ctrl_c_inside_nested_blocks_is_raised_once_at_the_end_of_the_outer_one():
    """Regression: an inner block (a task file's write inside a session's write-and-commit) raised
    at its own end, so the commit after it was skipped while the entry stayed written."""
    done = []
    with pytest.raises(KeyboardInterrupt):
        with deferred_interrupts():
            with deferred_interrupts():
                os.kill(os.getpid(), signal.SIGINT)
                done.append("write")
            done.append("commit")  # still runs: the outer block holds the Ctrl-C
    assert done == ["write", "commit"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_block_without_ctrl_c_raises_nothing_and_puts_the_handler_back():
    with deferred_interrupts():
        with deferred_interrupts():
            pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
