"""Whole agent sessions, end to end: `specflux run` (or `run_session`) with the real anthropic SDK
speaking HTTP to a scripted Messages API on 127.0.0.1, real tools on real files, real git commits.

The backends are tested alone in test_anthropic_backend.py / test_command_backend.py; here the
whole path is exercised: context in, tools out, session entry, completion, chain wiring, commit.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import git
from patience import patience

from specflux.agent.anthropic_backend import replay_backend
from specflux.agent.scripted import Fail, Reply, call
from specflux.agent.session import run_session
from specflux.agent.tools import Toolbox
from specflux.cli.main import main
from specflux.store.manager import TaskStateManager
from specflux.store.workspace import Workspace

# A key that cannot occur by accident in a recording: if it shows up there, it leaked.
API_KEY = "sk-ant-test-SESSION-SECRET-5f3e9a"
TASK = ".specflux/task-states/task-101-state.md"
DEPENDENT = ".specflux/task-states/task-102-state.md"

APP = 'def greet():\n    return "helo"\n\n\nif __name__ == "__main__":\n    print(greet())\n'
SHOUT = 'def shout(text):\n    return text.upper() + "!"\n'
CRITERIA = ['greet() returns "hello"', "src/shout.py has shout()"]


def usage(i: int, o: int, cr: int = 0, cw: int = 0) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o, "cache_read_input_tokens": cr, "cache_creation_input_tokens": cw}


# ------------------------------------------------------------------------------------ helpers


def cli(capsys, repo: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--root", str(repo), *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def add_tasks(repo: Path) -> None:
    """A workspace with task 101 and task 102 that depends on it, committed."""
    ws, _ = Workspace.init(repo)
    manager = TaskStateManager(ws, git=False)
    manager.create("greeting module", task_id="101", epic_id="7", epic_title="Greetings", repository="app",
                   requirements="Fix the greeting in src/app.py and add src/shout.py.", criteria=CRITERIA)
    manager.create("loud greeting", task_id="102", dependencies=["101"],
                   requirements="Print the greeting loudly, using task #101's shout().",
                   criteria=["app prints HELLO!"])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tasks")


def build_project(root: Path) -> Path:
    """A fresh repository with source files and the two tasks: the same bytes every time."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "Test Author")
    git(root, "config", "user.email", "author@example.com")
    git(root, "config", "commit.gpgsign", "false")
    (root / "README.md").write_text("# project\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text(APP)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    add_tasks(root)
    return root


@pytest.fixture
def project(git_repo: Path) -> Path:
    (git_repo / "src").mkdir()
    (git_repo / "src" / "app.py").write_text(APP)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "app")
    add_tasks(git_repo)
    return git_repo


@pytest.fixture
def fixed_git_dates(monkeypatch):
    for key in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        monkeypatch.setenv(key, "2026-01-01T10:00:00+00:00")


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def commit_count(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))


def committed_files(repo: Path, rev: str = "HEAD") -> list[str]:
    return git(repo, "show", "--name-only", "--format=", rev).split()


def trailers(repo: Path, rev: str = "HEAD") -> dict[str, str]:
    text = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", rev)
    return dict(line.split(": ", 1) for line in text.splitlines() if line.strip())


def porcelain(repo: Path) -> set[str]:
    return {line for line in git(repo, "status", "--porcelain", "-uall").splitlines() if line}


def show(capsys, repo: Path, task_id: str) -> dict:
    code, out, err = cli(capsys, repo, "show", task_id, "--json")
    assert code == 0, err
    return json.loads(out)


def tool_results(body: dict) -> list[dict]:
    """The tool_result blocks of the last user message of a request."""
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [b for b in last["content"] if b.get("type") == "tool_result"]


def tree_files(root: Path) -> dict[str, bytes]:
    """Every file under `root` except git's own, recordings and lock files."""
    skip = (".git/", ".specflux/recordings/", ".specflux/locks/")
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not p.is_symlink() and not any(rel.startswith(s) for s in skip):
            out[rel] = p.read_bytes()
    return out


# ------------------------------------------------------- 1. end to end through the CLI, every tool

EVERY_TOOL = [
    Reply(text="Orienting first.", calls=[
        call("run_command", command="git status --short"),
        call("list_files", path="src"),
        call("read_file", path="src/app.py"),
        call("search", pattern="hel+o", path="src"),
    ], usage=usage(1000, 50, 0, 900)),
    Reply(text="Fixing the greeting and adding shout.", calls=[
        call("edit_file", path="src/app.py", old='return "helo"', new='return "hello"'),
        call("write_file", path="src/shout.py", content=SHOUT),
    ], usage=usage(1200, 300, 900)),
    Reply(text="Verifying.", calls=[
        call("run_command", command=f"{shlex.quote(sys.executable)} src/app.py"),
        call("check_criterion", index=1),
        call("check_criterion", index=2),
    ], usage=usage(1300, 40, 1000)),
    Reply(calls=[call("end_session", did=["Fixed greet() to return hello", "Added src/shout.py with shout()"],
                      issues="The old spelling was in one place only", next="Nothing: the task is done",
                      chain_output={"summary": "greet() in src/app.py returns 'hello'; shout(text) in src/shout.py.",
                                    "downstream": "from src.shout import shout\nshout(greet()) gives HELLO!"})],
          usage=usage(1400, 120, 1100, 5)),
]
TOTAL = usage(1000 + 1200 + 1300 + 1400, 50 + 300 + 40 + 120, 0 + 900 + 1000 + 1100, 900 + 5)


