"""The command backend: run any agent CLI on the task, through the shell, in the repository root.

The agent gets the session's system prompt and context on stdin, and SPECFLUX_TASK_FILE,
SPECFLUX_TASK_ID and SPECFLUX_ROOT in its environment; it edits the task file itself (with the
`specflux` commands), so the outcome carries no hand-off.

What an agent CLI spent is read from its own output as it arrives (usage_readers.py: Claude Code,
Codex, Gemini CLI, aider, opencode); a session whose running usage passes its token or money
budget is stopped then. A CLI that prints nothing readable leaves the usage unknown, never 0;
so does one that prints a number not believed (usage_checks.py), and no failure of the reading
ends the session: it ends as the agent does, and its work is committed.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from specflux.agent.backend import SessionOutcome, SessionRequest, Usage
from specflux.agent.egress import Allowlist
from specflux.agent.environment import agent_env
from specflux.agent.reach import reach_line
from specflux.agent.presets import program_of
from specflux.agent import reaper
from specflux.agent.tools import Toolbox
from specflux.agent.usage_checks import failed
from specflux.agent.usage_readers import KINDS, UsageMeter, parse_usage, read_usage_and_turns  # noqa: F401
from specflux.base.errors import AgentError
from specflux.base.exit_watch import exit_watch

if TYPE_CHECKING:
    from specflux.agent.egress import EgressProxy
    from specflux.agent.presets import Preset

TAIL_LINES = 20  # of stderr, quoted in the error when the agent fails
EXITED = "the agent command exited with"  # how a session's error starts when its CLI failed (flow/steps/attempt.py)
COULD_NOT_START = "the agent command could not start"
OUTPUT_KEEP_CHARS = 1 << 20  # of stdout, parsed for usage after exit: the result comes last
SETUP_FAILURE_S = 1.0  # a shell that cannot start the program gives up at once
_SETUP_FAILURE = re.compile(r"not found|no such file or directory|permission denied", re.IGNORECASE)



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


class _Metered:
    """Keeps the output's tail and reads the agent's usage from each line as it arrives; `passed`
    is set (with `why`) once that usage is past the session's token or money budget."""

    def __init__(self, tail: OutputTail, meter: UsageMeter, request: SessionRequest):
        self.tail, self.meter, self.request = tail, meter, request
        self.passed = threading.Event()
        self.why: tuple[str, str] | None = None

    def append(self, line: str) -> None:
        """Never raises (the thread reading the agent's output must read to its end): a failure
        here makes the usage unknown, saying why."""
        self.tail.append(line)
        try:
            if self.meter.feed(line) and not self.passed.is_set():
                self._check()
        except Exception as e:  # noqa: BLE001 - whatever goes wrong, the session goes on
            self.meter.distrust(failed(e))

    def _check(self) -> None:
        usage, request = self.meter.usage(), self.request
        if usage is None:
            return
        over = request.over_budget(usage)
        if over is not None:
            self.why = (over[0], f"the agent {over[1]}; it was stopped")
            self.passed.set()


class _BudgetPassed(Exception):
    pass


CLOSED_OUTPUT = "its output closed (the program reading it, such as `head`, exited)"


