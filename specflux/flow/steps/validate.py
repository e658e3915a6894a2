"""The `validate` role: the engine runs the project's test command itself.

An agent saying "the tests pass" is a claim; the exit code and the JUnit report of a command the
engine ran are evidence. This module runs the `[validate]` command of `.specflux/config.toml` in
the repository, reads what it reports (JUnit XML for failed tests and the pass rate, `coverage json`
output for coverage) and returns a `Validation` whose `to_state()` is the `validation` field of the
run state (CONTRACT section 5).

Whatever the project's tests do (fail, crash, hang, print megabytes, write garbage XML, leave
processes behind) `run_validation` returns a Validation and never raises: a broken test run is a
failed validation, not a broken engine.

The `[validate]` table itself is read by `specflux.store.config`; subprocess and
junitparser are imported only when a validation runs.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Mapping

from specflux.store.config import ValidateConfig

TAIL_LINES = 60            # lines of output kept in `output_tail`
LINE_LIMIT = 500           # characters kept of one output line
MESSAGE_LIMIT = 600        # characters kept of one failure message
MESSAGE_TEXT_LINES = 8     # lines of a failure's text (the traceback) added to its message
MAX_FAILURES = 100         # failed tests kept with their messages; the rest are counted
ISSUE_TAIL_LINES = 15      # output lines quoted in issues() when no failed test explains a failure
KILL_GRACE_S = 5           # how long to wait for output to end once the command's group is killed

# Never handed to the test command: the tests may have been written by the agent under review.
# Repeats specflux.agent.tools.SECRET_ENV (a test checks): `specflux validate` needs no agent tools.
SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")

# Exit codes with which a POSIX shell says the command itself could not be run.
_SHELL_COULD_NOT_RUN = {126: "the command is not executable", 127: "the command was not found"}


# --- the result ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailedTest:
    """A failed or errored test: `name` as the test tool knows it (`tests/test_x.py::test_y` for
    pytest, else `classname.name`), `message` its failure message and the start of its text."""

    name: str
    message: str


@dataclass
class Validation:
    """What one run of the test command showed. `passed` is the verdict; the rest says why."""

    passed: bool
    pass_rate: float | None = None      # 0-100 from JUnit: passed / (total - skipped); None without it
    coverage: float | None = None       # 0-100 from coverage JSON `totals.percent_covered`
    failed_tests: list[FailedTest] = field(default_factory=list)  # at most MAX_FAILURES
    more_failed: int = 0                # failed tests beyond those in `failed_tests`
    exit_code: int | None = None        # None: the command did not run or was killed on timeout
    output_tail: str = ""               # the last TAIL_LINES lines of stdout and stderr, interleaved
    duration_ms: int = 0
    error: str | None = None            # why the run says nothing reliable (could not run, timed out...)
    notes: list[str] = field(default_factory=list)  # what went wrong without deciding (no coverage file)

    def to_state(self) -> dict[str, Any]:
        """The run state's `validation` field: CONTRACT section 5's names, then the details."""
        return {
            "passed": self.passed,
            "passRate": self.pass_rate,
            "coverage": self.coverage,
            "failedTests": [t.name for t in self.failed_tests],
            "failures": [{"name": t.name, "message": t.message} for t in self.failed_tests],
            "moreFailed": self.more_failed,
            "exitCode": self.exit_code,
            "error": self.error,
            "notes": list(self.notes),
            "durationMs": self.duration_ms,
            "outputTail": self.output_tail,
        }

    def issues(self) -> list[str]:
        """`coderOutput.selfValidation.issues`: one line per failed test ("name: message"), then
        the error. Without a failed test to point at (a crash, a timeout, a failure seen only in
        the exit code) the last item ends with the last lines of output, which say what happened."""
        if self.passed:
            return []
        out = [f"{t.name}: {_summary(t.message)}" for t in self.failed_tests]
        if self.more_failed:
            out.append(f"... and {self.more_failed} more failed test(s)")
        if self.error:
            out.append(self.error)
        if not self.failed_tests:
            if not self.error:
                out.append(f"the test command exited with {self.exit_code}")
            tail = "\n".join(self.output_tail.splitlines()[-ISSUE_TAIL_LINES:])
            if tail:
                out[-1] += f"; its last output:\n{tail}"
        return out


def _summary(message: str) -> str:
    """One line for a failure: its first line, and the first pytest `E` line where that says more
    ("collection failure (ModuleNotFoundError: No module named 'x')")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = lines[0] if lines else "(no message)"
    explained = next((line[1:].strip() for line in lines[1:] if line.startswith("E ")), "")
    return f"{first} ({explained})" if explained and explained not in first else first