def test_a_session_through_the_cli_uses_every_tool_and_commits_exactly_its_work(project, api, capsys):
    repo = project
    assert show(capsys, repo, "101")["status"] == "pending"
    # Unrelated work of the user's, which the session's commit must leave alone.
    (repo / "README.md").write_text("# project\n\nuser's unfinished edit\n")
    (repo / "staged.txt").write_text("staged by the user\n")
    git(repo, "add", "staged.txt")
    user_changes = porcelain(repo)
    assert user_changes == {" M README.md", "A  staged.txt"}
    commits_before = commit_count(repo)
    server = api(*EVERY_TOOL)

    code, run_out, err = cli(capsys, repo, "run", "101", "--agent", "anthropic")

    assert code == 0, err
    assert "session 1 ended (end_session), status complete" in run_out
    assert len(server.requests) == 4
    assert all(API_KEY in (h.get("x-api-key", "") + h.get("authorization", "")) for h in server.headers)
    # The intermediate status: the context of the first request already says in_progress.
    first_context = server.requests[0]["messages"][0]["content"][0]["text"]
    assert '"status": "in_progress"' in first_context
    assert '"status": "pending"' not in first_context
    assert "greeting module" in first_context and CRITERIA[0] in first_context
    # Every tool call succeeded, and each answer came back to the model.
    results = [tool_results(body) for body in server.requests[1:]]
    assert [len(r) for r in results] == [4, 2, 3]
    assert not any(block["is_error"] for r in results for block in r)
    status, listed, read, searched = (b["content"] for b in results[0])
    assert status.startswith("exit code: 0") and "staged.txt" in status and "README.md" in status
    assert listed.split() == ["src/app.py"]
    assert read == APP
    assert searched == 'src/app.py:2:     return "helo"'
    assert results[2][0]["content"].startswith("exit code: 0\n--- stdout ---\nhello\n")

    # The agent's work is on disk.
    assert (repo / "src" / "app.py").read_text() == APP.replace('"helo"', '"hello"')
    assert (repo / "src" / "shout.py").read_text() == SHOUT

    # The task file: session entry with the hand-off and usage, criteria, status, chain output.
    text = (repo / TASK).read_text()
    assert re.search(r"^### Session 1 - \d{4}-\d\d-\d\d \d\d:\d\d$", text, re.M)
    assert "- Fixed greet() to return hello\n- Added src/shout.py with shout()\n" in text
    assert "**Issues:** The old spelling was in one place only" in text
    assert "**Next:** Nothing: the task is done" in text
    assert re.search(r"^\*\*Usage:\*\* 4900 input, 510 output, 3000 cache-read, 905 cache-write tokens; model claude-sonnet-5-5$", text, re.M)
    state = show(capsys, repo, "101")
    assert state["status"] == "complete"
    assert state["metadata"]["total_sessions"] == 1
    assert [c["checked"] for c in state["criteria"]] == [True, True]
    assert state["chain_output"]["summary"] == "greet() in src/app.py returns 'hello'; shout(text) in src/shout.py."
    assert "shout(greet()) gives HELLO!" in state["chain_output"]["downstream"]
    assert "(To be completed)" not in text
    assert state["sessions"][-1]["did"] == ["Fixed greet() to return hello", "Added src/shout.py with shout()"]
    assert state["sessions"][-1]["usage"] == {**TOTAL, "model": "claude-sonnet-5-5"}

    # The dependent task got the chain output.
    dependent = show(capsys, repo, "102")
    assert "### From Task #101: greeting module" in (repo / DEPENDENT).read_text()
    assert [c["task_id"] for c in dependent["chain_inputs"]] == ["101"]
    assert "shout(text) in src/shout.py" in dependent["chain_inputs"][0]["body"]

    # Exactly one commit, holding exactly the session's files; the user's changes keep their status.
    assert commit_count(repo) == commits_before + 1
    assert sorted(committed_files(repo)) == sorted([DEPENDENT, TASK, "src/app.py", "src/shout.py"])
    assert porcelain(repo) == user_changes
    assert git(repo, "show", ":staged.txt") == "staged by the user\n"  # still staged, as it was
    t = trailers(repo)
    assert (t["Specflux-Task"], t["Specflux-Session"], t["Specflux-Status"]) == ("101", "1", "complete")
    assert t["Specflux-Input-Tokens"] == "4900" and t["Specflux-Output-Tokens"] == "510"

    # `log --json` reads the usage back from the commit.
    code, out, err = cli(capsys, repo, "log", "101", "--json")
    assert code == 0, err
    entry = json.loads(out)[0]
    assert (entry["commit"], entry["session"], entry["status"]) == (head(repo), 1, "complete")
    assert entry["usage"]["input_tokens"] == 4900 and entry["usage"]["output_tokens"] == 510
    assert entry["usage"]["cache_read_tokens"] == 3000 and entry["usage"]["cache_write_tokens"] == 905
    assert isinstance(entry["usage"]["duration_ms"], int) and entry["usage"]["duration_ms"] > 0

    # The recording: one JSONL file, every exchange, never the key.
    recordings = list((repo / ".specflux" / "recordings").glob("*.jsonl"))
    assert len(recordings) == 1
    raw = recordings[0].read_text()
    assert API_KEY not in raw and "x-api-key" not in raw.lower() and "authorization" not in raw.lower()
    records = [json.loads(line) for line in raw.splitlines()]
    assert records[0]["kind"] == "meta" and records[0]["task_id"] == "101"
    assert [r["body"] for r in records if r["kind"] == "request"] == server.requests
    assert f"recording: {recordings[0]}" in run_out


