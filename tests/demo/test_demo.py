"""`specflux demo`: the whole story offline, replayed from the recordings shipped in the package,
and `specflux.demo.tour.record` re-recording them against the scripted local Messages API."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import git
from patience import patience

import specflux.demo.tour
from specflux.agent.recording import canonical, load
from specflux.cli.main import main
from specflux.demo.tour import SESSIONS, record, run_demo

STATES = ".specflux/task-states"


def task_file(root: Path, task_id: str) -> Path:
    return root / STATES / f"task-{task_id}-state.md"


def show(capsys, root: Path, task_id: str) -> dict:
    capsys.readouterr()
    code = main(["--root", str(root), "show", task_id, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def everything(root: Path) -> dict[str, bytes]:
    """Every file under `root`, .git included: to prove that nothing changed at all."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def session_commits(root: Path) -> list[tuple[str, dict[str, str], list[str]]]:
    """(sha, trailers, files) of each commit, oldest first."""
    out = []
    for sha in git(root, "rev-list", "--reverse", "HEAD").split():
        text = git(root, "log", "-1", "--format=%(trailers:only,unfold)", sha)
        trailers = dict(line.split(": ", 1) for line in text.splitlines() if line.strip())
        out.append((sha, trailers, sorted(git(root, "show", "--name-only", "--format=", sha).split())))
    return out


