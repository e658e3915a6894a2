"""The validate role: the engine runs the project's tests itself and believes only what they say.

Most tests run real pytest in a throwaway project, so that what is checked is what a real JUnit
report and a real exit code look like, not what we think they look like.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from patience import patience

from specflux.store.config import DEFAULT_CONFIG, ValidateConfig, load_config, load_validate_config
from specflux.base.errors import ParseError
from specflux.flow.steps.validate import (
    MAX_FAILURES,
    SECRET_ENV,
    TAIL_LINES,
    FailedTest,
    Validation,
    run_validation,
)

# Plugin autoload off: hypothesis' plugin alone triples the start-up time of each inner run.
PYTEST = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"
JUNIT = ".specflux-junit.xml"

CALC = "def add(a, b):\n    return a + b\n"

PASSING = """\
from calc import add


def test_add():
    assert add(1, 2) == 3


def test_add_negative():
    assert add(-1, -2) == -3
"""

ONE_FAILING = """\
import pytest

from calc import add


def test_add():
    assert add(1, 2) == 3


def test_add_wrong():
    assert add(2, 2) == 5, "two and two"


@pytest.mark.skip(reason="not yet")
def test_later():
    pass


class TestGroup:
    def test_in_class(self):
        assert add(0, 0) == 0
"""


def project(tmp_path: Path, tests: dict[str, str]) -> Path:
    """A tiny package with its tests, and a pytest.ini so that no outer configuration applies."""
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "calc.py").write_text(CALC)
    for name, text in tests.items():
        (root / "tests" / name).write_text(text)
    return root


def junit_cfg(**kw) -> ValidateConfig:
    return ValidateConfig(command=f"{PYTEST} --junitxml={JUNIT}", junit_xml=JUNIT, **kw)


# --- real pytest runs ------------------------------------------------------------------------


def test_all_passing(tmp_path):
    root = project(tmp_path, {"test_calc.py": PASSING})
    v = run_validation(root, junit_cfg())
    assert v.passed, v
    assert v.pass_rate == 100
    assert v.exit_code == 0 and v.error is None
    assert v.failed_tests == [] and v.issues() == []
    assert "2 passed" in v.output_tail
    assert v.duration_ms > 0
    assert v.to_state()["passed"] is True and v.to_state()["failedTests"] == []


@pytest.mark.parametrize("cache", ["__pycache__", "PYTHONPYCACHEPREFIX"])
def test_a_fix_of_the_same_size_in_the_same_second_is_tested_as_fixed(tmp_path, cache):
    """CPython runs a .pyc whose recorded size and modification time (whole seconds) match its
    source's: a retry that fixes one character within the second the last attempt's tests imported
    the file was tested as the old code (a fast agent met it). The files the agent edited lose
    their bytecode before the tests run."""
    root = project(tmp_path, {"test_calc.py": PASSING})
    calc = root / "calc.py"
    calc.write_text(CALC.replace("+", "*"))
    env = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": ""}  # (empty: unset, for Python)
    if cache == "PYTHONPYCACHEPREFIX":
        env[cache] = str(tmp_path / "bytecode")
    assert not run_validation(root, junit_cfg(), env=env).passed  # compiles calc.py
    stamp = calc.stat().st_mtime_ns
    calc.write_text(CALC)
    os.utime(calc, ns=(stamp, stamp))  # within the same second
    assert not run_validation(root, junit_cfg(), env=env).passed, "CPython ran the new file: no hazard to guard"
    assert run_validation(root, junit_cfg(), env=env, edited=[calc]).passed


@pytest.mark.parametrize("cache", ["__pycache__", "PYTHONPYCACHEPREFIX"])
def test_a_file_put_back_in_the_second_its_bytecode_was_made_is_tested_as_it_is_now(tmp_path, cache):
    """Not the coder's edit: the engine putting a file back (after an agent's `git reset`) in the
    second a test had just imported it, the same size. Every cached .pyc of the project written
    before its source last changed goes before the tests run (git's list of the project's files)."""
    root = project(tmp_path, {"test_calc.py": PASSING})
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    calc = root / "calc.py"
    second = int(time.time()) - 100  # a whole second: the file, its bytecode and its rewrite within it
    calc.write_text(CALC.replace("+", "*"))
    os.utime(calc, ns=(second * 10**9 + 100_000_000,) * 2)
    env = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": ""}
    if cache == "PYTHONPYCACHEPREFIX":
        env[cache] = str(tmp_path / "bytecode")
    assert not run_validation(root, junit_cfg(), env=env).passed  # compiles calc.py
    (made,) = [p for p in (root if cache == "__pycache__" else tmp_path / "bytecode").rglob("calc.*.pyc")]
    os.utime(made, ns=(second * 10**9 + 200_000_000,) * 2)  # written after the file, in its second
    calc.write_text(CALC)
    os.utime(calc, ns=(second * 10**9 + 500_000_000,) * 2)  # put back after that, in the same second
    assert run_validation(root, junit_cfg(), env=env).passed, "the tests ran the bytecode of the old file"


def test_one_failing_test_is_named_with_its_message(tmp_path):
    root = project(tmp_path, {"test_calc.py": ONE_FAILING})
    v = run_validation(root, junit_cfg())
    assert not v.passed
    assert v.exit_code == 1 and v.error is None
    assert v.pass_rate == 66.67  # 2 of the 3 that ran; the skipped one does not count
    assert [t.name for t in v.failed_tests] == ["tests/test_calc.py::test_add_wrong"]
    message = v.failed_tests[0].message
    assert "two and two" in message and "assert 4 == 5" in message
    assert message.endswith("tests/test_calc.py:11: AssertionError")  # where it failed
    assert len(message) <= 600
    assert v.issues() == [f"tests/test_calc.py::test_add_wrong: {message.splitlines()[0]}"]
    state = v.to_state()
    assert {"passed", "passRate", "coverage", "failedTests"} <= set(state)
    assert state["failedTests"] == ["tests/test_calc.py::test_add_wrong"]
    assert state["failures"] == [{"name": "tests/test_calc.py::test_add_wrong", "message": message}]
    assert state["passRate"] == 66.67 and state["coverage"] is None
    json.dumps(state)  # the run state is JSON


def test_failing_test_in_a_class_and_a_package(tmp_path):
    root = project(tmp_path, {"__init__.py": "", "test_calc.py": ONE_FAILING.replace(
        "assert add(0, 0) == 0", "assert add(0, 1) == 0")})
    v = run_validation(root, junit_cfg())
    assert sorted(t.name for t in v.failed_tests) == [
        "tests/test_calc.py::TestGroup::test_in_class", "tests/test_calc.py::test_add_wrong"]


def test_error_at_collection(tmp_path):
    root = project(tmp_path, {"test_calc.py": PASSING, "test_broken.py": "import no_such_module_here\n"})
    v = run_validation(root, junit_cfg())
    assert not v.passed
    assert v.exit_code == 2
    assert [t.name for t in v.failed_tests] == ["tests/test_broken.py"]
    assert "no_such_module_here" in v.failed_tests[0].message
    assert v.issues() == ["tests/test_broken.py: collection failure "
                          "(ModuleNotFoundError: No module named 'no_such_module_here')"]


def test_error_in_a_fixture(tmp_path):
    fixture = """\
