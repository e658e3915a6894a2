"""What a session checks before it starts and repairs after it stops, end to end through the CLI.

Set-up mistakes change nothing; a git operation in progress is refused before any write; an
agent's commit never takes the user's own uncommitted edits; a task file an agent deletes comes
back; an unsandboxed session says so at its start and in its progress-log entry.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from test_session import (  # noqa: F401 - fixtures
    TASK,
    cli,
    commit_count,
    committed_files,
    project,
    show,
    tree_files,
)

from specflux.agent.scripted import Reply, call

API_KEY = "sk-ant-test-GUARDS-1b2c"


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def unchanged(capsys, repo: Path, *args: str) -> str:
    """Run a session that must not start: no file, no commit, no status change; returns stderr."""
    files, commits = tree_files(repo), commit_count(repo)
    code, out, err = cli(capsys, repo, *args)
    assert code != 0, out + err
    assert "Traceback" not in err
    assert tree_files(repo) == files, "nothing was written"
    assert commit_count(repo) == commits, "nothing was committed"
    assert show(capsys, repo, "101")["status"] == "pending"
    return err


# --------------------------------------------------------------------- set-up mistakes


def test_no_api_key_is_an_error_before_the_session(project, capsys):
    err = unchanged(capsys, project, "run", "101")
    assert "no Anthropic API key" in err


def test_an_agent_cli_that_cannot_start_is_an_error_before_the_session(project, capsys):
    err = unchanged(capsys, project, "run", "101", "--agent", "command", "--cmd", "no-such-agent-cli -p")
    assert "no-such-agent-cli" in err and "not found" in err


def test_a_missing_recording_is_an_error_before_the_session(project, capsys, tmp_path):
    err = unchanged(capsys, project, "run", "101", "--agent", "replay", "--recording", str(tmp_path / "none.jsonl"))
    assert "none.jsonl" in err


# --------------------------------------------------------------------- git states


def _conflict(repo: Path) -> None:
    """Two branches that change README.md's one line differently."""
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "README.md").write_text("# other\n")
    git(repo, "commit", "-q", "-am", "other")
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("# main\n")
    git(repo, "commit", "-q", "-am", "main")


@pytest.mark.parametrize("operation", ["rebase", "merge"])
def test_no_session_or_task_commit_during_a_rebase_or_merge(project, capsys, operation, tmp_path):
    _conflict(project)
    done = subprocess.run(["git", operation, "other"], cwd=project, capture_output=True, text=True)
    assert done.returncode != 0, "the operation stops on its conflict"
    agent = script(tmp_path, "agent", "print('would work')\n")
    err = unchanged(capsys, project, "run", "101", "--agent", "command", "--cmd", agent)
    assert f"a {operation} is in progress" in err
    for args in (("session", "101", "--did", "x"), ("complete", "101", "--summary", "s")):
        err = unchanged(capsys, project, *args)
        assert f"a {operation} is in progress" in err and "nothing was changed" in err
    code, out, err = cli(capsys, project, "session", "101", "--did", "x", "--no-commit")
    assert code == 0, "without a commit, editing the task file is fine"


def test_a_detached_head_gets_a_warning(project, capsys):
    git(project, "checkout", "-q", "--detach")
    code, out, err = cli(capsys, project, "session", "101", "--did", "x")
    assert code == 0 and "detached" in err


# --------------------------------------------------------------------- the user's own work


DIRTY_AGENT = """\
import pathlib
p = pathlib.Path("src/app.py")
p.write_text(p.read_text().replace('print(greet())', 'print(greet(), "!")'))
pathlib.Path("src/new_by_agent.py").write_text("X = 1\\n")
"""


def test_a_command_agent_on_a_dirty_tree_commits_only_its_own_part(project, capsys, tmp_path):
    app = project / "src" / "app.py"
    app.write_text(app.read_text().replace('"helo"', '"hello (user)"'))  # the user's own edit, uncommitted
    (project / "staged.txt").write_text("staged by the user\n")
    git(project, "add", "staged.txt")
    index_before = git(project, "diff", "--cached", "--name-status")
    agent = script(tmp_path, "agent", DIRTY_AGENT)

    code, out, err = cli(capsys, project, "run", "101", "--agent", "command", "--cmd", agent)

    assert code == 0, err
    committed = git(project, "show", "HEAD:src/app.py")
    assert 'print(greet(), "!")' in committed, "the agent's part is committed"
    assert '"helo"' in committed and "(user)" not in committed, "the user's part is not"
    assert '"hello (user)"' in app.read_text() and 'print(greet(), "!")' in app.read_text(), "the file is as it was"
    assert "src/new_by_agent.py" in committed_files(project)
    assert "staged.txt" not in committed_files(project)
    assert git(project, "diff", "--cached", "--name-status") == index_before, "the user's index is as it was"
    assert '"hello (user)"' in git(project, "diff", "src/app.py"), "the user's edit is still theirs, uncommitted"


# --------------------------------------------------------------------- broken or deleted task files


