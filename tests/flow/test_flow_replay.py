"""Whole-run replay: a run through the real SDK against a scripted local API, replayed offline in
a fresh clone; identical, and then made to diverge by changing one recorded response."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import git
from helpers import run
from test_flow import RIGHT, TEST, VALIDATE, WRONG

from specflux.agent.scripted import Reply, call

API_KEY = "sk-ant-test-REPLAY-77"


def project(repo: Path, capsys) -> Path:
    (repo / "src").mkdir()
    (repo / "src" / "calc.py").write_text(WRONG)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc.py").write_text(TEST)
    (repo / ".gitignore").write_text(".specflux-junit.xml\n__pycache__/\n")
    assert run(capsys, repo, "init", str(repo))[0] == 0
    with open(repo / ".specflux" / "config.toml", "a") as f:
        f.write(VALIDATE.format(python=sys.executable))
    assert run(capsys, repo, "new", "Fix add", "--ac", "add returns the sum")[0] == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project")
    return repo


def coder(code: str, *, done: bool) -> list[Reply]:
    calls = [call("write_file", path="src/calc.py", content=code)]
    if done:
        calls.append(call("check_criterion", index=1))
    handoff = {"did": ["wrote add"], "issues": "", "next": ""}
    if done:
        handoff["chain_output"] = {"summary": "add() returns the sum", "downstream": "import calc.add"}
    return [Reply(calls=calls), Reply(calls=[call("end_session", **handoff)])]


REVIEW = [Reply(calls=[call("read_file", path="src/calc.py")]),
          Reply(calls=[call("submit_review", approved=True, issues=[],
                            criteria_results=[{"criterion": "add returns the sum", "met": True}])])]


def live_run(git_repo: Path, api, capsys) -> tuple[Path, str]:
    repo = project(git_repo, capsys)
    api(*coder(WRONG.replace("a - b", "a * b"), done=False), *coder(RIGHT, done=True), *REVIEW)
    code, out, err = run(capsys, repo, "flow", "start")
    assert code == 0, out + err
    run_id = out.splitlines()[0]
    state = json.loads(run(capsys, repo, "flow", "status", "--json")[1])
    assert state["status"] == "completed" and state["taskAttempts"] == {"1": 2}
    return repo, run_id


def test_a_replay_of_a_run_makes_the_same_decisions_offline(git_repo, api, capsys, tmp_path, monkeypatch):
    repo, run_id = live_run(git_repo, api, capsys)
    monkeypatch.delenv("ANTHROPIC_BASE_URL")  # offline: nothing to talk to
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    into = tmp_path / "replayed"
    code, out, err = run(capsys, repo, "flow", "replay", run_id, "--into", str(into))
    assert code == 0, out + err
    assert f"replay of {run_id} matches: 3 step(s)" in out and f"({into})" in out
    assert (into / "src" / "calc.py").read_text() == RIGHT, "the tools ran for real"
    replayed = json.loads((into / ".specflux" / "runs" / run_id / "state.json").read_text())
    assert replayed["status"] == "completed" and replayed["tasks"][0]["status"] == "complete"
    original = (repo / ".specflux" / "task-states" / "task-1-state.md").read_text()
    assert (into / ".specflux" / "task-states" / "task-1-state.md").read_text() == original


def test_a_replay_that_diverges_names_the_first_step_that_differs(git_repo, api, capsys, tmp_path, monkeypatch):
    repo, run_id = live_run(git_repo, api, capsys)
    recording = repo / ".specflux" / "runs" / run_id / "recordings" / "s8.jsonl"  # the second coder try
    lines = recording.read_text().splitlines()
    changed = [line.replace("a + b", "a + b + 0 * 1") if "a + b" in line else line for line in lines]
    assert changed != lines
    recording.write_text("\n".join(changed) + "\n")
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    code, out, err = run(capsys, repo, "flow", "replay", run_id, "--into", str(tmp_path / "replayed"))
    assert code == 1, out + err
    assert "differs" in err and "step s" in err, err


def test_a_replay_into_a_relative_folder_is_the_same_replay(git_repo, api, capsys, tmp_path, monkeypatch):
    """`--into replayed`, from the folder it is relative to: the replay is the one an absolute
    path makes (a relative target once made the reviewer's put-back guard see its own session's
    entry as a change, and the run's history commit fail on a path git could not find)."""
    repo, run_id = live_run(git_repo, api, capsys)
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, repo, "flow", "replay", run_id, "--into", "replayed")
    assert code == 0, out + err
    into = tmp_path / "replayed"
    assert f"replay of {run_id} matches: 3 step(s)" in out and f"({into})" in out
    assert "put back" not in out + err and "could not commit" not in out + err, out + err
    assert not (into / ".specflux" / "reverted").exists()
    history = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=into, capture_output=True, text=True).stdout
    assert history.startswith(f"run {run_id}: completed"), history


REPLAY_PROBE = """
import json, sys
from specflux.cli.main import main
rc = main(json.loads(sys.argv[1]))
print(json.dumps({"rc": rc, "pydantic": sorted(m for m in sys.modules if m.split(".")[0] == "pydantic")}))
"""


def test_a_replay_whose_tool_calls_fit_never_imports_pydantic(git_repo, api, capsys, tmp_path):
    """Every call of the run (write_file, check_criterion, end_session with a chain output,
    read_file, submit_review) fits its tool as it is: the replay reads them without pydantic's
    models (plain_inputs.py), ~70 ms of a replay's CPU. The live run
    imported it with the anthropic SDK; the replay talks to no SDK."""
    repo, run_id = live_run(git_repo, api, capsys)
    argv = ["--root", str(repo), "flow", "replay", run_id, "--into", str(tmp_path / "replayed")]
    done = subprocess.run([sys.executable, "-c", REPLAY_PROBE, json.dumps(argv)], capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")})
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["rc"] == 0, done.stderr
    assert result["pydantic"] == [], result["pydantic"]