import pytest


@pytest.fixture
def db():
    raise RuntimeError("db down")


def test_query(db):
    pass
"""
    root = project(tmp_path, {"test_db.py": fixture})
    v = run_validation(root, junit_cfg())
    assert not v.passed and v.pass_rate == 0
    [failed] = v.failed_tests
    assert failed.name == "tests/test_db.py::test_query"
    assert failed.message == ('failed on setup with "RuntimeError: db down"\n'
                              '>       raise RuntimeError("db down")\ntests/test_db.py:6: RuntimeError')


def test_exit_code_alone_decides_without_junit(tmp_path):
    root = project(tmp_path, {"test_calc.py": PASSING})
    v = run_validation(root, ValidateConfig(command=PYTEST))
    assert v.passed and v.pass_rate is None and v.exit_code == 0

    root = project(tmp_path / "b", {"test_calc.py": ONE_FAILING})
    v = run_validation(root, ValidateConfig(command=PYTEST))
    assert not v.passed and v.exit_code == 1 and v.error is None
    assert v.failed_tests == [] and v.pass_rate is None
    [issue] = v.issues()
    assert issue.startswith("the test command exited with 1; its last output:")
    assert "1 failed" in issue


def test_exit_code_fails_even_when_the_report_is_clean(tmp_path):
    """pytest exits 5 when it collects nothing: the report has no failure, the run did not pass."""
    root = project(tmp_path, {})
    v = run_validation(root, junit_cfg())
    assert not v.passed and v.exit_code == 5 and v.error is None and v.failed_tests == []
    assert v.pass_rate is None
    assert any("no test" in n for n in v.notes)
    assert v.issues()[0].startswith("the test command exited with 5")


def test_report_with_failures_fails_even_when_the_command_exits_0(tmp_path):
    root = project(tmp_path, {"test_calc.py": ONE_FAILING})
    v = run_validation(root, ValidateConfig(command=f"{PYTEST} --junitxml={JUNIT}; exit 0", junit_xml=JUNIT))
    assert v.exit_code == 0 and not v.passed
    assert [t.name for t in v.failed_tests] == ["tests/test_calc.py::test_add_wrong"]


def test_junit_configured_but_not_written(tmp_path):
    root = project(tmp_path, {"test_calc.py": PASSING})
    v = run_validation(root, ValidateConfig(command=PYTEST, junit_xml=JUNIT))
    assert v.exit_code == 0 and not v.passed
    assert v.error == f"{JUNIT}: the test command did not write this JUnit report"
    [issue] = v.issues()
    assert issue.startswith(v.error + "; its last output:") and "2 passed" in issue


def test_stale_junit_is_never_read(tmp_path):
    root = project(tmp_path, {"test_calc.py": PASSING})
    assert run_validation(root, junit_cfg()).passed
    assert (root / JUNIT).is_file()  # a passing report from the run before
    v = run_validation(root, ValidateConfig(command="exit 0", junit_xml=JUNIT))
    assert not v.passed and "did not write" in v.error
    assert not (root / JUNIT).exists()


def test_stale_report_that_cannot_be_removed_stops_the_run(tmp_path):
    root = project(tmp_path, {})
    (root / JUNIT).mkdir()
    v = run_validation(root, ValidateConfig(command="touch ran", junit_xml=JUNIT))
    assert not v.passed and "is a folder" in v.error
    assert not (root / "ran").exists()


# --- reading reports that are not pytest's ---------------------------------------------------


def report_cfg(root: Path, xml: str) -> ValidateConfig:
    """A command that 'writes' `xml` as its report, as another test tool would."""
    (root / "fixture.xml").write_text(xml)
    return ValidateConfig(command=f"cp fixture.xml {JUNIT}", junit_xml=JUNIT)


def test_bare_testsuite_nested_suites_skips_and_errors(tmp_path):
    root = project(tmp_path, {})
    xml = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="all" tests="5">
  <testcase classname="com.example.MathTest" name="adds"/>
  <testcase classname="com.example.MathTest" name="divides">
    <failure message="expected 2 but was 3" type="AssertionError">at MathTest.java:12
at Runner.java:40</failure>
  </testcase>
  <testsuite name="inner">
    <testcase classname="com.example.IoTest" name="reads"><error message="boom">IOException</error></testcase>
    <testcase classname="com.example.IoTest" name="writes"><skipped/></testcase>
    <testcase classname="com.example.IoTest" name="seeks"/>
  </testsuite>
</testsuite>
"""
    v = run_validation(root, report_cfg(root, xml))
    assert not v.passed and v.exit_code == 0
    assert v.failed_tests == [
        FailedTest("com.example.MathTest.divides", "expected 2 but was 3\nat MathTest.java:12\nat Runner.java:40"),
        FailedTest("com.example.IoTest.reads", "boom\nIOException"),
    ]
    assert v.pass_rate == 50  # 2 of the 4 that ran