# ---------------------------------------------------------------------- 2. escape attempts


def test_escape_attempts_come_back_as_errors_and_change_nothing_outside(project, api, capsys, tmp_path):
    repo = project
    (tmp_path / "x").write_text("OUTSIDE-SECRET\n")
    (tmp_path / "outside.txt").write_text("outside, untouched\n")
    (tmp_path / "outside_dir").mkdir()
    (repo / "link.txt").symlink_to(tmp_path / "outside.txt")
    (repo / "linkdir").symlink_to(tmp_path / "outside_dir", target_is_directory=True)
    (repo / "tasklink.md").symlink_to(repo / TASK)
    git(repo, "add", "link.txt", "linkdir", "tasklink.md")
    git(repo, "commit", "-q", "-m", "links")

    def outside() -> dict[str, bytes]:
        return {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in sorted(tmp_path.rglob("*"))
                if p.is_file() and repo not in p.parents and p != repo}

    outside_before = outside()
    task_before = (repo / TASK).read_text()
    config_before = (repo / ".specflux" / "config.toml").read_bytes()
    attempts = [
        call("read_file", path="../x"),
        call("read_file", path="/etc/passwd"),
        call("read_file", path="src/../../x"),
        call("write_file", path="link.txt", content="pwned\n"),
        call("write_file", path="linkdir/planted.txt", content="pwned\n"),
        call("write_file", path="../planted.txt", content="pwned\n"),
        call("write_file", path=TASK, content="garbage\n"),
        call("write_file", path=".specflux/task-states/task-999-state.md", content="# Task #999: fake\n"),
        call("write_file", path=".specflux/config.toml", content="[agent]\nmax_turns = 1000\n"),
        call("write_file", path="tasklink.md", content="garbage via a link\n"),
        call("edit_file", path=TASK, old="# Task #101", new="# Task #666"),
        call("write_file", path=".git/hooks/post-commit", content="#!/bin/sh\necho pwned\n"),
    ]
    server = api(
        Reply(calls=attempts),
        Reply(calls=[call("run_command", command="sleep 600", timeout_s=1)]),
        Reply(calls=[call("end_session", did=["Tried to leave the repository"], issues="refused", next="behave")]),
    )

    started = time.monotonic()
    code, out, err = cli(capsys, repo, "run", "101")
    elapsed = time.monotonic() - started

    assert code == 0, err
    assert elapsed < patience(10)  # the command sleeping 600 s was killed after its 1 s
    results = tool_results(server.requests[1])
    assert len(results) == len(attempts)
    for attempt, result in zip(attempts, results, strict=True):
        assert result["is_error"] is True, (attempt, result)
        assert "OUTSIDE-SECRET" not in result["content"] and "root:" not in result["content"]
    assert "outside the repository" in results[0]["content"]
    assert "read-only" in results[6]["content"]
    timeout = tool_results(server.requests[2])
    assert len(timeout) == 1 and timeout[0]["is_error"] is True
    assert timeout[0]["content"].startswith("timed out after 1s")

    assert outside() == outside_before
    assert not (tmp_path / "planted.txt").exists() and not (tmp_path / "outside_dir" / "planted.txt").exists()
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert not (repo / ".specflux" / "task-states" / "task-999-state.md").exists()
    assert (repo / ".specflux" / "config.toml").read_bytes() == config_before
    text = (repo / TASK).read_text()
    assert text.startswith("# Task #101: greeting module\n")
    assert "garbage" not in text
    # The only change to the task file is the session's own entry (and the status).
    assert text.count("### Session 1 - ") == 1 and "- Tried to leave the repository" in text
    expected_head = (task_before.replace('"status": "pending"', '"status": "in_progress"')
                     .replace('"total_sessions": 0', '"total_sessions": 1'))
    assert expected_head.split("## 3. Progress Log")[0] == text.split("## 3. Progress Log")[0]
    assert committed_files(repo) == [TASK]


