"""People beside a run (issue 16, point 5): while an agent session is in flight, a person logs a
session by hand (`specflux session` in another process), edits the task's Requirements and
another source file. The person's session is its own entry and its own commit; the agent's entry
still lands as the agent's, numbered after it, in the agent's own commit; the hand edits are kept;
the reviewer is told the requirements as edited.

Real git repositories, real processes: `specflux flow start` / `specflux run` with an agent CLI
that waits until the person is done (and, in-process, the real anthropic SDK against the scripted
Messages API).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git
from patience import patience
from helpers import fake_agent_plan, run
from helpers import specflux_process as specflux

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"
TASK = ".specflux/task-states/task-1-state.md"
WRONG = "def add(a, b):\n    return a - b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
REQUIREMENTS = "Make add() return the sum."
EDITED = "Make add() return the sum; the designer wants it to accept floats too."
OTHER = "def sub(a, b):\n    return a - b\n"
OTHER_EDITED = "def sub(a, b):\n    # edited by hand while the agent ran\n    return a - b\n"
HAND_DID = "Talked to the designer"
AGENT_DID = "Fixed add() to return a + b"
AGENT_ISSUES = "The agent found no issues"

# A coder agent CLI that saves its context, waits until the test says "go" (the person works
# meanwhile), then fixes add(), ticks the criteria, writes the chain output and its own session
# entry: in the file, numbered as its context said when it started (SPECFLUX_AGENT_ENTRY=file), through
# `specflux session --no-commit` (cli), or not at all (none). Any other role is the usual fake.
CODER = r'''
import os, pathlib, re, runpy, subprocess, sys, time

if os.environ.get("SPECFLUX_ROLE", "coder") != "coder":
    sys.argv = [os.environ["SPECFLUX_FAKE_REVIEWER"]]
    runpy.run_path(os.environ["SPECFLUX_FAKE_REVIEWER"], run_name="__main__")
    sys.exit(0)
state = pathlib.Path(os.environ["SPECFLUX_FAKE_STATE"])
state.mkdir(parents=True, exist_ok=True)
context = sys.stdin.read()
n = len(list(state.glob("coder-1-*.txt"))) + 1
(state / f"coder-1-{n}.txt").write_text(context)
deadline = time.time() + 60
while not (state / "go").exists() and time.time() < deadline:
    time.sleep(0.05)
pathlib.Path("src/calc.py").write_text("def add(a, b):\n    return a + b\n")
task_file = pathlib.Path(os.environ["SPECFLUX_TASK_FILE"])
text = task_file.read_text()  # as it is now: the person's edits in it
text = text.replace("- [ ]", "- [x]").replace(
    "(To be completed)", "### Summary\nadd() returns a + b\n\n### For Downstream Tasks\nUse add().")
mode = os.environ.get("SPECFLUX_AGENT_ENTRY", "file")
if mode == "file":
    number = re.search(r"this is session (\d+)", context).group(1)
    block = (f"### Session {number} - 2024-01-02 10:00\n**Did:**\n- Fixed add() to return a + b\n\n"
             "**Issues:** The agent found no issues\n\n**Next:** Review the fix\n\n")
    head, sep, tail = text.partition("## 4. Chain Output")
    text = head.replace("(No sessions yet)\n\n", "") + block + sep + tail
task_file.write_text(text)
if mode == "cli":
    subprocess.run([sys.executable, "-m", "specflux.cli", "session", os.environ["SPECFLUX_TASK_ID"],
                    "--did", "Fixed add() to return a + b", "--issues", "The agent found no issues",
                    "--next", "Review the fix", "--no-commit"], check=True)
'''


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """A repo whose add() subtracts, another source file, task 1 (fix add), committed."""
    (git_repo / "src").mkdir()
    (git_repo / "src" / "calc.py").write_text(WRONG)
    (git_repo / "src" / "other.py").write_text(OTHER)
    (git_repo / ".gitignore").write_text("__pycache__/\n")
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "Fix add", "--req", REQUIREMENTS, "--ac", "add returns the sum")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def agent_env(tmp_path: Path, entry: str) -> dict[str, str]:
    script = tmp_path / "coder.py"
    script.write_text(CODER)
    env = fake_agent_plan(tmp_path, reviewer=[{"approved": True}])
    return {**env, "SPECFLUX_FAKE_REVIEWER": str(AGENT), "SPECFLUX_AGENT_ENTRY": entry, "CODER": str(script)}


def background(repo: Path, env: dict, *args: str) -> subprocess.Popen:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(env['CODER'])}"
    return subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(repo), *args,
                             "--agent", "command", "--cmd", cmd],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def wait_for(predicate, timeout: float = 60) -> None:
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def person_works(repo: Path) -> None:
    """What a person does beside the agent: edits the Requirements and another source file, and
    logs a session by hand, in a process of its own."""
    path = repo / TASK
    path.write_text(path.read_text().replace(REQUIREMENTS, EDITED))
    (repo / "src" / "other.py").write_text(OTHER_EDITED)
    done = specflux(repo, "session", "1", "--did", HAND_DID, "--issues", "Floats too", "--next", "Tell the agent")
    assert done.returncode == 0, done.stderr
    assert "session 1 recorded in commit" in done.stdout, done.stdout


def commits(repo: Path) -> list[dict]:
    """Every commit, oldest first: sha, subject, trailers."""
    out = []
    for record in git(repo, "log", "--reverse", "--format=%H%x1f%s%x1f%(trailers:only,unfold)%x1e").split("\x1e"):
        if not record.strip():
            continue
        sha, subject, text = record.strip("\n").split("\x1f")
        out.append({"sha": sha, "subject": subject,
                    "trailers": dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)})
    return out


def session_commits(repo: Path) -> dict[int, dict]:
    """The commits titled `task 1: session N — ...`, by N; a number titled twice fails."""
    found: dict[int, dict] = {}
    for c in commits(repo):
        m = re.match(r"task 1: session (\d+) — ", c["subject"])
        if m:
            n = int(m.group(1))
            assert n not in found, f"session {n} is the title of two commits: {found[n]['subject']!r}, {c['subject']!r}"
            assert c["trailers"].get("Specflux-Session") == str(n), c
            found[n] = c
    return found


def show(repo: Path) -> dict:
    done = specflux(repo, "show", "1", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_people_beside(repo: Path, agent_did: str, agent_issues: str | None, run: bool) -> dict[int, dict]:
    """The person's session is entry 1 and its own commit; the agent's entry is 2, the agent's
    own, in the agent's commit; the hand edits are kept; lint is clean; no number twice."""
    sessions = show(repo)["sessions"]
    numbers = [s["number"] for s in sessions]
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    hand, agent = sessions[0], sessions[1]
    assert hand["did"] == [HAND_DID] and hand["issues"] == "Floats too"
    assert agent["did"][0].startswith(agent_did), agent
    if agent_issues is not None:
        assert agent["issues"] == agent_issues
    by_number = session_commits(repo)
    mine = by_number[1]
    assert mine["subject"] == f"task 1: session 1 — {HAND_DID}"
    assert "Specflux-Run" not in mine["trailers"] and "Specflux-Stop" not in mine["trailers"], mine
    assert agent_did not in git(repo, "show", f"{mine['sha']}:{TASK}"), "the person's entry only"
    theirs = by_number[2]
    assert theirs["subject"].startswith(f"task 1: session 2 — {agent_did[:40]}"), theirs["subject"]
    assert theirs["trailers"].get("Specflux-Stop"), theirs
    assert ("Specflux-Run" in theirs["trailers"]) == run
    assert theirs["trailers"].get("Specflux-Role", "coder") == "coder"
    assert "src/calc.py" in git(repo, "show", "--name-only", "--format=", theirs["sha"])
    assert git(repo, "show", "HEAD:src/calc.py") == RIGHT
    # the hand edits are kept, in the work tree and committed where they went
    text = (repo / TASK).read_text()
    assert EDITED in text and REQUIREMENTS + "\n" not in text
    assert EDITED in git(repo, "show", f"HEAD:{TASK}")
    assert (repo / "src" / "other.py").read_text() == OTHER_EDITED
    lint = specflux(repo, "lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert git(repo, "status", "--porcelain", "--", ".specflux/task-states") == ""
    return by_number


# --------------------------------------------------------------------- a workflow run


@pytest.mark.parametrize("entry", ["file", "cli", "none"])
def test_a_hand_session_during_a_runs_coder(project, tmp_path, entry):
    env = agent_env(tmp_path, entry)
    proc = background(project, env, "flow", "start")
    wait_for(lambda: (tmp_path / "agent-state" / "coder-1-1.txt").exists() or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()
    person_works(project)
    (tmp_path / "agent-state" / "go").write_text("")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err

    agent_did = AGENT_DID if entry != "none" else "Session ended without a hand-off"
    by_number = assert_people_beside(project, agent_did, AGENT_ISSUES if entry != "none" else None, run=True)
    sessions = show(project)["sessions"]
    assert len(sessions) == 3 and sessions[2]["did"][0].startswith("Review: approved"), sessions
    assert by_number[3]["trailers"]["Specflux-Role"] == "reviewer"
    assert show(project)["status"] == "complete"
    told = (tmp_path / "agent-state" / "reviewer-1-1.txt").read_text()
    assert EDITED in told and REQUIREMENTS + "\n" not in told, "the reviewer is told the requirements as edited"
    assert HAND_DID in told


# --------------------------------------------------------------------- specflux run, outside a run


@pytest.mark.parametrize("entry", ["file", "none"])
def test_a_hand_session_during_specflux_run(project, tmp_path, entry):
    env = agent_env(tmp_path, entry)
    proc = background(project, env, "run", "1")
    wait_for(lambda: (tmp_path / "agent-state" / "coder-1-1.txt").exists() or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()
    person_works(project)
    (tmp_path / "agent-state" / "go").write_text("")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert "session 2 ended" in out, out
    agent_did = AGENT_DID if entry != "none" else "Session ended without a hand-off"
    assert_people_beside(project, agent_did, AGENT_ISSUES if entry != "none" else None, run=False)


# --------------------------------------------------------------------- the API agent


@pytest.mark.parametrize("how", ["flow", "run"])
def test_a_hand_session_during_an_api_session(project, api, capsys, how):
    """The real anthropic SDK against the scripted Messages API, in this process; the person works
    (in processes of their own) while the coder's second request is being answered."""
    from specflux.agent.scripted import Reply, call

    coder = [Reply(calls=[call("write_file", path="src/calc.py", content=RIGHT), call("check_criterion", index=1)]),
             Reply(calls=[call("end_session", did=[AGENT_DID], issues=AGENT_ISSUES, next="Review the fix",
                               chain_output={"summary": "add() returns a + b", "downstream": "Use add()."})])]
    reviewer = [Reply(calls=[call("submit_review", approved=True, issues=[],
                                  criteria_results=[{"criterion": "1", "met": True}])])]
    told: list[str] = []

    def route(body: dict) -> str:
        tools = [t["name"] for t in body.get("tools", [])]
        if "submit_review" in tools:
            told.append("\n".join(b["text"] for b in body["messages"][0]["content"] if b.get("type") == "text"))
            return "reviewer"
        if len(body["messages"]) == 3:  # the coder's second turn: the person has been at work meanwhile
            person_works(project)
        return "coder"

    api({"coder": coder, "reviewer": reviewer}, route=route)
    capsys.readouterr()
    from specflux.cli.main import main

    code = main(["--root", str(project), *(["flow", "start"] if how == "flow" else ["run", "1"])])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    by_number = assert_people_beside(project, AGENT_DID, AGENT_ISSUES, run=how == "flow")
    assert show(project)["status"] == "complete"
    if how == "flow":
        assert len(told) == 1 and EDITED in told[0] and REQUIREMENTS + "\n" not in told[0], told
        assert by_number[3]["trailers"]["Specflux-Role"] == "reviewer"


# --------------------------------------------------------------------- the user's own edits before


def test_a_task_file_changed_before_the_session_and_logged_in_meanwhile(project, tmp_path):
    """The task file had uncommitted hand edits when `specflux run` started, and a person logged a
    session (committing the file) while it ran: the agent's part is still committed, and only it."""
    path = project / TASK
    path.write_text(path.read_text().replace(REQUIREMENTS, EDITED))  # before the session: the user's
    env = agent_env(tmp_path, "file")
    proc = background(project, env, "run", "1")
    wait_for(lambda: (tmp_path / "agent-state" / "coder-1-1.txt").exists() or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()
    (project / "src" / "other.py").write_text(OTHER_EDITED)
    done = specflux(project, "session", "1", "--did", HAND_DID, "--issues", "Floats too", "--next", "Tell the agent")
    assert done.returncode == 0, done.stderr
    (tmp_path / "agent-state" / "go").write_text("")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert "left out of the commit" not in err, err
    assert_people_beside(project, AGENT_DID, AGENT_ISSUES, run=False)


# --------------------------------------------------------------------- an agent that breaks the file


BREAKER = r'''
import os, pathlib, sys, time
state = pathlib.Path(os.environ["SPECFLUX_FAKE_STATE"])
state.mkdir(parents=True, exist_ok=True)
(state / "coder-1-1.txt").write_text(sys.stdin.read())
deadline = time.time() + 60
while not (state / "go").exists() and time.time() < deadline:
    time.sleep(0.05)
pathlib.Path("src/calc.py").write_text("def add(a, b):\n    return a + b\n")
task_file = pathlib.Path(os.environ["SPECFLUX_TASK_FILE"])
task_file.write_text(task_file.read_text().replace('"task_id": 1', '"task_id": 1,,'))  # garbled metadata
'''


def test_a_task_file_the_agent_breaks_is_put_back_with_the_hand_session_in_it(project, tmp_path):
    env = agent_env(tmp_path, "none")
    (tmp_path / "coder.py").write_text(BREAKER)
    proc = background(project, env, "run", "1")
    wait_for(lambda: (tmp_path / "agent-state" / "coder-1-1.txt").exists() or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()
    person_works(project)
    (tmp_path / "agent-state" / "go").write_text("")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "put it back" in err, out + err
    sessions = show(project)["sessions"]
    assert [s["number"] for s in sessions] == [1, 2], sessions
    assert sessions[0]["did"] == [HAND_DID]
    assert sessions[1]["did"][0].startswith("Session ended without a hand-off"), sessions[1]
    assert "left the task file broken" in sessions[1]["issues"]
    text = (project / TASK).read_text()
    assert EDITED in text, "the Requirements edit the person committed with their session is kept"
    by_number = session_commits(project)
    assert by_number[1]["subject"] == f"task 1: session 1 — {HAND_DID}"
    assert by_number[2]["trailers"]["Specflux-Session"] == "2" and "Specflux-Run" not in by_number[2]["trailers"]
    assert git(project, "show", "HEAD:src/calc.py") == RIGHT
    assert specflux(project, "lint").returncode == 0
    assert git(project, "status", "--porcelain", "--", ".specflux/task-states") == ""