def test_testsuites_root_all_passing(tmp_path):
    root = project(tmp_path, {})
    xml = ('<testsuites><testsuite name="a"><testcase classname="x" name="one"/></testsuite>'
           '<testsuite name="b"><testcase classname="y" name="two"/><testcase classname="y" name="three">'
           '<skipped message="later"/></testcase></testsuite></testsuites>')
    v = run_validation(root, report_cfg(root, xml))
    assert v.passed and v.pass_rate == 100


@pytest.mark.parametrize("xml", ["this is not xml", "<html><body>hello</body></html>", "",
                                 '<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaaaa">'
                                 '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
                                 '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
                                 '<testsuite><testcase name="&c;"/></testsuite>'])
def test_garbled_report(tmp_path, xml):
    root = project(tmp_path, {})
    v = run_validation(root, report_cfg(root, xml))
    if v.passed:  # the small entity expansion is well-formed XML; it must at least not crash
        assert xml.startswith("<?xml")
        return
    assert v.error.startswith(f"{JUNIT}: not a readable JUnit XML report")


def test_long_failure_messages_and_many_failures_are_trimmed(tmp_path):
    root = project(tmp_path, {})
    cases = "".join(f'<testcase classname="c" name="t{i}"><failure message="{"m" * 900}">{"x" * 900}</failure>'
                    f"</testcase>" for i in range(MAX_FAILURES + 5))
    v = run_validation(root, report_cfg(root, f"<testsuite>{cases}</testsuite>"))
    assert len(v.failed_tests) == MAX_FAILURES and v.more_failed == 5
    assert all(len(t.message) <= 600 for t in v.failed_tests)
    assert v.issues()[-1] == "... and 5 more failed test(s)"
    assert v.pass_rate == 0