# ------------------------------------------------------- 3. sessions that end without a hand-off


def test_a_session_that_hits_the_turn_limit_is_logged_and_committed(project, api, capsys):
    repo = project
    server = api(
        Reply(calls=[call("write_file", path="src/half.py", content="HALF = True\n")], usage=usage(500, 50)),
        Reply(calls=[call("read_file", path="src/half.py")], usage=usage(600, 10)),
        Reply(calls=[call("end_session", did=["never reached"], issues="", next="")]),
    )
    before = commit_count(repo)

    code, out, err = cli(capsys, repo, "run", "101", "--max-turns", "2")

    assert code == 1
    assert "ended (max_turns)" in out
    assert len(server.requests) == 2  # the third turn was never asked for
    state = show(capsys, repo, "101")
    session = state["sessions"][-1]
    assert session["number"] == 1
    assert "without a hand-off" in session["did"][0] and "turn limit" in session["did"][0]
    assert session["next"]  # says how to pick up from here
    assert session["usage"]["input_tokens"] == 1100 and session["usage"]["output_tokens"] == 60
    assert state["status"] == "in_progress"
    assert "never reached" not in (repo / TASK).read_text()
    assert commit_count(repo) == before + 1
    assert sorted(committed_files(repo)) == [TASK, "src/half.py"]
    t = trailers(repo)
    assert (t["Specflux-Session"], t["Specflux-Status"], t["Specflux-Stop"]) == ("1", "in_progress", "max_turns")
    assert porcelain(repo) == set()


def test_a_rate_limited_session_retries_and_completes_with_summed_usage(project, api, capsys):
    repo = project
    server = api(
        Fail(429, retry_after=0),
        Reply(calls=[call("write_file", path="src/shout.py", content=SHOUT)], usage=usage(700, 70, 10, 1)),
        Fail(529, retry_after=0),
        Reply(calls=[call("end_session", did=["Added src/shout.py"], issues="rate limited twice", next="criteria")],
              usage=usage(800, 80, 20, 2)),
    )

    code, out, err = cli(capsys, repo, "run", "101")

    assert code == 0, err
    assert len(server.requests) == 4
    assert server.requests[0] == server.requests[1]  # the retry sent the same turn again
    assert server.requests[2] == server.requests[3]
    session = show(capsys, repo, "101")["sessions"][-1]
    assert session["did"] == ["Added src/shout.py"]
    assert session["usage"] == {**usage(1500, 150, 30, 3), "model": "claude-sonnet-5-5"}
    assert "Specflux-Stop" in trailers(repo) and trailers(repo)["Specflux-Stop"] == "end_session"
    assert trailers(repo)["Specflux-Input-Tokens"] == "1500"
    assert sorted(committed_files(repo)) == [TASK, "src/shout.py"]


def test_ctrl_c_during_a_command_is_logged_and_nothing_is_lost(project, api, capsys):
    """A real SIGINT to this process while the agent's command runs, as Ctrl-C in a terminal."""
    repo = project
    mark = f"specflux-ctrl-c-{os.getpid()}-{time.monotonic_ns()}"
    server = api(
        Reply(calls=[call("write_file", path="src/shout.py", content=SHOUT), call("check_criterion", index=2)],
              usage=usage(300, 30)),
        Reply(calls=[call("run_command", command=f"sh -c 'sleep 600' {mark}")], usage=usage(400, 40)),
        Reply(calls=[call("end_session", did=["never reached"], issues="", next="")]),
    )
    before = commit_count(repo)

    def ctrl_c_once_the_command_runs():  # the command cannot signal specflux: a sandbox has its own PIDs
        while subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode != 0:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c_once_the_command_runs, daemon=True).start()
    started = time.monotonic()
    code, out, err = cli(capsys, repo, "run", "101")

    assert time.monotonic() - started < patience(10)  # the sleeping command was killed, not waited for
    assert code == 130
    assert "ended (interrupted)" in out
    assert len(server.requests) == 2
    state = show(capsys, repo, "101")
    session = state["sessions"][-1]
    assert "without a hand-off" in session["did"][0] and "interrupted" in session["did"][0]
    assert session["usage"]["input_tokens"] == 700
    assert [c["checked"] for c in state["criteria"]] == [False, True]
    assert commit_count(repo) == before + 1
    assert sorted(committed_files(repo)) == [TASK, "src/shout.py"]
    assert trailers(repo)["Specflux-Stop"] == "interrupted"
    assert porcelain(repo) == set()
    assert len(list((repo / ".specflux" / "recordings").glob("*.jsonl"))) == 1


