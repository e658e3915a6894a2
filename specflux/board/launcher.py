"""Runs started from the control room: each a `specflux flow ...` process of its own, exactly what
a person would type, in a session of its own (stopping the board does not stop them), its output
written to a file and read back line by line for the page.

A process's output goes to a file, not a pipe: a run outlives the board that started it, and a
pipe whose reader is gone would end it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEEP_LINES = 5000  # the newest lines of all launches, for pages that join late


@dataclass
class Launch:
    number: int
    argv: list[str]
    log: Path
    process: subprocess.Popen
    started: float = field(default_factory=time.time)

    @property
    def command(self) -> str:
        return "specflux " + shlex.join(self.argv)

    def summary(self) -> dict[str, Any]:
        code = self.process.poll()
        return {"number": self.number, "command": self.command, "running": code is None, "exit": code,
                "started": self.started}


class Launcher:
    def __init__(self, root: Path):
        self.root = root
        self.folder = Path(tempfile.mkdtemp(prefix="specflux-board-"))
        self.launches: list[Launch] = []
        self.lines: list[tuple[int, int, str]] = []  # (seq, launch number, line)
        self.seq = 0
        self._lock = threading.Lock()

    def start(self, argv: list[str]) -> Launch:
        """Run `specflux ARGV` in the workspace; its lines reach the page as they come."""
        number = len(self.launches) + 1
        log = self.folder / f"launch-{number}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(self.root), *argv],
                                       cwd=self.root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        launch = Launch(number, list(argv), log, process)
        with self._lock:
            self.launches.append(launch)
        threading.Thread(target=self._follow, args=(launch,), daemon=True).start()
        return launch

    def _follow(self, launch: Launch) -> None:
        """Read the launch's log as it grows until its process ends and the log is read out."""
        with open(launch.log, "rb") as f:
            partial = b""
            while True:
                chunk = f.read(65536)
                if chunk:
                    partial += chunk
                    *whole, partial = partial.split(b"\n")
                    self._add(launch.number, [line.decode("utf-8", "replace") for line in whole])
                    continue
                if launch.process.poll() is not None:
                    rest = f.read()
                    if rest or partial:
                        self._add(launch.number, (partial + rest).decode("utf-8", "replace").splitlines())
                    self._add(launch.number, [f"(exit {launch.process.returncode})"])
                    return
                time.sleep(0.1)

    def _add(self, number: int, lines: list[str]) -> None:
        if not lines:
            return
        with self._lock:
            for line in lines:
                self.seq += 1
                self.lines.append((self.seq, number, line))
            del self.lines[:-KEEP_LINES]

    def mark(self) -> int:
        """Where a page that joins now starts: the lines already kept are sent to it too."""
        with self._lock:
            return self.lines[0][0] - 1 if self.lines else self.seq

    def since(self, seq: int) -> tuple[int, list[dict[str, Any]]]:
        with self._lock:
            new = [{"launch": n, "line": text} for s, n, text in self.lines if s > seq]
            return self.seq, new

    def summary(self) -> list[dict[str, Any]]:
        with self._lock:
            return [launch.summary() for launch in self.launches]

    def detach(self) -> None:
        """The board stops: say which runs go on without it."""
        going = [launch for launch in self.launches if launch.process.poll() is None]
        for launch in going:
            print(f"still running (the board started it): {launch.command} (pid {launch.process.pid})", flush=True)