def test_an_agent_that_deletes_its_task_file_gets_it_back(project, capsys, tmp_path):
    agent = script(tmp_path, "agent", f"import os\nos.remove({TASK!r})\n")
    code, out, err = cli(capsys, project, "run", "101", "--agent", "command", "--cmd", agent)
    assert code == 1 and "Traceback" not in err
    assert "deleted during the session, by the agent or by a person" in err and "put back as it was" in err
    state = show(capsys, project, "101")
    assert state["sessions"] and "without a hand-off" in state["sessions"][-1]["did"][0]
    assert TASK in committed_files(project), "the session entry is committed with the file put back"


def test_an_api_agent_command_that_breaks_another_task_file_is_undone(project, api, capsys):
    """With the sandbox off, a command can write .specflux/; what it breaks is put back."""
    (project / ".specflux" / "config.toml").write_text('[agent]\nsandbox = "off"\n')
    git(project, "commit", "-q", "-am", "sandbox off")
    other = project / ".specflux" / "task-states" / "task-102-state.md"
    before = other.read_bytes()
    api(
        Reply(calls=[call("run_command", command=f"printf 'garbage' > {other}")]),
        Reply(calls=[call("end_session", did=["tried"], issues="", next="")]),
    )
    code, out, err = cli(capsys, project, "run", "101")
    assert "task-102-state.md: the session broke this task file" in err
    assert other.read_bytes() == before
    assert ".specflux/task-states/task-102-state.md" not in committed_files(project)


# --------------------------------------------------------------------- the sandbox, announced


def test_an_unsandboxed_session_says_so_at_its_start_and_in_its_entry(project, api, capsys, monkeypatch):
    from specflux.agent import sandbox

    monkeypatch.setattr(sandbox, "_problem", lambda name: "not available on this test machine")
    api(Reply(calls=[call("end_session", did=["worked"], issues="", next="")]))
    code, out, err = cli(capsys, project, "run", "101")
    assert code == 0, err
    assert "run_command is not sandboxed" in err.splitlines()[0], "said at the start"
    assert "run_command is not sandboxed" in show(capsys, project, "101")["sessions"][-1]["issues"]


def test_sandbox_off_silences_the_warning(project, api, capsys, monkeypatch):
    from specflux.agent import sandbox

    monkeypatch.setattr(sandbox, "_problem", lambda name: "not available on this test machine")
    (project / ".specflux" / "config.toml").write_text('[agent]\nsandbox = "off"\n')
    git(project, "commit", "-q", "-am", "sandbox off")
    api(Reply(calls=[call("end_session", did=["worked"], issues="", next="")]))
    code, out, err = cli(capsys, project, "run", "101")
    assert code == 0 and "sandbox" not in err
    assert "sandbox" not in show(capsys, project, "101")["sessions"][-1]["issues"]


def test_a_sandboxed_session_cannot_write_outside_the_repo_or_into_task_files(project, api, capsys, tmp_path):
    from specflux.agent.sandbox import choose

    box = choose("auto")
    if not box.confined:
        pytest.skip(f"no sandbox on this machine: {box.reason}")
    outside = tmp_path / "outside.txt"
    other = project / ".specflux" / "task-states" / "task-102-state.md"
    before = other.read_bytes()
    server = api(
        Reply(calls=[call("run_command", command=f"echo x > {outside}; echo y >> {other}; echo ok > src/inside.txt")]),
        Reply(calls=[call("end_session", did=["tried"], issues="", next="")]),
    )
    code, out, err = cli(capsys, project, "run", "101")
    assert code == 0, err
    assert not outside.exists() and other.read_bytes() == before
    assert (project / "src" / "inside.txt").read_text() == "ok\n"
    result = server.requests[1]["messages"][-1]["content"][0]["content"]
    assert "exit code: 1" in str(result) or "ermission" in str(result) or "Read-only" in str(result)


# --------------------------------------------------------------------- Ctrl-C, again and again


SLOW_AGENT = """\
import pathlib, time
pathlib.Path("src/partial.py").write_text("half = True\\n")
print("working", flush=True)
time.sleep(60)
"""


def test_repeated_ctrl_c_leaves_a_logged_session_and_no_traceback(project, capsys, tmp_path):
    import os
    import signal
    import time

    agent = script(tmp_path, "agent", SLOW_AGENT)
    before = commit_count(project)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(project), "run", "101",
                             "--agent", "command", "--cmd", agent],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not (project / "src" / "partial.py").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (project / "src" / "partial.py").exists(), "the agent started"
    time.sleep(0.2)  # the agent has printed and sleeps; specflux waits on it
    for _ in range(6):  # a user hammering Ctrl-C
        proc.send_signal(signal.SIGINT)
        time.sleep(0.03)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    code, _, lint_err = cli(capsys, project, "lint")
    assert code == 0, lint_err
    state = show(capsys, project, "101")
    assert "interrupted" in state["sessions"][-1]["did"][0]
    assert commit_count(project) == before + 1
    assert "src/partial.py" in committed_files(project)