def test_an_interrupt_inside_a_tool_is_logged_and_committed(project, api, capsys, monkeypatch):
    repo = project
    real_call = Toolbox.call

    def call_or_interrupt(self, name, input):
        if name == "search":
            raise KeyboardInterrupt
        return real_call(self, name, input)

    monkeypatch.setattr(Toolbox, "call", call_or_interrupt)
    server = api(
        Reply(calls=[call("edit_file", path="src/app.py", old='"helo"', new='"hello"'),
                     call("check_criterion", index=1), call("search", pattern="hello")]),
        Reply(calls=[call("end_session", did=["never reached"], issues="", next="")]),
    )

    code, out, err = cli(capsys, repo, "run", "101")

    assert code == 130
    assert len(server.requests) == 1
    state = show(capsys, repo, "101")
    assert "interrupted" in state["sessions"][-1]["did"][0]
    assert [c["checked"] for c in state["criteria"]] == [True, False]
    assert sorted(committed_files(repo)) == [TASK, "src/app.py"]
    assert 'return "hello"' in git(repo, "show", "HEAD:src/app.py")


# ------------------------------------------------------------------------------- 4. replay

REPLAYED = [
    Reply(text="Looking.", calls=[call("list_files", path="src"), call("read_file", path="src/app.py"),
                                  call("search", pattern="greet", path="src")]),
    Reply(calls=[call("edit_file", path="src/app.py", old='"helo"', new='"hello"'),
                 call("write_file", path="src/shout.py", content=SHOUT),
                 # output that differs on every run: replay compares a command's first line only
                 call("run_command", command=f"{shlex.quote(sys.executable)} src/app.py; date +%s%N; echo $$")],
          usage=usage(900, 90, 800)),
    Reply(calls=[call("check_criterion", index=1), call("check_criterion", index=2)]),
    Reply(calls=[call("end_session", did=["Fixed the greeting", "Added shout()"], issues="None", next="Done",
                      chain_output={"summary": "greet() says hello; shout() shouts.", "downstream": "import shout"})]),
]


def test_a_recorded_session_replays_to_identical_files_and_a_divergent_one_fails(tmp_path, api, capsys,
                                                                                 fixed_git_dates):
    a = build_project(tmp_path / "a")
    server = api(*REPLAYED)
    code, out, err = cli(capsys, a, "run", "101")
    assert code == 0, err
    assert len(server.requests) == 4
    recordings = list((a / ".specflux" / "recordings").glob("task-101-*.jsonl"))
    assert len(recordings) == 1
    recording = recordings[0]
    stamp = show(capsys, a, "101")["sessions"][-1]["timestamp"]

    b = build_project(tmp_path / "b")
    assert (b / TASK).read_text() == git(a, "show", f"HEAD~1:{TASK}")  # b starts where a started
    report = run_session(TaskStateManager(Workspace(b.resolve())), "101", replay_backend(recording),
                         clock=lambda: stamp)

    assert (report.stop, report.error, report.status) == ("end_session", None, "complete")
    assert report.outcome.turns == 4
    files_a, files_b = tree_files(a), tree_files(b)
    assert sorted(files_a) == sorted(files_b)
    for name in files_a:
        assert files_a[name] == files_b[name], name
    assert (b / "src" / "shout.py").read_text() == SHOUT
    assert committed_files(a) == committed_files(b)
    assert (a / TASK).read_bytes() == (b / TASK).read_bytes()
    assert git(a, "rev-parse", "HEAD^{tree}") == git(b, "rev-parse", "HEAD^{tree}")
    assert git(a, "log", "-1", "--format=%s") == git(b, "log", "-1", "--format=%s")

    # The same recording against a task whose requirements changed: a clear failure at turn 1.
    c = build_project(tmp_path / "c")
    task = c / TASK
    task.write_text(task.read_text().replace("Fix the greeting in src/app.py", "Fix the greeting in src/main.py"))
    git(c, "commit", "-q", "-am", "requirements changed")

    code, out, err = cli(capsys, c, "run", "101", "--agent", "replay", "--recording", recording)

    assert code == 1
    assert "diverged at turn 1" in err
    assert "Traceback" not in err
    assert not (c / "src" / "shout.py").exists()  # no tool ran
    assert 'return "helo"' in (c / "src" / "app.py").read_text()


def test_a_session_that_lists_the_whole_repository_replays_in_a_fresh_checkout(tmp_path, api, capsys,
                                                                               fixed_git_dates):
    """Regression: list_files showed .specflux/recordings/, the session's own timestamped recording."""
    a = build_project(tmp_path / "a")
    server = api(Reply(calls=[call("list_files"), call("search", pattern="greeting module")]),
                 Reply(calls=[call("end_session", did=["Looked around"], issues="None", next="Work")]))
    code, out, err = cli(capsys, a, "run", "101")
    assert code == 0, err
    listed, found = (b["content"] for b in tool_results(server.requests[1]))
    assert "src/app.py" in listed.splitlines()
    assert ".specflux/recordings/" not in listed and ".specflux/locks/" not in listed  # the session's own transcript
    assert found.splitlines() == [f"{TASK}:1: # Task #101: greeting module"]
    (recording,) = (a / ".specflux" / "recordings").glob("*.jsonl")

    b = build_project(tmp_path / "b")
    report = run_session(TaskStateManager(Workspace(b.resolve())), "101", replay_backend(recording),
                         clock=lambda: "2026-01-01 10:00")
    assert (report.stop, report.error) == ("end_session", None)