# --- running ---------------------------------------------------------------------------------


@dataclass
class _Run:
    """What the command did: its exit code (None when it could not start or was killed), its
    output tail, and an error when it did not run to the end."""

    exit_code: int | None
    output: str
    error: str | None = None


def run_validation(root: Path, cfg: ValidateConfig, env: Mapping[str, str] | None = None,
                   edited: Iterable[Path] = ()) -> Validation:
    """Run `cfg.command` in `root` and judge the result.

    Without `junit_xml` the exit code alone decides. With it, the run passes only when the command
    exits 0 AND the report, written by this run, shows no failure or error. `env` is added to the
    inherited environment (minus the API secrets, which the tests never need to see). `edited`:
    the files the agent just changed, whose cached Python bytecode goes first, with every stale
    `.pyc` of the project (steps/bytecode.py).
    """
    started = time.monotonic()
    root = Path(root)
    environment = _environment(env)
    from specflux.flow.steps.bytecode import drop_stale

    drop_stale(root, edited, environment.get("PYTHONPYCACHEPREFIX"))
    reports = [p for p in (cfg.junit_xml, cfg.coverage_json) if p]
    stale = _remove_stale_reports(root, reports)
    if stale:
        return Validation(passed=False, error=stale, duration_ms=_ms_since(started))
    run = _run_command(root, cfg.command, cfg.timeout_s, environment)
    result = Validation(passed=False, exit_code=run.exit_code, output_tail=run.output, error=run.error)
    if run.error is None:
        _judge(result, root, cfg)
    result.duration_ms = _ms_since(started)
    return result


def _judge(result: Validation, root: Path, cfg: ValidateConfig) -> None:
    """Fill in the verdict, failures, pass rate and coverage of a command that ran to its end."""
    code = result.exit_code
    if code in _SHELL_COULD_NOT_RUN:
        result.error = f"{_SHELL_COULD_NOT_RUN[code]} (exit {code}): {cfg.command}"
        return
    if cfg.coverage_json:
        result.coverage, note = read_coverage(root / cfg.coverage_json, cfg.coverage_json)
        if note:
            result.notes.append(note)
    if not cfg.junit_xml:
        result.passed = code == 0
        return
    try:
        report = read_junit(root / cfg.junit_xml, root)
    except JUnitReportError as e:
        result.error = f"{cfg.junit_xml}: {e}"
        return
    result.pass_rate = report.pass_rate
    if report.total == 0:
        result.notes.append(f"{cfg.junit_xml}: the report holds no test")
    result.failed_tests = report.failures[:MAX_FAILURES]
    result.more_failed = max(0, len(report.failures) - MAX_FAILURES)
    result.passed = code == 0 and not report.failures


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _remove_stale_reports(root: Path, reports: list[str]) -> str | None:
    """Delete the reports a previous run left, so that a report read afterwards is this run's.

    Returns an error when one cannot be deleted (then no run could be trusted to have written it).
    """
    for name in reports:
        path = root / name
        try:
            if path.is_dir() and not path.is_symlink():
                return f"{name} is a folder; the report path must name a file"
            path.unlink(missing_ok=True)
        except OSError as e:
            return f"cannot remove the previous {name} before running the tests: {e.strerror or e}"
    return None


def _environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
    env.update(extra or {})
    return env


