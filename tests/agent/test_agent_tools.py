"""The agent tools: each tool's work, and every way out of the repository refused."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import alive as _alive
from patience import patience

from specflux.agent.handoff import Handoff
from specflux.agent.tools import TOOL_SPECS, Toolbox
from specflux.base.errors import SpecfluxError


class Hooks:
    """Task hooks that remember their calls; criteria 1-3 exist."""

    def __init__(self, refuse_end: bool = False):
        self.checked: list[int] = []
        self.ended: list[Handoff] = []
        self.refuse_end = refuse_end

    def check_criterion(self, index: int) -> str:
        if not 1 <= index <= 3:
            raise SpecfluxError(f"no acceptance criterion {index}; the task has 3")
        self.checked.append(index)
        return f"criterion {index} checked"

    def end_session(self, handoff: Handoff) -> str:
        if self.refuse_end:
            raise SpecfluxError("the task file is locked")
        self.ended.append(handoff)
        return "session 1 recorded"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n\tneedle = git\n")
    (root / "a.txt").write_text("alpha\nbeta needle\n")
    (root / "src" / "m.py").write_text("def f():\n    return 'needle'\n")
    (tmp_path / "secret.txt").write_text("needle outside\n")
    (root / "outside").symlink_to(tmp_path / "secret.txt")
    return root


@pytest.fixture
def hooks() -> Hooks:
    return Hooks()


@pytest.fixture
def box(repo: Path, hooks: Hooks) -> Toolbox:
    return Toolbox(repo, hooks, command_timeout_s=10)


def ok(box: Toolbox, name: str, **input) -> str:
    result = box.call(name, input)
    assert not result.is_error, result.content
    return result.content


def refused(box: Toolbox, name: str, **input) -> str:
    result = box.call(name, input)
    assert result.is_error, result.content
    return result.content


def test_the_tool_specs_name_exactly_the_contract_tools():
    assert [spec["name"] for spec in TOOL_SPECS] == [
        "read_file", "list_files", "search", "write_file", "edit_file", "run_command", "check_criterion",
        "end_session"]
    required = {spec["name"]: spec["input_schema"]["required"] for spec in TOOL_SPECS}
    assert required["edit_file"] == ["path", "old", "new"]
    assert required["end_session"] == ["did", "issues", "next"]


def test_read_list_and_search(box: Toolbox):
    assert ok(box, "read_file", path="a.txt") == "alpha\nbeta needle\n"
    listed = ok(box, "list_files").splitlines()
    assert listed == ["a.txt", "outside", "src/m.py"]
    assert ok(box, "list_files", path="src") == "src/m.py"
    found = ok(box, "search", pattern=r"need+le").splitlines()
    assert found == ["a.txt:2: beta needle", "src/m.py:2:     return 'needle'"]  # not .git, not the symlink out
    assert ok(box, "search", pattern="alpha", path="src") == "(no matches)"
    assert "bad pattern" in refused(box, "search", pattern="(")


def test_write_and_edit(box: Toolbox, repo: Path):
    assert ok(box, "write_file", path="new/deep/b.txt", content="one\r\ntwo\n").startswith("created")
    assert (repo / "new/deep/b.txt").read_bytes() == b"one\r\ntwo\n"
    ok(box, "edit_file", path="a.txt", old="beta", new="gamma")
    assert (repo / "a.txt").read_text() == "alpha\ngamma needle\n"
    # an LF edit of a CRLF file keeps the file's line endings
    ok(box, "edit_file", path="new/deep/b.txt", old="one\ntwo", new="1\n2")
    assert (repo / "new/deep/b.txt").read_bytes() == b"1\r\n2\n"


def test_edit_needs_exactly_one_occurrence(box: Toolbox, repo: Path):
    (repo / "twice.txt").write_text("x = 1\nx = 1\n")
    assert "occurs 0 times" in refused(box, "edit_file", path="twice.txt", old="y = 2", new="z")
    assert "occurs 2 times" in refused(box, "edit_file", path="twice.txt", old="x = 1", new="z")
    assert (repo / "twice.txt").read_text() == "x = 1\nx = 1\n"
    assert "no such file" in refused(box, "edit_file", path="nope.txt", old="a", new="b")


@pytest.mark.parametrize("path", ["../secret.txt", "a.txt\0x", "", "src/../../secret.txt", "/etc/passwd", "outside",
                                  ".git/config", ".git", "src/../.git/config"])
def test_escapes_are_refused(box: Toolbox, tmp_path: Path, path: str):
    assert "needle outside" not in refused(box, "read_file", path=path)
    refused(box, "write_file", path=path, content="pwned")
    refused(box, "edit_file", path=path, old="needle", new="pwned")
    refused(box, "list_files", path=path)
    refused(box, "search", pattern="needle", path=path)
    assert (tmp_path / "secret.txt").read_text() == "needle outside\n"
    assert (tmp_path / "repo/.git/config").read_text() == "[core]\n\tneedle = git\n"


def test_a_symlink_into_git_and_a_dangling_link_out_are_refused(box: Toolbox, repo: Path, tmp_path: Path):
    (repo / "cfg").symlink_to(repo / ".git" / "config")
    (repo / "later").symlink_to(tmp_path / "not-yet.txt")
    assert ".git" in refused(box, "read_file", path="cfg")
    refused(box, "write_file", path="later", content="x")
    assert not (tmp_path / "not-yet.txt").exists()
    assert "needle = git" not in ok(box, "search", pattern="needle")


def test_unknown_tool_and_bad_input_are_error_results(box: Toolbox):
    assert "unknown tool" in refused(box, "rm_rf")
    assert "path" in refused(box, "read_file")
    assert "index" in refused(box, "check_criterion", index="2")
    assert "bad input" in refused(box, "write_file", path="a.txt", content="x", mode="w")


def test_run_command_reports_exit_code_and_streams(box: Toolbox):
    out = ok(box, "run_command", command="echo out; echo err >&2; pwd; exit 3")
    assert out.startswith("exit code: 3\n")
    assert f"--- stdout ---\nout\n{box.root}\n" in out
    assert "--- stderr ---\nerr\n" in out


def test_run_command_does_not_leak_the_api_key(box: Toolbox, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    assert "sk-ant-secret" not in ok(box, "run_command", command="echo key=$ANTHROPIC_API_KEY")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to see the child")
def test_run_command_timeout_kills_the_whole_group(box: Toolbox, repo: Path):
    started = time.monotonic()
    message = refused(box, "run_command", command="sleep 30 & echo $! > child.pid; wait", timeout_s=0.5)
    assert time.monotonic() - started < patience(5)
    assert "timed out after 0.5s" in message
    child = int((repo / "child.pid").read_text())
    deadline = time.monotonic() + patience(3)
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_run_command_timeout_is_capped_by_the_toolbox(repo: Path, hooks: Hooks):
    box = Toolbox(repo, hooks, command_timeout_s=0.3)
    started = time.monotonic()
    assert "timed out after 0.3s" in refused(box, "run_command", command="sleep 600", timeout_s=100)
    assert time.monotonic() - started < patience(4)


def test_output_is_truncated_with_a_note(repo: Path, hooks: Hooks):
    box = Toolbox(repo, hooks, output_limit=100)
    out = ok(box, "run_command", command="python3 -c \"print('x' * 1000 + 'END')\"")
    assert "[... 904 characters truncated ...]" in out and "xEND\n\n--- stderr ---" in out  # head and tail kept
    assert len(out) < 400
    (repo / "big.txt").write_text("y" * 1000)
    assert "truncated: showed 100 of 1000" in ok(box, "read_file", path="big.txt")


def test_check_criterion_goes_to_the_hooks(box: Toolbox, hooks: Hooks):
    assert ok(box, "check_criterion", index=2) == "criterion 2 checked"
    assert "no acceptance criterion 9" in refused(box, "check_criterion", index=9)
    assert hooks.checked == [2]


def test_end_session_validates_and_ends_once(box: Toolbox, hooks: Hooks):
    assert "did" in refused(box, "end_session", issues="", next="")
    assert "chain_output.summary" in refused(box, "end_session", did=["x"], issues="", next="",
                                             chain_output={"downstream": "d"})
    assert box.ended is None and hooks.ended == []
    handoff = {"did": ["wrote f"], "issues": "none", "next": "tests",
               "chain_output": {"summary": "f exists", "downstream": "call f()"}}
    assert ok(box, "end_session", **handoff) == "session 1 recorded"
    assert box.ended is hooks.ended[0]
    assert handoff_fields(box.ended) == Handoff.model_validate(handoff).model_dump()
    assert box.ended.chain_output.downstream == "call f()"
    assert "already ended" in refused(box, "end_session", did=["again"], issues="", next="")


def handoff_fields(handoff) -> dict:
    """A hand-off (the Handoff model, or what plain_inputs.py reads without it) as the model dumps it."""
    chain = handoff.chain_output
    return {"did": handoff.did, "issues": handoff.issues, "next": handoff.next,
            "chain_output": None if chain is None else {"summary": chain.summary, "downstream": chain.downstream}}


def test_a_refused_end_session_leaves_the_session_open(repo: Path):
    box = Toolbox(repo, Hooks(refuse_end=True))
    assert "locked" in refused(box, "end_session", did=["x"], issues="", next="")
    assert box.ended is None


def test_toolbox_root_is_the_real_path(tmp_path: Path, repo: Path, hooks: Hooks):
    (tmp_path / "link").symlink_to(repo)
    box = Toolbox(tmp_path / "link", hooks)
    assert box.root == Path(os.path.realpath(repo))
    assert ok(box, "read_file", path="a.txt").startswith("alpha")