@pytest.fixture
def quiet_python(monkeypatch):
    """The demo's agents run python3: no bytecode caches, so that two runs' trees can be compared."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")


@pytest.fixture
def fixed_git(monkeypatch):
    """Same identity and dates on every run, so that two demo runs can be compared."""
    for key, value in {"GIT_AUTHOR_NAME": "Demo", "GIT_AUTHOR_EMAIL": "demo@example.com",
                       "GIT_COMMITTER_NAME": "Demo", "GIT_COMMITTER_EMAIL": "demo@example.com",
                       "GIT_AUTHOR_DATE": "2026-01-05T09:00:00+00:00",
                       "GIT_COMMITTER_DATE": "2026-01-05T09:00:00+00:00"}.items():
        monkeypatch.setenv(key, value)


def test_the_demo_tells_the_whole_story_offline(tmp_path, capsys, quiet_python):
    target = tmp_path / "demo"

    started = time.monotonic()
    code = main(["demo", str(target)])
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()

    assert code == 0, err
    assert elapsed < patience(30)
    assert "Ready next: #3" in out
    assert sorted(p.name for p in (target / STATES).iterdir()) == [f"task-{i}-state.md" for i in range(1, 8)]

    # Task 1: two sessions, the first archived (the demo's limit is 1 KB).
    one = task_file(target, "1").read_text()
    assert re.search(r"^### Archived Summary \(Sessions 1-1\)$", one, re.M)
    assert "### Session 1 - " not in one and "### Session 2 - 2026-01-05 11:30" in one
    archive = target / ".specflux" / "archives" / "task-1-archive.md"
    assert archive.is_file()
    assert "### Session 1 - 2026-01-05 09:00" in archive.read_text()
    assert "- Added textkit/slug.py with slugify()" in archive.read_text()
    state1 = show(capsys, target, "1")
    assert state1["status"] == "complete"
    assert state1["archived_summary"]["archive"] == ".specflux/archives/task-1-archive.md"
    assert [c["checked"] for c in state1["criteria"]] == [True, True]

    # Task 2 complete, its chain output wired into task 3; task 1's into task 2.
    state2 = show(capsys, target, "2")
    assert state2["status"] == "complete"
    assert state2["chain_output"]["summary"].startswith("Command line: python3 -m textkit.cli TEXT")
    assert [c["task_id"] for c in state2["chain_inputs"]] == ["1"]
    assert state1["chain_output"]["summary"] in state2["chain_inputs"][0]["body"]
    state3 = show(capsys, target, "3")
    assert state3["status"] == "pending" and state3["sessions"] == []
    assert [c["task_id"] for c in state3["chain_inputs"]] == ["2"]
    assert state2["chain_output"]["summary"] in state3["chain_inputs"][0]["body"]
    assert "### From Task #2: slug command line" in task_file(target, "3").read_text()

    # One commit per session, with trailers, holding exactly what each session changed.
    everything_committed = session_commits(target)
    first_part = next(i for i, (_, t, files) in enumerate(everything_committed) if "tests/run.py" in files)
    commits = everything_committed[:first_part]
    assert len(commits) == 4
    assert commits[0][1] == {}  # the project set-up
    assert [(t["Specflux-Task"], t["Specflux-Session"], t["Specflux-Status"]) for _, t, _ in commits[1:]] == [
        ("1", "1", "in_progress"), ("1", "2", "complete"), ("2", "1", "complete")]
    assert all(t["Specflux-Stop"] == "end_session" and int(t["Specflux-Input-Tokens"]) > 0 for _, t, _ in commits[1:])
    assert [files for _, _, files in commits[1:]] == [
        [f"{STATES}/task-1-state.md", "textkit/slug.py"],
        [".specflux/archives/task-1-archive.md", f"{STATES}/task-1-state.md", f"{STATES}/task-2-state.md",
         "tests/test_slug.py"],
        [f"{STATES}/task-2-state.md", f"{STATES}/task-3-state.md", "textkit/cli.py"],
    ]
    assert git(target, "status", "--porcelain") == ""
    # The archived summary names the commit of the session it archived.
    assert f"**Commits:** {commits[1][0][:7]}" in one

    # The workflow run: a failing test fixed on retry, a rejection answered, 4 wired into 5.
    runs = sorted((target / ".specflux" / "runs").iterdir(),  # two runs may start in one second: by their tasks
                  key=lambda r: [t["id"] for t in json.loads((r / "state.json").read_text())["tasks"]])
    assert len(runs) == 2
    state = json.loads((runs[0] / "state.json").read_text())
    assert state["status"] == "completed" and state["taskAttempts"] == {"4": 2, "5": 2}
    assert state["metrics"]["totalReviews"] == 3
    narrative = (runs[0] / "narrative.md").read_text()
    assert "coder finished on task 4: needs_revision, tests failed: tests/test_case.py::test_titlecase" in narrative
    assert "changes requested: README.md has no example with its output" in narrative
    assert "Run " + runs[0].name in out and "task 4 is complete" in out
    assert show(capsys, target, "5")["chain_inputs"][0]["task_id"] == "4"
    assert show(capsys, target, "5")["status"] == "complete"
    lanes_part = next(i for i, (_, t, files) in enumerate(everything_committed) if f"{STATES}/task-6-state.md" in files)
    run_commits = [t for _, t, _ in everything_committed[first_part + 1:lanes_part]]
    assert all(t.get("Specflux-Run") == runs[0].name for t in run_commits)
    assert [t.get("Specflux-Role") for t in run_commits].count("coder") == 4

    # The parallel run: 6 and 7 at once; 7's first merge conflicted, its new attempt merged.
    lanes = json.loads((runs[1] / "state.json").read_text())
    assert lanes["status"] == "completed" and lanes["parallel"] == 2
    assert lanes["edgeIterations"]["merge-conflict"] == {"7": 1} and lanes["taskAttempts"] == {"6": 1, "7": 2}
    assert "task 7: merge conflicts in textkit/__init__.py" in out
    assert (target / "textkit" / "__init__.py").read_text().endswith(
        "from .words import wordcount\nfrom .initials import initials\n")
    merges = git(target, "log", "--merges", "--format=%s").splitlines()
    assert [m.split(":")[0] for m in merges] == ["Merge task 7", "Merge task 6"]
    assert not (target / ".specflux" / "worktrees").exists() and git(target, "branch", "--list", "specflux/*") == ""
    assert show(capsys, target, "7")["status"] == "complete" and len(show(capsys, target, "7")["sessions"]) == 4

    # What the agents wrote works.
    done = subprocess.run([sys.executable, "-m", "textkit.cli", "Hello World"], cwd=target, capture_output=True,
                          text=True, env={"PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"})
    assert (done.returncode, done.stdout) == (0, "hello-world\n")

    # Again into the same (now non-empty) folder: a usage error, and not one byte changes.
    before = everything(target)
    code = main(["demo", str(target)])
    out, err = capsys.readouterr()
    assert code == 2
    assert "not empty" in err and str(target.resolve()) in err
    assert "Traceback" not in err
    assert everything(target) == before


def test_the_demo_refuses_any_non_empty_folder(tmp_path, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("my notes\n")

    code = main(["demo", str(target)])
    out, err = capsys.readouterr()

    assert code == 2
    assert "not empty" in err
    assert everything(target) == {"notes.txt": b"my notes\n"}  # no .git, no .specflux


def test_the_demo_archived_summary_lists_only_commits(tmp_path, capsys, quiet_python):
    """Regression: the `[Full details: ...]` line under **Commits:** was read as three more commits."""
    target = tmp_path / "demo"
    assert run_demo(target, say=lambda line: None) == 0
    session_1 = session_commits(target)[1][0]
    assert show(capsys, target, "1")["archived_summary"]["commits"] == [session_1[:7]]


def test_the_demo_commits_no_bytecode_caches(tmp_path, monkeypatch):
    """Regression: a session commits whatever changed while it ran, and the agents run python3."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)  # (the suite's own, tests/conftest.py)
    target = tmp_path / "demo"
    assert run_demo(target, say=lambda line: None) == 0
    committed = [f for _, _, files in session_commits(target) for f in files]
    assert "textkit/slug.py" in committed
    assert not [f for f in committed if "__pycache__" in f or f.endswith(".pyc")]