# --- coverage --------------------------------------------------------------------------------

# What `coverage json` (coverage.py 7) writes, abridged to one file.
COVERAGE_JSON = {
    "meta": {"format": 3, "version": "7.6.1", "timestamp": "2024-11-26T14:00:00.000000",
             "branch_coverage": False, "show_contexts": False},
    "files": {"calc.py": {"executed_lines": [1, 2], "summary": {
        "covered_lines": 2, "num_statements": 3, "percent_covered": 66.66666666666667,
        "percent_covered_display": "67", "missing_lines": 1, "excluded_lines": 0},
        "missing_lines": [4], "excluded_lines": []}},
    "totals": {"covered_lines": 2, "num_statements": 3, "percent_covered": 66.66666666666667,
               "percent_covered_display": "67", "missing_lines": 1, "excluded_lines": 0},
}


def coverage_cfg(root: Path, report: str) -> ValidateConfig:
    (root / "cov-fixture.json").write_text(report)
    return ValidateConfig(command=f"{PYTEST} --junitxml={JUNIT}; rc=$?; cp cov-fixture.json coverage.json; exit $rc",
                          junit_xml=JUNIT, coverage_json="coverage.json")


def test_coverage_is_read(tmp_path):
    root = project(tmp_path, {"test_calc.py": PASSING})
    v = run_validation(root, coverage_cfg(root, json.dumps(COVERAGE_JSON)))
    assert v.passed and v.coverage == 66.67 and v.notes == []
    assert v.to_state()["coverage"] == 66.67


@pytest.mark.parametrize("report", ["{not json", "[]", '{"totals": {}}', '{"totals": {"percent_covered": "high"}}',
                                    '{"totals": {"percent_covered": 250}}'])
def test_unreadable_coverage_leaves_it_unknown_without_failing(tmp_path, report):
    root = project(tmp_path, {"test_calc.py": PASSING})
    v = run_validation(root, coverage_cfg(root, report))
    assert v.passed and v.coverage is None
    assert len(v.notes) == 1 and v.notes[0].startswith("coverage.json: ")


def test_stale_coverage_is_never_read(tmp_path):
    root = project(tmp_path, {"test_calc.py": PASSING})
    (root / "coverage.json").write_text(json.dumps(COVERAGE_JSON))
    v = run_validation(root, ValidateConfig(command=PYTEST, coverage_json="coverage.json"))
    assert v.passed and v.coverage is None
    assert v.notes == ["coverage.json: the test command did not write this coverage report"]


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import coverage"], capture_output=True).returncode != 0,
                    reason="coverage is not installed")
def test_real_coverage_run(tmp_path):  # pragma: no cover - only where coverage is installed
    root = project(tmp_path, {"test_calc.py": PASSING})
    py = shlex.quote(sys.executable)
    v = run_validation(root, ValidateConfig(
        command=f"{py} -m coverage run -m pytest -q -p no:cacheprovider --junitxml={JUNIT} && {py} -m coverage json",
        junit_xml=JUNIT, coverage_json="coverage.json"))
    assert v.passed and v.coverage is not None and 0 < v.coverage <= 100


# --- commands that do not run as planned -----------------------------------------------------


def test_command_not_found(tmp_path):
    root = project(tmp_path, {})
    v = run_validation(root, ValidateConfig(command="no-such-test-runner-xyz --all", junit_xml=JUNIT))
    assert not v.passed and v.exit_code == 127
    assert v.error == "the command was not found (exit 127): no-such-test-runner-xyz --all"
    assert "no-such-test-runner-xyz" in v.output_tail
    [issue] = v.issues()
    assert issue.startswith(v.error + "; its last output:") and "not found" in issue


def test_root_that_does_not_exist(tmp_path):
    v = run_validation(tmp_path / "missing", ValidateConfig(command="true"))
    assert not v.passed and v.exit_code is None
    assert v.error.startswith("the test command could not start: ")


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for a parent that does not reap it counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


