"""The command backend: run any agent CLI on the task, through the shell, in the repository root.

The agent gets the session's system prompt and context on stdin, and SPECFLUX_TASK_FILE,
SPECFLUX_TASK_ID and SPECFLUX_ROOT in its environment; it edits the task file itself (with the
`specflux` commands), so the outcome carries no hand-off.

What an agent CLI spent is read from its own JSON output, where it prints one: Claude Code's
`--output-format json` / `stream-json` result object, or Codex's `exec --json` `turn.completed`
event. A CLI that prints plain text leaves the usage at zero.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Protocol

from specflux.agent.backend import SessionOutcome, SessionRequest, Usage
from specflux.agent.tools import Toolbox, kill_group
from specflux.base.errors import AgentError

TAIL_LINES = 20  # of stderr, quoted in the error when the agent fails
OUTPUT_KEEP_CHARS = 1 << 20  # of stdout, parsed for usage after exit: the result comes last
SETUP_FAILURE_S = 1.0  # a shell that cannot start the program gives up at once
_SETUP_FAILURE = re.compile(r"not found|no such file or directory|permission denied", re.IGNORECASE)

# Words that make the shell, not a program, the first thing to run: too shell-ish to judge.
_SHELL_WORDS = frozenset(
    "! [[ ]] { } case coproc do done elif else esac fi for function if in select then time until while "
    ". : [ alias bg break builtin cd command continue declare eval exec exit export false fg getopts hash "
    "jobs kill let local printf pwd read readonly return set shift source test times trap true type "
    "typeset ulimit umask unalias unset wait".split()
)
_SHELL_META = re.compile(r"[$`;&|<>(){}*?\[\]#\\]")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)


class _Keeper(Protocol):
    def append(self, line: str) -> None: ...


class OutputTail:
    """The last `limit` characters of a stream, whole lines where they fit; for parsing after exit."""

    def __init__(self, limit: int = OUTPUT_KEEP_CHARS):
        self.limit = limit
        self.lines: collections.deque[str] = collections.deque()
        self.size = 0

    def append(self, line: str) -> None:
        self.lines.append(line)
        self.size += len(line)
        while self.size > self.limit and len(self.lines) > 1:
            self.size -= len(self.lines.popleft())
        if self.size > self.limit:  # one line longer than the limit: keep its end
            self.lines[0] = self.lines[0][-self.limit:]
            self.size = len(self.lines[0])

    def text(self) -> str:
        return "".join(self.lines)


def _pump(source: IO[bytes], sink: IO[str] | None, keep: _Keeper, prefix: str = "") -> None:
    """Copy `source` line by line to `sink` (the user's terminal), each line after `prefix`,
    keeping what `keep` keeps (without the prefix)."""
    for raw in iter(source.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        keep.append(line)
        if sink is not None:
            sink.write(prefix + line if prefix else line)
            sink.flush()
    source.close()


def _feed(sink: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError):  # an agent that does not read its input is its own business
        sink.write(data)
    with contextlib.suppress(OSError):
        sink.close()


# --------------------------------------------------------------------- usage from JSON output


def parse_usage(output: str) -> tuple[Usage, int] | None:
    """Tokens and turns from an agent CLI's JSON output, or None when it printed none.

    The last report wins: Claude Code's `{"type": "result", "usage": {...}, "num_turns": N}` (the
    only object of `--output-format json`, the last line of `stream-json`), or Codex's
    `{"type": "turn.completed", "usage": {...}}`, whose usage is the thread's running total.
    """
    for event in _json_objects_last_first(output):
        usage = event.get("usage")
        if not isinstance(usage, dict):
            continue
        if event.get("type") == "result":
            return _claude_usage(usage), _count(event.get("num_turns")) or 1
        if event.get("type") == "turn.completed":
            return _codex_usage(usage), 1
    return None


def _claude_usage(usage: dict[str, Any]) -> Usage:
    """Claude Code reports the Messages API's own fields: cached input apart from `input_tokens`."""
    return Usage(**{name: _count(usage.get(name)) for name in Usage.__dataclass_fields__})