def comparable(root: Path) -> dict[str, bytes]:
    """The demo's work tree, with each archived summary's commit replaced by a placeholder once it is
    checked to be this run's own session-1 commit (commit ids hold wall-clock durations)."""
    first_session = session_commits(root)[1][0][:7]
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if not p.is_file() or rel.startswith((".git/", ".specflux/locks/", ".specflux/runs/", ".specflux/cache/")):
            continue
        data = p.read_bytes()
        if b"**Commits:**" in data:
            assert f"**Commits:** {first_session}\n".encode() in data, rel
            data = data.replace(first_session.encode(), b"<session-1-commit>")
        out[rel] = data
    return out


def test_re_recorded_sessions_replay_to_the_same_files_as_the_shipped_ones(tmp_path, monkeypatch, quiet_python,
                                                                           fixed_git):
    fresh = tmp_path / "recordings"
    record(fresh, say=lambda line: None)
    assert sorted(p.name for p in fresh.iterdir() if p.is_file()) == sorted(f"{s.name}.jsonl" for s in SESSIONS)
    import specflux.demo.flow_run

    shipped_flow = specflux.demo.flow_run.flow_recordings() / "recordings"
    assert sorted(p.name for p in (fresh / "flow" / "recordings").iterdir()) == sorted(p.name for p in shipped_flow.iterdir())
    for path in sorted(shipped_flow.iterdir()):  # the workflow run's sessions are up to date too
        _, new = load(fresh / "flow" / "recordings" / path.name)
        _, old = load(path)
        assert [canonical(r) for _, r, _ in new] == [canonical(r) for _, r, _ in old], path.name
        assert [resp for _, _, resp in new] == [resp for _, _, resp in old], path.name

    # The fresh recordings hold the same exchanges as the shipped ones (up to command output,
    # which replay compares by its first line only): the shipped recordings are up to date.
    shipped = specflux.demo.tour.recordings_dir()
    for s in SESSIONS:
        meta_new, new = load(fresh / f"{s.name}.jsonl")
        meta_old, old = load(shipped / f"{s.name}.jsonl")
        assert (meta_new["task_id"], meta_new["model"]) == (meta_old["task_id"], meta_old["model"]) == (s.task_id, specflux.demo.tour.MODEL)
        assert [turn for turn, _, _ in new] == [turn for turn, _, _ in old], s.name
        for (turn, req_new, resp_new), (_, req_old, resp_old) in zip(new, old):
            assert canonical(req_new) == canonical(req_old), (s.name, turn)
            assert resp_new == resp_old, (s.name, turn)

    assert run_demo(tmp_path / "with-shipped", say=lambda line: None) == 0
    monkeypatch.setattr(specflux.demo.tour, "recordings_dir", lambda: fresh)
    monkeypatch.setattr(specflux.demo.flow_run, "flow_recordings", lambda: fresh / "flow")
    lines: list[str] = []
    assert run_demo(tmp_path / "with-fresh", say=lines.append) == 0
    assert any("task 2, session 1: end_session, status complete" in line for line in lines)

    a, b = comparable(tmp_path / "with-shipped"), comparable(tmp_path / "with-fresh")
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name] == b[name], name
    assert f"{STATES}/task-3-state.md" in a and "textkit/cli.py" in a