@pytest.mark.skipif(os.name != "posix", reason="process groups")
def test_timeout_kills_the_process_group(tmp_path):
    """A hanging test command and a process it started both die; the run returns within the timeout.
    (Python rather than pytest hangs: it starts in milliseconds, so the child is there before the
    timeout on a loaded machine too.)"""
    hang = """\
import os, subprocess, sys, time

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open("child.pid", "w") as f:
    f.write(str(child.pid))
os.rename("child.pid", "child.pid.done")
time.sleep(600)
"""
    root = project(tmp_path, {})
    (root / "hang.py").write_text(hang)
    timeout = patience(1.5)
    started = time.monotonic()
    v = run_validation(root, ValidateConfig(command=f"{shlex.quote(sys.executable)} hang.py", timeout_s=timeout))
    elapsed = time.monotonic() - started
    assert elapsed < timeout + patience(3), elapsed
    assert not v.passed and v.exit_code is None
    assert v.error == f"the test command timed out after {timeout:g}s; it and its children were killed"
    pid = int((root / "child.pid.done").read_text())
    deadline = time.monotonic() + patience(5)
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


@pytest.mark.skipif(os.name != "posix", reason="process groups")
def test_leftover_background_process_does_not_hold_the_run(tmp_path):
    root = project(tmp_path, {})
    started = time.monotonic()
    v = run_validation(root, ValidateConfig(command=f"sleep {patience(10) + 30:.0f} & echo started; exit 0", timeout_s=30))
    assert v.passed and v.output_tail == "started"
    assert time.monotonic() - started < patience(10)  # not the 60 s of the process left behind


def test_output_tail_keeps_the_last_lines(tmp_path):
    root = project(tmp_path, {})
    script = "import sys\nfor i in range(5000): print('line', i)\nprint('E' * 5000, file=sys.stderr)\n"
    (root / "noisy.py").write_text(script)
    v = run_validation(root, ValidateConfig(command=f"{shlex.quote(sys.executable)} noisy.py; exit 3"))
    lines = v.output_tail.splitlines()
    assert len(lines) == TAIL_LINES
    assert lines[-2] == "line 4999" and lines[-1].startswith("EEEE") and len(lines[-1]) < 600
    assert v.exit_code == 3 and not v.passed