def _codex_usage(usage: dict[str, Any]) -> Usage:
    """Codex counts cached input inside `input_tokens` (OpenAI's way); `Usage` keeps them apart."""
    cached = _count(usage.get("cached_input_tokens"))
    return Usage(input_tokens=max(_count(usage.get("input_tokens")) - cached, 0),
                 output_tokens=_count(usage.get("output_tokens")), cache_read_input_tokens=cached)


def _count(value: object) -> int:
    """A token or turn count as reported, or 0 for anything that is not a positive number."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def _json_objects_last_first(output: str) -> Iterator[dict[str, Any]]:
    """The JSON objects in `output`, last first: the whole of it when it is one JSON value (an
    object, or an array of them), else each line that is one. Anything else is skipped."""
    try:
        whole = json.loads(output)
    except ValueError:
        pass
    else:
        items = whole if isinstance(whole, list) else [whole]
        yield from (item for item in reversed(items) if isinstance(item, dict))
        return
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict):
                    yield event


# --------------------------------------------------------------------- checking the command


def program_of(cmd: str) -> tuple[str, dict[str, str]] | None:
    """The program a shell command line starts, with the variables it assigns first; None when
    the line is too shell-ish to tell (a keyword or builtin, an expansion, a redirection first)."""
    try:
        words = shlex.split(cmd)
    except ValueError:  # unbalanced quotes: let the shell say what it thinks
        return None
    assigned: dict[str, str] = {}
    for word in words:
        assignment = _ASSIGNMENT.fullmatch(word)
        if assignment:
            if _SHELL_META.search(word) or assignment.group(1) == "PATH":
                return None
            assigned[assignment.group(1)] = assignment.group(2)
            continue
        if word in _SHELL_WORDS or _SHELL_META.search(word):
            return None
        return os.path.expanduser(word), assigned
    return None


def _missing_program(program: str, root: Path, path_var: str | None) -> str | None:
    """Why `program` cannot be started, or None when it can."""
    if "/" not in program:
        if shutil.which(program, path=path_var) is None:
            return f"the agent command `{program}` was not found on PATH: install it, or give its full path in --cmd"
        return None
    path = root / program  # an absolute `program` stays itself
    if not path.exists():
        return f"the agent command `{program}` does not exist (looked for {path}): fix the path in --cmd"
    if path.is_dir():
        return f"the agent command `{program}` is a folder, not a program: fix the path in --cmd"
    if not os.access(path, os.X_OK):
        return (f"the agent command `{program}` is not executable: `chmod +x {program}`, or run it through "
                f"its interpreter (`--cmd \"python3 {program} ...\"`)")
    return None


def _setup_failure(code: int, seconds: float, stderr: str) -> bool:
    """Whether the shell could not start the program at all: 127 (not found) or 126 (not
    executable) at once, with the shell's own complaint."""
    return code in (126, 127) and seconds < SETUP_FAILURE_S and bool(_SETUP_FAILURE.search(stderr))


# --------------------------------------------------------------------- the backend


def _dies_with_us(cmd: str) -> list[str]:
    """The agent's command line for the shell. On Linux it runs under `setpriv --pdeathsig TERM`,
    and the shell kills its whole process group when that signal comes: an agent whose specflux is
    killed (`kill -9`, a crash) dies too, instead of going on changing the work tree behind the
    run that resumes. (The command runs in the background of that shell, its standard input passed
    on explicitly, because a shell runs no trap while it waits for a command in the foreground.)"""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if not setpriv:
        return ["/bin/sh", "-c", cmd]
    guarded = f'trap "kill -KILL 0" TERM; exec 3<&0; ( {cmd}\n) 0<&3 3<&- & wait $!'
    return [setpriv, "--pdeathsig", "TERM", "--", "/bin/sh", "-c", guarded]


def _stop(proc: subprocess.Popen) -> None:
    """Kill the agent and everything it started, and reap it; Ctrl-C cannot cut this short."""
    import signal

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        kill_group(proc)
        proc.wait()
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