def _pump(source: IO[bytes], sink: IO[str] | None, keep: _Keeper, prefix: str = "") -> None:
    """Copy `source` line by line to `sink` (the user's terminal), each line after `prefix`,
    keeping what `keep` keeps (without the prefix)."""
    for raw in iter(source.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        keep.append(line)
        if sink is not None:
            try:
                sink.write(prefix + line if prefix else line)
                sink.flush()
            except (OSError, ValueError):  # the output closed (`| head`, a terminal gone): the run pauses, saying
                from specflux.base.interrupts import hang_up  # so; reading goes on, or the agent would block

                hang_up(CLOSED_OUTPUT)
                sink = None
    source.close()


def _feed(sink: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(OSError):  # an agent that does not read its input is its own business
        sink.write(data)
    with contextlib.suppress(OSError):
        sink.close()


# --------------------------------------------------------------------- checking the command




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


@contextlib.contextmanager
def _workdir():
    """A private folder for one session of an agent CLI (its prompt file, its sandbox's HOME and
    temp folder), removed after it (in the background: base/tidy.py)."""
    import tempfile

    from specflux.base.tidy import remove_later

    folder = Path(tempfile.mkdtemp(prefix="specflux-agent-"))
    try:
        yield folder
    finally:
        remove_later(folder)


def _guarded(cmd: str) -> str:
    """The shell script running `cmd` so that a TERM kills its whole process group (_dies_with_us)."""
    return f'trap "kill -KILL 0" TERM; exec 3<&0; ( {cmd}\n) 0<&3 3<&- & wait $!'


_SAID: set[tuple[str, str]] = set()


def _say_once(line: str, run: str | None) -> None:
    """Print `line` on stderr, once per workflow `run` (its sessions share one sandbox: its reach
    is said at the first session, not at each of hundreds); outside a run, every time."""
    if run is None or (run, line) not in _SAID:
        if run is not None:
            _SAID.add((run, line))
        print(line, file=sys.stderr)


def _with_deathsig(argv: list[str]) -> list[str]:
    """`argv` under the session's reaper (reaper.py): it dies with specflux, and when it ends it
    kills everything the agent started, a `setsid` daemon too."""
    from specflux.agent import reaper

    return reaper.argv(argv)


def _dies_with_us(cmd: str) -> list[str]:
    """The agent's command line for the shell, under the session's reaper (reaper.py): an agent
    whose specflux is killed (`kill -9`, a crash) dies too, with everything it started, instead of
    going on changing the work tree behind the run that resumes. (The command runs in the
    background of a shell that kills its process group on TERM, its standard input passed on
    explicitly, because a shell runs no trap while it waits for a command in the foreground.)"""
    return _with_deathsig(["/bin/sh", "-c", _guarded(cmd)])


def _stop(proc: subprocess.Popen, readers: list[threading.Thread] = ()) -> None:
    """Kill the agent and everything it started, and reap it, then let `readers` (of its output)
    read to the end; Ctrl-C cannot cut this short."""
    import signal

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        reaper.stop(proc)
        for thread in readers:
            thread.join(timeout=5)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


class CommandBackend:
    """Runs `cmd` (a shell command line) as one agent session."""

    def __init__(self, cmd: str, timeout_s: float | None = None, env: dict[str, str] | None = None,
                 stream: bool = True, cancel: threading.Event | None = None, prefix: str = "",
                 usage_kind: str = "auto", *, preset: "Preset | None" = None, role: str = "coder",
                 model: str | None = None, sandbox: str = "off"):
        """`cancel`: set from another thread (a parallel run's `flow stop`), the agent is stopped
        as Ctrl-C would stop it. `prefix`: put before each line of the agent's output on the
        terminal (a parallel run names the task, as several agents write at once). `usage_kind`:
        which CLI's output the usage is read from (usage_readers.KINDS; "auto" tries each).

        `preset` (presets.py): the agent CLI `cmd` stands for, whose command line for `role` (and
        `model`, where the user named one) is run, the context handed over as it says; without
        one, `cmd` is run with the context on stdin. `sandbox`: the `[agent] sandbox` setting the
        CLI runs under (confine.py), "off" for none."""
        from specflux.agent.presets import command_preset

        self.preset = preset or command_preset(cmd)
        # SPECFLUX_CLI_SANDBOX overrides the setting (the test suite's fake agents write outside)
        self.role, self.model = role, model
        self.sandbox = sandbox if sandbox == "off" else os.environ.get("SPECFLUX_CLI_SANDBOX") or sandbox
        if preset is not None and usage_kind == "auto":
            usage_kind = preset.usage
        self.cmd = cmd
        self.timeout_s = timeout_s
        self.env = dict(env or {})
        self.stream = stream
        self.cancel = cancel
        self.prefix = prefix
        if usage_kind not in KINDS:
            raise AgentError(f"no usage reader {usage_kind!r} (readers: {', '.join(KINDS)})")
        self.usage_kind = usage_kind

    def preflight(self, root: Path | None = None) -> None:
        """Raise AgentError when the agent CLI plainly cannot start, before the session changes anything.

        Only a plain first word is judged (a program name looked up on PATH, or a path relative to
        `root`, by default SPECFLUX_ROOT from the backend's environment); a command line that is
        too shell-ish to judge is let through, and a start that fails anyway is marked as a setup
        error by `run`.
        """
        if self.sandbox != "off":  # a sandbox config.toml names but this system lacks: said before anything runs
            from specflux.agent.sandbox import choose

            choose(self.sandbox)
        if self.preset.name != "command" and self.preset.program and "/" not in self.preset.program:
            problem = self.preset.missing({**os.environ, **self.env}.get("PATH", os.defpath))
            if problem:
                raise AgentError(problem)
            return
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

        with _workdir() as workdir, contextlib.ExitStack() as closing:
            argv, full_env, stdin = self._launch(request, toolbox, env, workdir, closing)
            return self._run(request, argv, full_env, stdin, toolbox.root, elapsed)

    def _launch(self, request: SessionRequest, toolbox: Toolbox, env: dict[str, str] | None,
                workdir: Path, closing: contextlib.ExitStack) -> tuple[list[str], dict[str, str], bytes]:
        """The argv, environment and standard input of the agent CLI: its preset's command line
        for the role, the context written to a file in `workdir` (SPECFLUX_PROMPT_FILE) and handed
        over as the preset says, in the sandbox (confine.py) where there is one."""
        from specflux.agent.confine import confine

        prompt = f"{request.system}\n\n{request.context}"
        prompt_file = workdir / "prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")
        line = self.cmd if self.preset.name == "command" else \
            self.preset.command_line(self.role, prompt, str(prompt_file), self.model)
        given = {"SPECFLUX_ROOT": str(toolbox.root), **self.preset.env, **self.env, **(env or {}),
                 "SPECFLUX_PROMPT_FILE": str(prompt_file)}
        allowlist = Allowlist.for_preset(self.preset.hosts, agent_env(os.environ, self.preset.passes, given))
        in_run = bool(self.env.get("SPECFLUX_RUN"))  # a run puts back other tasks' files anyway: held read-only
        confined = confine(_guarded(line), Path(toolbox.root), workdir, self.sandbox, self.preset,
                           given.get("SPECFLUX_HANDIN"), given.get("SPECFLUX_TASK_ID"),
                           given.get("SPECFLUX_TASK_FILE") if in_run else None, allowlist,
                           tasks_read_only=in_run and self.role != "coder")  # a reviewer or planner hands in
        self.held_read_only = confined.held  # the session tells a person's deletion of these from the agent's
        if confined.proxy is not None:
            closing.callback(self._closed, confined.proxy)
        if confined.notice:
            print(f"specflux: {self.prefix}{confined.notice}", file=sys.stderr)
        _say_once(f"specflux: {self.prefix}{reach_line(confined.sandbox, confined.proxy, confined.network_confined)}",
                  self.env.get("SPECFLUX_RUN"))
        full_env = agent_env(os.environ, self.preset.passes, given, confined.env,
                             network_confined=confined.network_confined)
        if confined.argv is None:
            return _dies_with_us(line), full_env, self.preset.stdin(prompt)
        if confined.sandbox.name == "bwrap":  # its PID namespace ends what the agent left, and dies
            return confined.argv, full_env, self.preset.stdin(prompt)  # with us (--die-with-parent)
        return _with_deathsig(confined.argv), full_env, self.preset.stdin(prompt)

    def _closed(self, proxy: "EgressProxy") -> None:
        """Close the session's egress proxy, saying what it refused."""
        proxy.close()
        if proxy.refused:
            hosts = ", ".join(dict.fromkeys(proxy.refused))
            print(f"specflux: {self.prefix}the agent tried to reach {hosts}: refused, not among the hosts "
                  f"its preset needs ({len(proxy.refused)} connection{'s' if len(proxy.refused) != 1 else ''})",
                  file=sys.stderr)

    def _run(self, request: SessionRequest, argv: list[str], full_env: dict[str, str], stdin: bytes, root,
             elapsed) -> SessionOutcome:
        out = OutputTail()
        metered = _Metered(out, UsageMeter(self.usage_kind, model=self.model), request)
        err_tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        proc = subprocess.Popen(argv, cwd=root, env=full_env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        threads: list[threading.Thread] = []

        def stopped(stop: str, why: str) -> SessionOutcome:
            """The outcome of an agent stopped before it finished: what it had spent by then (its
            output read to the end), or unknown, never 0."""
            _stop(proc, [thread for thread in threads[1:] if thread.ident is not None])
            return SessionOutcome(stop=stop, error=why, usage=metered.meter.usage() or Usage.unknown(),
                                  turns=metered.meter.turns or 1, duration_ms=elapsed())

        try:  # from the agent's start: a Ctrl-C while its readers start stops it too
            threads += [
                threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True),
                threading.Thread(target=_pump, args=(proc.stdout, sys.stdout if self.stream else None, metered,
                                                     self.prefix), daemon=True),
                threading.Thread(target=_pump, args=(proc.stderr, sys.stderr if self.stream else None, err_tail,
                                                     self.prefix), daemon=True),
            ]
            for thread in threads:
                thread.start()
            code = self._wait(proc, metered.passed)
        except _BudgetPassed:
            return stopped(*(metered.why or ("token_budget", "past its budget")))
        except subprocess.TimeoutExpired:
            return stopped("error", f"the agent command timed out after {self.timeout_s:g}s and was killed")
        except KeyboardInterrupt:
            return stopped("interrupted", "interrupted by the user")
        finally:  # a second Ctrl-C inside a handler above still leaves no agent running
            if proc.poll() is None:
                _stop(proc)
        exited_ms = elapsed()
        for thread in threads:
            thread.join(timeout=5)
        outcome = SessionOutcome(stop="end_turn", turns=1, duration_ms=elapsed())
        usage, turns = metered.meter.usage(), metered.meter.turns
        if usage is None:  # one JSON value over many lines (gemini's json), read whole
            usage, turns = read_usage_and_turns(self.usage_kind, out.text(), self.model)
        outcome.usage, outcome.turns = usage or Usage.unknown(), turns or 1
        if code != 0:
            self._failed(outcome, code, "".join(err_tail).strip(), exited_ms / 1000)
        return outcome

    def _wait(self, proc: subprocess.Popen, passed: threading.Event) -> int:
        """The agent's exit code; TimeoutExpired after `timeout_s`; KeyboardInterrupt on `cancel`;
        _BudgetPassed when its usage passed its budget (`passed`)."""
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        with exit_watch(proc) as exited:
            while True:
                try:
                    return exited(0.1)
                except subprocess.TimeoutExpired:
                    if self.cancel is not None and self.cancel.is_set():
                        raise KeyboardInterrupt from None
                    if passed.is_set():
                        raise _BudgetPassed from None
                    if deadline is not None and time.monotonic() > deadline:
                        raise

    @staticmethod
    def _failed(outcome: SessionOutcome, code: int, stderr: str, seconds: float) -> None:
        """Mark `outcome` as an error, quoting the agent's last stderr lines."""
        outcome.stop = "error"
        outcome.setup_error = _setup_failure(code, seconds, stderr)
        if outcome.setup_error:
            what = f"{COULD_NOT_START} (exit {code}; a setup error: check --cmd)"
        else:
            what = f"{EXITED} {code}"
        outcome.error = what + (f":\n{stderr}" if stderr else "")