def _run_command(root: Path, command: str, timeout_s: float, env: Mapping[str, str]) -> _Run:
    """Run `command` through the shell in its own process group (in the environment `env`),
    keeping the tail of its output.

    On timeout (or Ctrl-C) the whole group is killed: a test runner's workers and the servers a
    test started die with it. Once the shell has exited, what is left of the group is killed too,
    since a leftover process would hold the output pipe open and keep running into the next step.
    """
    import subprocess

    from specflux.base.exit_watch import exit_watch

    tail = _Tail()
    try:
        proc = subprocess.Popen(command, shell=True, cwd=root, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **_new_group())
    except (OSError, ValueError) as e:
        return _Run(None, "", f"the test command could not start: {e}")
    reader = threading.Thread(target=_keep_tail, args=(proc.stdout, tail), daemon=True)
    reader.start()
    error = None
    try:
        with exit_watch(proc) as exited:  # (woken the moment the command exits: no polling)
            code: int | None = exited(timeout_s)
    except subprocess.TimeoutExpired:
        code, error = None, f"the test command timed out after {timeout_s:g}s; it and its children were killed"
    finally:  # also on Ctrl-C: no test process outlives the validation
        _kill_group(proc)
        proc.wait()
        reader.join(timeout=KILL_GRACE_S)
    return _Run(code, tail.text(), error)


def _new_group() -> dict[str, Any]:
    if os.name == "posix":
        return {"start_new_session": True}
    import subprocess  # pragma: no cover - Windows

    return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # pragma: no cover


def _kill_group(proc: Any) -> None:
    """SIGKILL the command's process group (the shell and everything it started that stayed)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        elif proc.poll() is None:  # pragma: no cover - Windows has no process groups to signal
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


class _Tail:
    """The last TAIL_LINES lines of output, each cut to LINE_LIMIT characters. Locked: when a
    process escaped the group and still holds the pipe, the reader goes on while we read."""

    def __init__(self) -> None:
        self._lines: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._lock = threading.Lock()

    def add(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if len(line) > LINE_LIMIT:
            line = line[:LINE_LIMIT] + " [...]"
        with self._lock:
            self._lines.append(line)

    def text(self) -> str:
        with self._lock:
            return "\n".join(self._lines)


def _keep_tail(stream: IO[bytes], tail: _Tail) -> None:
    """Read the output to its end (so the command never blocks on a full pipe), keeping the tail."""
    try:
        for raw in iter(lambda: stream.readline(64 * 1024), b""):
            tail.add(raw)
    except (OSError, ValueError):
        pass
    finally:
        stream.close()


# --- reading the reports ---------------------------------------------------------------------


class JUnitReportError(Exception):
    """A JUnit report that is missing or cannot be read as one."""


@dataclass
class JUnitReport:
    total: int
    skipped: int
    failures: list[FailedTest]

    @property
    def pass_rate(self) -> float | None:
        """Passed / (total - skipped) in percent; None when no test ran."""
        ran = self.total - self.skipped
        if ran <= 0:
            return None
        return round(100 * (ran - len(self.failures)) / ran, 2)


def read_junit(path: Path, root: Path) -> JUnitReport:
    """Read a JUnit XML report: a `<testsuites>` or a bare `<testsuite>`, nested suites included.

    A test counts as failed when it has a `<failure>` or an `<error>` (an error at collection is
    one), as skipped when it has only `<skipped>`. `root` turns pytest's dotted classnames back
    into node ids (`tests/test_x.py::test_y`) that can be run as they are.
    """
    if not path.is_file():
        raise JUnitReportError("the test command did not write this JUnit report")
    from junitparser import Error, Failure, Skipped

    try:
        total, skipped, failures = 0, 0, []
        for case in (c for suite in _suites(path) for c in _cases(suite)):
            total += 1
            results = case.result
            bad = [r for r in results if isinstance(r, (Failure, Error))]
            if bad:
                failures.append(FailedTest(_test_name(case.classname, case.name, root), _message(bad[0])))
            elif any(isinstance(r, Skipped) for r in results):
                skipped += 1
    except OSError as e:
        raise JUnitReportError(f"cannot read the JUnit report: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - whatever the file holds, it is a bad report, not a crash
        raise JUnitReportError(f"not a readable JUnit XML report: {type(e).__name__}: {e}") from None
    return JUnitReport(total, skipped, failures)


def _suites(path: Path) -> list[Any]:
    """The top-level test suites of the report (junitparser 3 returns a bare suite as itself)."""
    from junitparser import JUnitXml, TestSuite

    xml = JUnitXml.fromfile(str(path), parse_func=_parse_xml)
    return [xml] if isinstance(xml, TestSuite) else list(xml.iterchildren(TestSuite))


def _parse_xml(path: str) -> Any:
    """Parse without resolving entities or touching the network: the report may have been shaped
    by the code under review, and its text ends up in the run state."""
    try:
        from lxml import etree  # junitparser uses lxml when it is installed; stay compatible
    except ImportError:
        from xml.etree import ElementTree  # expat resolves no external entities

        return ElementTree.parse(path)
    return etree.parse(path, etree.XMLParser(resolve_entities=False, no_network=True))  # pragma: no cover


def _cases(suite: Any) -> Iterator[Any]:
    """Every test case in `suite` and in the suites nested in it, each once."""
    from junitparser import TestCase, TestSuite

    yield from suite.iterchildren(TestCase)
    for inner in suite.iterchildren(TestSuite):
        yield from _cases(inner)


def _test_name(classname: str | None, name: str | None, root: Path) -> str:
    """`tests/test_x.py::TestC::test_y` when the dotted classname leads to a file under `root`
    (pytest), else `classname.name`. A pytest collection error has an empty classname and the
    module as its name: it becomes the file's path."""
    classname, name = classname or "", name or ""
    if not classname and name:
        return _node_id(name.split("."), root) or name
    node = _node_id(classname.split(".") + [name], root) if classname else None
    return node or ".".join(p for p in (classname, name) if p) or "(unnamed test)"


