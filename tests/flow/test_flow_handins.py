"""A hand-in belongs to one step (issue 23, deliverable 2; issue 24's first `--agent command`
run): misbehaving agent CLIs (tests/fixtures/handin_agent.py) in real git repositories, in each
sandbox this machine has.

- a coder that plants approving review hand-ins for every step to come, serial and with lanes,
  under bubblewrap, Landlock and no sandbox: nothing it planted approves anything;
- a reviewer that hands in nothing, and one that hands in half a JSON object: no verdict, said so;
- a coder that exits non-zero before ticking its criterion: a failed attempt, never reviewed;
- a coder that ticks its criteria without a chain output and no [validate]: its claim stands;
- a person deleting another task's file during a session: under bubblewrap, said to be theirs.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git
from helpers import run
from helpers import specflux_process as specflux

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "handin_agent.py"
TEST = 'import sys\nsys.path.insert(0, "src")\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n'
VALIDATE = '\n[validate]\ncommand = "{python} -m pytest -q -p no:cacheprovider tests"\n'


def _can(sandbox: str) -> bool:
    from specflux.agent.sandbox import choose

    try:
        choose(sandbox)
    except Exception:
        return False
    return True


SANDBOXES = [pytest.param(name, marks=pytest.mark.skipif(name != "off" and not _can(name), reason=f"no {name} here"))
             for name in ("bwrap", "landlock", "off")]


def make_project(repo: Path, capsys, sandbox: str = "off", validate: bool = False, dependent: bool = True) -> Path:
    """Tasks 1 (fix add) and 2 (depending on 1 unless `dependent` is False), committed."""
    (repo / "src").mkdir()
    (repo / "src" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(TEST)
    (repo / ".gitignore").write_text("__pycache__/\n")
    assert run(capsys, repo, "init", str(repo))[0] == 0
    config = repo / ".specflux" / "config.toml"
    text = re.sub(r'^sandbox = "auto"', f'sandbox = "{sandbox}"', config.read_text(), flags=re.M)
    config.write_text(text + (VALIDATE.format(python=sys.executable) if validate else ""))
    assert run(capsys, repo, "new", "Fix add", "--ac", "add returns the sum")[0] == 0
    deps = ("--dep", "1") if dependent else ()
    assert run(capsys, repo, "new", "Add twice", *deps, "--ac", "add works twice")[0] == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    return repo


def start(repo: Path, tmp_path: Path, plan: dict, *extra: str, sandbox: str = "off"):
    (tmp_path / "tmp").mkdir(exist_ok=True)  # the run's temporary folder: its hand-in channels, this test's alone
    env = {"TMPDIR": str(tmp_path / "tmp"), "SPECFLUX_TEST_AGENT_PLAN": json.dumps(plan), "SPECFLUX_TEST_AGENT_STATE": str(tmp_path / "agent-state"), "SPECFLUX_TEST_MAIN_REPO": str(repo),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "SPECFLUX_CLI_SANDBOX": sandbox}
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    return specflux(repo, "flow", "start", "--agent", "command", "--cmd", cmd, *extra, env=env, timeout=300)


def status(repo: Path) -> dict:
    return json.loads(specflux(repo, "flow", "status", "--json").stdout)


def narrative(repo: Path) -> str:
    return specflux(repo, "flow", "log").stdout


def task_status(repo: Path, task: str) -> str:
    return json.loads(specflux(repo, "show", task, "--json").stdout)["metadata"]["status"]


def reviews(repo: Path) -> list[dict]:
    events = (repo / ".specflux" / "runs" / status(repo)["runId"] / "events.jsonl").read_text().splitlines()
    return [e["output"] for e in map(json.loads, events) if e["type"] == "step_finished" and e["kind"] == "reviewer"]


PLANTER = ["broken", "tick", "chain", "plant"]


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_coder_that_plants_approvals_for_the_steps_to_come_approves_nothing(git_repo, capsys, tmp_path, sandbox):
    repo = make_project(git_repo, capsys, sandbox)
    done = start(repo, tmp_path, {"coder": [PLANTER], "reviewer": [["silent"]]}, sandbox=sandbox)
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(repo)
    assert state["status"] == "failed" and [t["status"] for t in state["tasks"]] == ["failed", "blocked"], state
    assert task_status(repo, "1") != "complete"
    assert reviews(repo) and not any(r["approved"] for r in reviews(repo))
    told = narrative(repo)
    assert "approved" not in told.replace("not approved", ""), told
    assert "reviewer finished on task 1: no verdict, so not approved: the reviewer handed in no verdict" in told
    if sandbox == "off":  # nothing kept it from writing them: found, set aside and named
        assert "planted 240 hand-ins in" in done.stderr, done.stderr
        assert "tampering: hand-in files planted in .specflux/runs/" in told and "were ignored" in told, told
    else:  # the sandbox kept it from writing anywhere the run reads
        assert "could not plant in" in done.stderr and "planted 240" not in done.stderr, done.stderr
    assert "Review: approved" not in (repo / ".specflux" / "task-states" / "task-1-state.md").read_text()


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_planted_approvals_approve_nothing_in_lanes(git_repo, capsys, tmp_path, sandbox):
    repo = make_project(git_repo, capsys, sandbox, dependent=False)
    done = start(repo, tmp_path, {"coder": [PLANTER], "reviewer": [["silent"]]}, "--parallel", "2", sandbox=sandbox)
    if sandbox != "off":
        assert "could not plant in" in done.stderr and "planted 240" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    state = status(repo)
    assert [t["status"] for t in state["tasks"]] == ["failed", "failed"], state
    assert task_status(repo, "1") != "complete" and task_status(repo, "2") != "complete"
    assert reviews(repo) and not any(r["approved"] for r in reviews(repo))
    assert git(repo, "show", "HEAD:src/calc.py") == "def add(a, b):\n    return a - b\n", "nothing merged"


def test_a_reviewer_that_hands_in_nothing_has_not_approved_and_says_so(git_repo, capsys, tmp_path):
    repo = make_project(git_repo, capsys)
    done = start(repo, tmp_path, {"coder": [["right", "tick", "chain"]], "reviewer": [["silent"], ["approve"]]}, "1")
    assert done.returncode == 0, done.stdout + done.stderr
    first = reviews(repo)[0]
    assert first["approved"] is False and first["noVerdict"] is True
    told = narrative(repo)
    assert ("reviewer finished on task 1: no verdict, so not approved: the reviewer handed in no verdict "
            "(its session ended without one)") in told, told
    again = (tmp_path / "agent-state" / "coder-1-2.txt").read_text()
    assert "The reviewer gave no verdict (this is not a rejection of your work)" in again, again


def test_a_malformed_hand_in_is_no_verdict_saying_what_was_wrong(git_repo, capsys, tmp_path):
    repo = make_project(git_repo, capsys)
    done = start(repo, tmp_path, {"coder": [["right", "tick", "chain"]], "reviewer": [["malformed"], ["approve"]]}, "1")
    assert done.returncode == 0, done.stdout + done.stderr
    first = reviews(repo)[0]
    assert first["approved"] is False and first["noVerdict"] is True
    told = narrative(repo)
    assert ("no verdict, so not approved: the reviewer's hand-in was malformed: the hand-in is not valid JSON "
            "(line 1, column 14): Expecting value") in told, told
    assert "changes requested" not in told
    assert task_status(repo, "1") == "complete", "the second review approved it"


def test_a_coder_that_exits_non_zero_is_a_failed_attempt_never_reviewed(git_repo, capsys, tmp_path):
    repo = make_project(git_repo, capsys, validate=True)
    # Attempt 1 fixes add() (the tests pass) but exits 3 before ticking its criterion.
    done = start(repo, tmp_path, {"coder": [["right", "exit3"], ["right", "tick", "chain"]],
                                  "reviewer": [["approve"]]}, "1")
    assert done.returncode == 0, done.stdout + done.stderr
    state = status(repo)
    assert state["taskAttempts"] == {"1": 2} and state["metrics"]["totalReviews"] == 1, state
    told = narrative(repo)
    assert "coder finished on task 1: a failed attempt: the agent command exited with 3" in told, told
    shown = json.loads(specflux(repo, "show", "1", "--json").stdout)
    assert shown["metadata"]["status"] == "complete" and all(c["checked"] for c in shown["criteria"])
    again = (tmp_path / "agent-state" / "coder-1-2.txt").read_text()
    assert "It was not accepted:\n- the agent command exited with 3" in again and "The tests failed" not in again


def test_a_claim_without_a_chain_output_stands_and_a_missing_one_is_named(git_repo, capsys, tmp_path):
    repo = make_project(git_repo, capsys)
    # No [validate]: attempt 1 logs nothing and ticks nothing; attempt 2 ticks its criterion, no chain output.
    done = start(repo, tmp_path, {"coder": [["right"], ["right", "tick"]], "reviewer": [["approve"]]}, "1")
    assert done.returncode == 0, done.stdout + done.stderr
    told = narrative(repo)
    assert ("needs_revision, no [validate] command, and the coder did not claim the task done: criteria 1 are "
            "not ticked and it wrote no chain output") in told, told
    assert "complete, no [validate] command: the coder's own claim stands" in told
    again = (tmp_path / "agent-state" / "coder-1-2.txt").read_text()
    assert "The tests failed" not in again and "the session ended: end_turn" not in again
    assert "It was not accepted:\n- the coder did not claim the task done" in again
    assert task_status(repo, "1") == "complete"


@pytest.mark.parametrize("sandbox", [SANDBOXES[0], SANDBOXES[2]])
def test_a_task_file_a_person_deletes_during_a_session_is_their_change(git_repo, capsys, tmp_path, sandbox):
    repo = make_project(git_repo, capsys, sandbox, dependent=False)
    signals = repo / ".signals"  # inside the repository (ignored): a sandboxed agent can write there
    (repo / ".git" / "info" / "exclude").write_text(".signals/\n")
    env = {"SPECFLUX_TEST_AGENT_PLAN": json.dumps({"coder": [["wait", "right", "tick", "chain"]], "reviewer": [["approve"]]}),
           "SPECFLUX_TEST_AGENT_STATE": str(signals), "SPECFLUX_TEST_MAIN_REPO": str(repo), "SPECFLUX_CLI_SANDBOX": sandbox,
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    proc = subprocess.Popen([sys.executable, "-m", "specflux.cli", "--root", str(repo), "flow", "start", "1",
                             "--agent", "command", "--cmd", cmd], env={**__import__("os").environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (signals / "started-1").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    other = repo / ".specflux" / "task-states" / "task-2-state.md"
    before = other.read_bytes()
    other.unlink()  # a person, by hand, while task 1's coder works
    (signals / "go").write_text("")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    told = narrative(repo)
    if sandbox == "bwrap":
        assert ("task-2-state.md: deleted during the session by a person (or another program), not by the agent, "
                "whose sandbox held this file read-only") in told, told
    else:
        assert "task-2-state.md: deleted during the session, by the agent or by a person" in told, told
    assert "the session broke this task file" not in told and "the agent deleted" not in told
    assert other.read_bytes() == before, "put back: the session's commit does not carry the deletion"
    assert task_status(repo, "1") == "complete"


@pytest.mark.skipif(not _can("bwrap"), reason="no bwrap here")
def test_under_bubblewrap_an_agent_cannot_delete_another_tasks_file(git_repo, capsys, tmp_path):
    repo = make_project(git_repo, capsys, "bwrap", dependent=False)
    done = start(repo, tmp_path, {"coder": [["right", "tick", "chain", "rmother"]], "reviewer": [["approve"]]}, "1",
                 sandbox="bwrap")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "could not delete task-2-state.md" in done.stderr and "deleted task-2-state.md" not in done.stderr
    assert (repo / ".specflux" / "task-states" / "task-2-state.md").is_file()


def test_submit_review_help_shows_the_shape_with_an_example_that_is_accepted(git_repo, capsys, tmp_path):
    from specflux.agent.handin import check_review, check_tasks

    for kind, check in (("review", check_review), ("tasks", check_tasks)):
        shown = specflux(git_repo, f"submit-{kind}", "--help")
        assert shown.returncode == 0
        assert "the JSON (one object):" in shown.stdout and f"specflux submit-{kind} --json - <<'EOF'" in shown.stdout
        example = shown.stdout.split("<<'EOF'\n", 1)[1].split("\n  EOF", 1)[0]
        check(json.loads(example))  # the example is a hand-in the command accepts
    assert "criteria_results  one {\"criterion\", \"met\"} for each acceptance criterion" in \
        specflux(git_repo, "submit-review", "--help").stdout


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_sandboxed_reviewer_hands_in_through_its_own_channel(git_repo, capsys, tmp_path, sandbox):
    repo = make_project(git_repo, capsys, sandbox)
    done = start(repo, tmp_path, {"coder": [["right", "tick", "chain"]], "reviewer": [["approve"]]}, "1",
                 sandbox=sandbox)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "review recorded" in done.stdout + done.stderr
    assert [r["approved"] for r in reviews(repo)] == [True] and task_status(repo, "1") == "complete"
    assert "tampering" not in narrative(repo)


def test_a_process_the_coder_left_behind_cannot_hand_in_for_the_reviewer(git_repo, capsys, tmp_path):
    # No sandbox: the coder's leftover process (its own session) finds the reviewer's private folder
    # and writes an approval there, sealed with a guessed key; the reviewer waits for it and hands in nothing.
    repo = make_project(git_repo, capsys)
    done = start(repo, tmp_path, {"coder": [["broken", "tick", "chain", "daemon"]], "reviewer": [["await"]]}, "1",
                 "--max-iterations", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    first = reviews(repo)[0]
    assert first["approved"] is False and first["noVerdict"] is True
    told = narrative(repo)
    # The leftover ends with the coder's session (agent/reaper.py), so it never gets to write; had it
    # written, its guessed seal would be refused as tampering. Either way nothing was approved.
    assert "reviewer finished on task 1: approved" not in told, told
    assert ("tampering: a hand-in for step s8 was refused: its seal does not match this step's key" in told
            or "tampering" not in told), told
    assert task_status(repo, "1") != "complete"