class CommandBackend:
    """Runs `cmd` (a shell command line) as one agent session."""

    def __init__(self, cmd: str, timeout_s: float | None = None, env: dict[str, str] | None = None,
                 stream: bool = True, cancel: threading.Event | None = None, prefix: str = ""):
        """`cancel`: set from another thread (a parallel run's `flow stop`), the agent is stopped
        as Ctrl-C would stop it. `prefix`: put before each line of the agent's output on the
        terminal (a parallel run names the task, as several agents write at once)."""
        self.cmd = cmd
        self.timeout_s = timeout_s
        self.env = dict(env or {})
        self.stream = stream
        self.cancel = cancel
        self.prefix = prefix

    def preflight(self, root: Path | None = None) -> None:
        """Raise AgentError when the agent CLI plainly cannot start, before the session changes anything.

        Only a plain first word is judged (a program name looked up on PATH, or a path relative to
        `root`, by default SPECFLUX_ROOT from the backend's environment); a command line that is
        too shell-ish to judge is let through, and a start that fails anyway is marked as a setup
        error by `run`.
        """
        found = program_of(self.cmd)
        if found is None:
            return
        program, assigned = found
        env = {**os.environ, **self.env, **assigned}
        root = Path(root or self.env.get("SPECFLUX_ROOT") or os.getcwd())
        problem = _missing_program(program, root, env.get("PATH", os.defpath))
        if problem:
            raise AgentError(problem)

    def run(self, request: SessionRequest, toolbox: Toolbox, env: dict[str, str] | None = None) -> SessionOutcome:
        started = time.monotonic()

        def elapsed() -> int:
            return int((time.monotonic() - started) * 1000)

        full_env = {**os.environ, "SPECFLUX_ROOT": str(toolbox.root), **self.env, **(env or {})}
        proc = subprocess.Popen(_dies_with_us(self.cmd), cwd=toolbox.root, env=full_env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        out = OutputTail()
        err_tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        threads = [
            threading.Thread(target=_feed, args=(proc.stdin, f"{request.system}\n\n{request.context}".encode()),
                             daemon=True),
            threading.Thread(target=_pump, args=(proc.stdout, sys.stdout if self.stream else None, out, self.prefix),
                             daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, sys.stderr if self.stream else None, err_tail,
                                                 self.prefix), daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            code = self._wait(proc)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return SessionOutcome(stop="error", error=f"the agent command timed out after {self.timeout_s:g}s "
                                  "and was killed", turns=1, duration_ms=elapsed())
        except KeyboardInterrupt:
            _stop(proc)
            return SessionOutcome(stop="interrupted", error="interrupted by the user", turns=1,
                                  duration_ms=elapsed())
        finally:  # a second Ctrl-C inside a handler above still leaves no agent running
            if proc.poll() is None:
                _stop(proc)
        exited_ms = elapsed()
        for thread in threads:
            thread.join(timeout=5)
        outcome = SessionOutcome(stop="end_turn", turns=1, duration_ms=elapsed())
        reported = parse_usage(out.text())
        if reported is not None:
            outcome.usage, outcome.turns = reported
        if code != 0:
            self._failed(outcome, code, "".join(err_tail).strip(), exited_ms / 1000)
        return outcome

    def _wait(self, proc: subprocess.Popen) -> int:
        """The agent's exit code; TimeoutExpired after `timeout_s`; KeyboardInterrupt on `cancel`."""
        if self.cancel is None:
            return proc.wait(timeout=self.timeout_s)
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while True:
            try:
                return proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                if self.cancel.is_set():
                    raise KeyboardInterrupt from None
                if deadline is not None and time.monotonic() > deadline:
                    raise

    @staticmethod
    def _failed(outcome: SessionOutcome, code: int, stderr: str, seconds: float) -> None:
        """Mark `outcome` as an error, quoting the agent's last stderr lines."""
        outcome.stop = "error"
        outcome.setup_error = _setup_failure(code, seconds, stderr)
        if outcome.setup_error:
            what = f"the agent command could not start (exit {code}; a setup error: check --cmd)"
        else:
            what = f"the agent command exited with {code}"
        outcome.error = what + (f":\n{stderr}" if stderr else "")