def _node_id(parts: list[str], root: Path) -> str | None:
    """The longest prefix of `parts` naming a .py file under `root`, the rest as `::` parts."""
    for cut in range(len(parts), 0, -1):
        module = parts[:cut]
        if not all(re.fullmatch(r"[\w-]+", p) for p in module):
            continue
        relative = "/".join(module) + ".py"
        if (root / relative).is_file():
            return "::".join([relative, *parts[cut:]])
    return None


def _message(result: Any) -> str:
    """The failure's message and the first lines of its text, trimmed to MESSAGE_LIMIT."""
    message = (result.message or "").strip()
    text = "\n".join(_text_lines((result.text or "").strip("\n"), message)).rstrip()
    if text and text != message:
        message = f"{message}\n{text}" if message else text
    if len(message) > MESSAGE_LIMIT:
        message = message[:MESSAGE_LIMIT - 6].rstrip() + " [...]"
    return message or "(no message)"


def _text_lines(text: str, message: str) -> list[str]:
    """The lines of a failure's text worth keeping. pytest's text is a traceback whose point is
    in the `>` line (the failing source line), the `E` lines (the explanation, often repeated in
    the message) and the last line (`tests/test_x.py:8: AssertionError`); it starts with the test's
    source, which would fill the message. Other tools: the first lines."""
    lines = text.splitlines()
    explanation = [line for line in lines if line.startswith("E ")]
    if not explanation:
        return lines[:MESSAGE_TEXT_LINES]
    kept = [line for line in lines if line.startswith(">")][-1:]
    kept += [line for line in explanation if line[1:].strip() not in message][:MESSAGE_TEXT_LINES]
    if re.match(r"\S+:\d+: \w", lines[-1]):
        kept.append(lines[-1])
    return kept


def read_coverage(path: Path, name: str) -> tuple[float | None, str | None]:
    """Coverage in percent from `coverage json` output, or None and a note saying why not.

    A missing coverage report does not fail the validation (tests decide that), it only leaves
    coverage unknown.
    """
    if not path.is_file():
        return None, f"{name}: the test command did not write this coverage report"
    try:
        data = json.loads(path.read_bytes())
        value = data["totals"]["percent_covered"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None, f"{name}: not `coverage json` output (no totals.percent_covered)"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
        return None, f"{name}: totals.percent_covered is not a percentage: {value!r}"
    return round(float(value), 2), None