def test_environment_extras_given_and_secrets_withheld(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    root = project(tmp_path, {})
    v = run_validation(root, ValidateConfig(command='echo "[$ANTHROPIC_API_KEY] [$SPECFLUX_RUN]"'),
                       env={"SPECFLUX_RUN": "run-1"})
    assert v.output_tail == "[] [run-1]"


def test_secret_names_match_the_agent_tools():
    from specflux.agent.tools import SECRET_ENV as AGENT_SECRETS

    assert SECRET_ENV == AGENT_SECRETS


def test_issues_of_a_passed_validation_are_empty():
    assert Validation(passed=True, error=None).issues() == []


# --- configuration ---------------------------------------------------------------------------


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_config_without_validate(tmp_path):
    assert load_config(write_config(tmp_path, DEFAULT_CONFIG)).validate is None
    assert load_config(tmp_path / "absent.toml").validate is None


def test_config_with_validate(tmp_path):
    path = write_config(tmp_path, """\
        [agent]
        max_turns = 10

        [validate]
        command = "python -m pytest -q --junitxml=.specflux-junit.xml"
        junit_xml = ".specflux-junit.xml"
        coverage_json = "coverage.json"
        timeout_s = 60
        """)
    config = load_config(path)
    assert config.validate == ValidateConfig(command="python -m pytest -q --junitxml=.specflux-junit.xml",
                                             junit_xml=".specflux-junit.xml", coverage_json="coverage.json",
                                             timeout_s=60.0)
    assert config.agent.max_turns == 10
    minimal = load_config(write_config(tmp_path, '[validate]\ncommand = "make test"\n')).validate
    assert minimal == ValidateConfig(command="make test")


def test_documented_example_parses(tmp_path):
    """The commented-out [validate] of the default config works once uncommented."""
    example = DEFAULT_CONFIG[DEFAULT_CONFIG.index("# [validate]"):].split("\n\n")[0]
    text = "\n".join(line[2:] for line in example.splitlines() if line.startswith("# "))
    assert load_config(write_config(tmp_path, text)).validate.junit_xml == ".specflux-junit.xml"


def test_documented_flow_example_parses(tmp_path):
    """The commented-out [flow] of the default config works once uncommented."""
    example = DEFAULT_CONFIG[DEFAULT_CONFIG.index("# [flow]"):].split("\n\n")[0]
    text = "\n".join(line[2:] for line in example.splitlines() if line.startswith("# "))
    flow = load_config(write_config(tmp_path, text)).flow
    assert flow.worktree_setup == "npm ci" and flow.worktree_setup_timeout_s == 900


@pytest.mark.parametrize("body, line, words", [
    ('[validate]\ncommand = "x"\njunit = "j.xml"\n', 3, "unknown setting(s) in [validate]: junit"),
    ('[validate]\ncommand = 3\n', 2, "command must be a non-empty string"),
    ('[validate]\ncommand = "  "\n', 2, "command must be a non-empty string"),
    ('[validate]\njunit_xml = "j.xml"\n', 1, "[validate] needs a command"),
    ('[validate]\ncommand = "x"\ntimeout_s = 0\n', 3, "timeout_s must be a positive number"),
    ('[validate]\ncommand = "x"\ntimeout_s = "60"\n', 3, "timeout_s must be a positive number"),
    ('[validate]\ncommand = "x"\ntimeout_s = true\n', 3, "timeout_s must be a positive number"),
    ('[validate]\ncommand = "x"\ntimeout_s = inf\n', 3, "timeout_s must be a positive number"),
    ('[validate]\ncommand = "x"\ncoverage_json = ["a"]\n', 3, "coverage_json must be a non-empty string"),
    ('validate = "pytest"\n', 1, "[validate] must be a table"),
])
def test_config_errors_are_located(tmp_path, body, line, words):
    path = write_config(tmp_path, body + "\n[git]\ncommit = true\n")
    with pytest.raises(ParseError) as e:
        load_config(path)
    assert words in e.value.message
    assert e.value.path == str(path) and e.value.line == line
    assert str(e.value).startswith(f"{path}:{line}: ")


def test_load_validate_config_directly(tmp_path):
    assert load_validate_config(None, tmp_path / "config.toml") is None
    with pytest.raises(ParseError) as e:
        load_validate_config({"comand": "x"}, tmp_path / "config.toml")
    assert e.value.path.endswith("config.toml") and e.value.line is None


def test_reading_config_imports_no_junitparser(tmp_path):
    """`specflux list` reads config.toml: neither a workspace with [validate] nor one without
    loads junitparser or subprocess for it."""
    with_validate = write_config(tmp_path, '[validate]\ncommand = "make test"\njunit_xml = "j.xml"\n')
    probe = ("import sys; from pathlib import Path; from specflux.store.config import load_config; "
             f"load_config(Path({str(with_validate)!r})); "
             "print(sorted(m for m in ('junitparser', 'subprocess', 'specflux.flow.steps.validate') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # [validate] is read with the rest of config.toml; the runner is not loaded
    probe = probe.replace(repr(str(with_validate)), repr(str(tmp_path / "none.toml")))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_projects_python_files_are_listed_once_a_process_and_a_coders_new_file_kept(tmp_path, monkeypatch):
    """`drop_stale` asks git for the project's Python files at a root's first validation only (a
    validation a step; `git ls-files --others` walks the tree), and keeps every edited file in that
    list: a file a coder made and the engine later puts back loses its stale bytecode too."""
    from specflux.flow.steps import bytecode
    from specflux.vcs import process

    root = tmp_path / "project"
    (root / "__pycache__").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "calc.py").write_text(CALC)
    asked = []
    real = process.run_git
    monkeypatch.setattr(process, "run_git", lambda args, *a, **k: asked.append(args[0]) or real(args, *a, **k))

    def stale(name: str) -> Path:  # bytecode written a second before its source last changed
        pyc = root / "__pycache__" / f"{name}.cpython-311.pyc"
        pyc.write_bytes(b"old")
        source = (root / f"{name}.py").stat().st_mtime_ns
        os.utime(pyc, ns=(source - 10**9,) * 2)
        return pyc

    pyc = stale("calc")
    bytecode.drop_stale(root)
    assert not pyc.exists() and asked == ["ls-files"]
    (root / "made.py").write_text("X = 1\n")  # a coder's new file: edited, not in git's first list
    bytecode.drop_stale(root, edited=[root / "made.py"])
    pyc, made = stale("calc"), stale("made")
    bytecode.drop_stale(root)  # neither edited now: both in the list kept
    assert not pyc.exists() and not made.exists()
    assert asked == ["ls-files"], "git was asked again"