def test_replay_of_a_missing_recording_is_a_usage_error(project, capsys):
    code, out, err = cli(capsys, project, "run", "101", "--agent", "replay", "--recording", project / "nope.jsonl")
    assert code == 2
    assert "no recording at" in err and "nope.jsonl" in err


# ------------------------------------------------------------------ 5. --agent command

FAKE_AGENT = r'''
import json, os, pathlib, sys

mode, seen = sys.argv[1], sys.argv[2]
prompt = sys.stdin.read()
pathlib.Path(seen).write_text(json.dumps({
    "task_file": os.environ.get("SPECFLUX_TASK_FILE"), "task_id": os.environ.get("SPECFLUX_TASK_ID"),
    "root": os.environ.get("SPECFLUX_ROOT"), "cwd": os.getcwd(), "prompt": prompt}))
pathlib.Path("src/agent_made.py").write_text("MADE = True\n")
task = pathlib.Path(os.environ["SPECFLUX_TASK_FILE"])
text = task.read_text()
if mode == "protocol":
    text = text.replace('- [ ] greet() returns "hello"', '- [x] greet() returns "hello"', 1)
    text = text.replace("(No sessions yet)", "### Session 1 - 2026-01-01 10:00\n**Did:**\n- Wrote src/agent_made.py\n\n"
                        "**Issues:** None\n\n**Next:** Add shout()")
elif mode == "complete":
    text = text.replace("- [ ] ", "- [x] ")
    text = text.replace("(No sessions yet)", "### Session 1 - 2026-01-01 10:00\n**Did:**\n- Did everything\n\n"
                        "**Issues:** None\n\n**Next:** Nothing")
    text = text.replace("(To be completed)", "### Summary\nAGENT-SUMMARY: shout() exists.\n\n"
                        "### For Downstream Tasks\nfrom src.shout import shout")
elif mode == "break":
    text = text.replace('"status": "in_progress",', '"status": "in_progress"', 1)  # a missing comma
task.write_text(text)
print("fake agent done")
if len(sys.argv) > 3:  # the usage line Claude Code's `--output-format json` ends with
    print(json.dumps({"type": "result", "subtype": "success", "num_turns": 4, "total_cost_usd": 0.0123,
                      "usage": {"input_tokens": 1200, "output_tokens": 340, "cache_read_input_tokens": 900,
                                "cache_creation_input_tokens": 50},
                      "modelUsage": {"claude-sonnet-4-5": {"costUSD": 0.0123}}}))
'''


@pytest.fixture
def agent(tmp_path: Path):
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)
    seen = tmp_path / "seen.json"

    def command(mode: str, *more: str) -> str:
        return " ".join(shlex.quote(s) for s in (sys.executable, str(script), mode, str(seen), *more))

    command.seen = seen
    return command


def test_a_command_agent_following_the_protocol(project, agent, capsys):
    repo = project
    before = commit_count(repo)

    code, out, err = cli(capsys, repo, "run", "101", "--agent", "command", "--cmd", agent("protocol"))

    assert code == 0, err
    seen = json.loads(agent.seen.read_text())
    assert seen["task_id"] == "101"
    assert Path(seen["task_file"]).resolve() == (repo / TASK).resolve()
    assert Path(seen["cwd"]).resolve() == repo.resolve()
    assert "## Session Protocol" in seen["prompt"] and "greeting module" in seen["prompt"]
    assert commit_count(repo) == before + 1
    assert sorted(committed_files(repo)) == [TASK, "src/agent_made.py"]
    state = show(capsys, repo, "101")
    assert [c["checked"] for c in state["criteria"]] == [True, False]
    assert [s["did"] for s in state["sessions"]] == [["Wrote src/agent_made.py"]]
    assert state["metadata"]["total_sessions"] == 1  # specflux fixed the count the agent left
    assert state["status"] == "in_progress"
    assert trailers(repo)["Specflux-Session"] == "1"
    assert porcelain(repo) == set()


