"""The command backend: run any agent CLI on the task, through the shell, in the repository root.

The agent gets the session's system prompt and context on stdin, and SPECFLUX_TASK_FILE,
SPECFLUX_TASK_ID and SPECFLUX_ROOT in its environment; it edits the task file itself (with the
`specflux` commands), so the outcome carries no hand-off.
"""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import sys
import threading
import time
from typing import IO

from specflux.agent.backend import SessionOutcome, SessionRequest
from specflux.agent.tools import Toolbox, kill_group

TAIL_LINES = 20


def _pump(source: IO[bytes], sink: IO[str] | None, tail: collections.deque[str]) -> None:
    """Copy `source` line by line to `sink` (the user's terminal), keeping the last lines."""
    for raw in iter(source.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        tail.append(line)
        if sink is not None:
            sink.write(line)
            sink.flush()
    source.close()


def _feed(sink: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError):  # an agent that does not read its input is its own business
        sink.write(data)
    with contextlib.suppress(OSError):
        sink.close()


class CommandBackend:
    """Runs `cmd` (a shell command line) as one agent session."""

    def __init__(self, cmd: str, timeout_s: float | None = None, env: dict[str, str] | None = None,
                 stream: bool = True):
        self.cmd = cmd
        self.timeout_s = timeout_s
        self.env = dict(env or {})
        self.stream = stream

    def run(self, request: SessionRequest, toolbox: Toolbox, env: dict[str, str] | None = None) -> SessionOutcome:
        started = time.monotonic()

        def elapsed() -> int:
            return int((time.monotonic() - started) * 1000)

        full_env = {**os.environ, "SPECFLUX_ROOT": str(toolbox.root), **self.env, **(env or {})}
        proc = subprocess.Popen(self.cmd, shell=True, cwd=toolbox.root, env=full_env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        out_tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        err_tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        threads = [
            threading.Thread(target=_feed, args=(proc.stdin, f"{request.system}\n\n{request.context}".encode()),
                             daemon=True),
            threading.Thread(target=_pump, args=(proc.stdout, sys.stdout if self.stream else None, out_tail),
                             daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, sys.stderr if self.stream else None, err_tail),
                             daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            code = proc.wait(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait()
            return SessionOutcome(stop="error", error=f"the agent command timed out after {self.timeout_s:g}s "
                                  "and was killed", turns=1, duration_ms=elapsed())
        except KeyboardInterrupt:
            kill_group(proc)
            proc.wait()
            return SessionOutcome(stop="interrupted", error="interrupted by the user", turns=1,
                                  duration_ms=elapsed())
        for thread in threads:
            thread.join(timeout=5)
        if code == 0:
            return SessionOutcome(stop="end_turn", turns=1, duration_ms=elapsed())
        tail = "".join(err_tail).strip()
        return SessionOutcome(stop="error", error=f"the agent command exited with {code}"
                              + (f":\n{tail}" if tail else ""), turns=1, duration_ms=elapsed())