def test_a_command_agents_own_entry_gets_its_usage_and_cost_and_unknown_is_never_zero(project, agent, capsys):
    repo = project
    code, out, err = cli(capsys, repo, "run", "101", "--agent", "command", "--cmd", agent("protocol", "usage"))
    assert code == 0, err
    assert "cost $0.0123 (claude-sonnet-4-5)" in out
    session = show(capsys, repo, "101")["sessions"][-1]
    assert session["did"] == ["Wrote src/agent_made.py"], "the agent's own entry, with specflux's Usage line"
    assert session["usage"] == {"input_tokens": 1200, "output_tokens": 340, "cache_read_input_tokens": 900,
                                "cache_creation_input_tokens": 50, "model": "claude-sonnet-4-5", "cost_usd": 0.0123}
    t = trailers(repo)
    assert (t["Specflux-Input-Tokens"], t["Specflux-Model"], t["Specflux-Cost-Usd"]) == ("1200", "claude-sonnet-4-5",
                                                                                        "0.012300")
    # An agent CLI that prints no usage: unknown in the entry, the trailers and the report, never 0.
    code, out, err = cli(capsys, repo, "run", "101", "--agent", "command", "--cmd", agent("plain"))
    assert code == 0, err
    assert "tokens: unknown" in out
    assert show(capsys, repo, "101")["sessions"][-1]["usage"] == {"unknown": True}
    t = trailers(repo)
    assert t["Specflux-Usage"] == "unknown" and "Specflux-Input-Tokens" not in t


def test_a_command_agent_that_breaks_the_task_file_never_commits_it(project, agent, capsys):
    repo = project
    before = (repo / TASK).read_text()

    code, out, err = cli(capsys, repo, "run", "101", "--agent", "command", "--cmd", agent("break"))

    assert code == 1
    located = re.findall(r"(\S*task-101-state\.md):(\d+): ", err)
    assert located, err
    assert located[0][0].endswith(TASK)
    assert "put it back as it was before the session" in err
    after = (repo / TASK).read_text()
    assert after.split("## 1. Context")[1].split("## 3. Progress Log")[0] == \
        before.split("## 1. Context")[1].split("## 3. Progress Log")[0]
    assert cli(capsys, repo, "lint")[0] == 0, "the broken edit is gone: the file is as before, plus the session entry"
    state = show(capsys, repo, "101")
    assert "without a hand-off" in state["sessions"][-1]["did"][0]
    assert "broken" in state["sessions"][-1]["issues"]
    committed = git(repo, "show", "HEAD:" + TASK)
    assert committed == after, "what is committed is the repaired file, never the broken one"
    assert "src/agent_made.py" in committed_files(repo)  # the agent's own work is in the session commit


def test_a_command_agent_that_writes_no_session_entry_gets_one(project, agent, capsys):
    repo = project

    code, out, err = cli(capsys, repo, "run", "101", "--agent", "command", "--cmd", agent("silent"))

    assert code == 0, err
    state = show(capsys, repo, "101")
    assert len(state["sessions"]) == 1
    assert "without a hand-off" in state["sessions"][0]["did"][0]
    assert state["metadata"]["total_sessions"] == 1
    assert sorted(committed_files(repo)) == [TASK, "src/agent_made.py"]
    assert trailers(repo)["Specflux-Session"] == "1"


def test_a_command_agent_that_completes_the_task_gets_it_wired(project, agent, capsys):
    repo = project

    code, out, err = cli(capsys, repo, "run", "101", "--agent", "command", "--cmd", agent("complete"))

    assert code == 0, err
    state = show(capsys, repo, "101")
    assert state["status"] == "complete"
    assert state["chain_output"]["summary"] == "AGENT-SUMMARY: shout() exists."
    dependent = show(capsys, repo, "102")
    assert [c["task_id"] for c in dependent["chain_inputs"]] == ["101"]
    assert "AGENT-SUMMARY: shout() exists." in dependent["chain_inputs"][0]["body"]
    assert sorted(committed_files(repo)) == [TASK, DEPENDENT, "src/agent_made.py"]
    t = trailers(repo)
    assert (t["Specflux-Session"], t["Specflux-Status"]) == ("1", "complete")
    assert "wired into task 102" in out


# ------------------------------------------------------------------ other ways a session ends


def test_a_session_over_its_token_budget_stops_and_says_so(project, api, capsys):
    repo = project
    server = api(Reply(calls=[call("write_file", path="notes.txt", content="n\n")], usage=usage(5000, 500)),
                 Reply(calls=[call("end_session", did=["never reached"], issues="", next="")]))

    code, out, err = cli(capsys, repo, "run", "101", "--token-budget", "1000")

    assert code == 1
    assert len(server.requests) == 1
    session = show(capsys, repo, "101")["sessions"][-1]
    assert "without a hand-off" in session["did"][0] and "token budget" in session["did"][0]
    assert "used 5,500 tokens, past its budget of 1,000" in session["issues"]
    assert sorted(committed_files(repo)) == [TASK, "notes.txt"]
    assert trailers(repo)["Specflux-Stop"] == "token_budget"


def test_an_api_error_mid_session_is_logged_with_the_message(project, api, capsys):
    repo = project
    api(Reply(calls=[call("write_file", path="notes.txt", content="n\n")]),
        Fail(400, message="prompt is too long: 250000 tokens > 200000 maximum"))

    code, out, err = cli(capsys, repo, "run", "101")

    assert code == 1
    assert "prompt is too long" in err and "Traceback" not in err
    session = show(capsys, repo, "101")["sessions"][-1]
    assert "stopped on an error" in session["did"][0]
    assert "400" in session["did"][0] + session["issues"] and "prompt is too long" in session["issues"]
    assert sorted(committed_files(repo)) == [TASK, "notes.txt"]
    assert trailers(repo)["Specflux-Stop"] == "error"


def test_no_commit_writes_the_session_but_does_not_commit(project, api, capsys):
    repo = project
    before = head(repo)
    api(Reply(calls=[call("write_file", path="notes.txt", content="n\n"),
                     call("end_session", did=["Wrote notes"], issues="None", next="More")]))

    code, out, err = cli(capsys, repo, "run", "101", "--no-commit")

    assert code == 0, err
    assert head(repo) == before
    assert show(capsys, repo, "101")["sessions"][-1]["did"] == ["Wrote notes"]
    assert porcelain(repo) == {" M " + TASK, "?? notes.txt"}


def test_end_session_with_a_chain_output_is_refused_until_every_criterion_is_checked(project, api, capsys):
    repo = project
    server = api(
        Reply(calls=[call("check_criterion", index=1), call("check_criterion", index=9),
                     call("end_session", did=["Too early"], issues="", next="",
                          chain_output={"summary": "not yet", "downstream": ""})]),
        Reply(calls=[call("check_criterion", index=2),
                     call("end_session", did=["Checked both"], issues="None", next="Done",
                          chain_output={"summary": "Both criteria met.", "downstream": "nothing special"})]),
    )

    code, out, err = cli(capsys, repo, "run", "101")

    assert code == 0, err
    first = tool_results(server.requests[1])
    assert [b["is_error"] for b in first] == [False, True, True]
    assert "2" in first[2]["content"] and "not checked" in first[2]["content"]
    state = show(capsys, repo, "101")
    assert [s["did"] for s in state["sessions"]] == [["Checked both"]]  # the refused hand-off left no trace
    assert state["status"] == "complete" and state["chain_output"]["summary"] == "Both criteria met."
    assert "not yet" not in (repo / TASK).read_text()


def test_files_the_agent_deletes_or_creates_with_commands_are_committed(project, api, capsys):
    repo = project
    api(Reply(calls=[call("run_command", command="rm src/app.py && mkdir -p lib && printf 'x\\n' > lib/new.txt"),
                     call("end_session", did=["Moved things around"], issues="None", next="More")]))

    code, out, err = cli(capsys, repo, "run", "101")

    assert code == 0, err
    assert sorted(committed_files(repo)) == [TASK, "lib/new.txt", "src/app.py"]
    assert git(repo, "ls-tree", "-r", "--name-only", "HEAD", "src") == ""  # the deletion was committed
    assert porcelain(repo) == set()


def test_a_command_agent_that_hangs_is_stopped_logged_and_committed(project, tmp_path, capsys):
    repo = project
    script = tmp_path / "hang.sh"  # a shell, not Python: it starts in milliseconds, on a loaded machine too
    script.write_text("printf 'half\\n' > partial.txt\necho working\nexec sleep 600\n")
    cmd = f"sh {shlex.quote(str(script))}"

    started = time.monotonic()
    code, out, err = cli(capsys, repo, "run", "101", "--agent", "command", "--cmd", cmd,
                          "--timeout", str(patience(1)))  # time enough to write partial.txt

    assert time.monotonic() - started < patience(1) + patience(10)
    assert code == 1
    assert "timed out" in err
    session = show(capsys, repo, "101")["sessions"][-1]
    assert "without a hand-off" in session["did"][0] and "timed out" in session["issues"]
    assert sorted(committed_files(repo)) == [TASK, "partial.txt"]


def test_two_sessions_in_the_same_second_keep_both_recordings(project, api, capsys, monkeypatch):
    real_strftime = time.strftime
    monkeypatch.setattr(time, "strftime", lambda fmt, *rest: "20260101-100000" if fmt == "%Y%m%d-%H%M%S"
                        else real_strftime(fmt, *rest))
    end = [call("end_session", did=["A session"], issues="None", next="Another")]
    for _ in range(2):
        api(Reply(calls=end))
        code, out, err = cli(capsys, project, "run", "101")
        assert code == 0, err
    assert show(capsys, project, "101")["metadata"]["total_sessions"] == 2
    assert len(list((project / ".specflux" / "recordings").glob("*.jsonl"))) == 2


def test_a_heading_in_the_hand_off_cannot_break_the_task_file(project, api, capsys):
    repo = project
    for n in (1, 2):
        api(Reply(calls=[call("end_session", did=[f"Session {n} work"], issues="Two problems:\n## Notes\n- flaky test",
                              next=f"next step {n}")]))
        code, out, err = cli(capsys, repo, "run", "101")
        assert code == 0, err
    state = show(capsys, repo, "101")
    assert [(s["number"], s["next"]) for s in state["sessions"]] == [(1, "next step 1"), (2, "next step 2")]
    assert all("flaky test" in s["issues"] and s["usage"] is not None for s in state["sessions"])
    text = (repo / TASK).read_text()
    assert text.index("next step 1") < text.index("### Session 2 - ")
