"""The run's write journal (flow/record/journal.py): the task files a decision's effects write
are recorded in the event log, fsynced once, and written without fsyncs of their own. What a
power loss can do to such a file — its new name on the disk without its new bytes (empty), or
the old file still there — is made here by hand after a real `kill -9` at a named point, and
`flow resume` puts the run's write back. A file changed since (a person's edit) is left alone.

The runs here take their lanes (`--parallel 2`): there a task is accepted once its lane is merged,
by the decision's effects, through the journal. A one-lane run accepts a task in its reviewer's own
commit (flow/early_acceptance.py; its kills: test_accept_in_commit.py).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import fake_agent_plan as plan
from helpers import run
from helpers import specflux_process as specflux

from specflux.base.files import ChangeSet, journaled

AGENT = Path(__file__).resolve().parents[1] / "fixtures" / "fake_flow_agent.py"
TASK1 = Path(".specflux") / "task-states" / "task-1-state.md"


@pytest.fixture
def project(git_repo: Path, capsys) -> Path:
    """Task 1, and task 2 that depends on it, committed."""
    assert run(capsys, git_repo, "init", str(git_repo))[0] == 0
    assert run(capsys, git_repo, "new", "Write apples", "--ac", "APPLES.md exists")[0] == 0
    assert run(capsys, git_repo, "new", "Write pears", "--dep", "1", "--ac", "PEARS.md exists")[0] == 0
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def agent_env(tmp_path: Path) -> dict:
    return plan(tmp_path, coder__1=[{"write": {"APPLES.md": "apples\n"}, "check": True, "chain": "APPLES.md written"}],
                coder__2=[{"write": {"PEARS.md": "pears\n"}, "check": True, "chain": "PEARS.md written"}])


def start(repo: Path, env: dict, crash_at: str) -> subprocess.CompletedProcess:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    return specflux(repo, "flow", "start", "--agent", "command", "--cmd", cmd, "--parallel", "2",
                    env={**env, "SPECFLUX_CRASH_AT": crash_at}, timeout=180)


def resume(repo: Path, env: dict) -> subprocess.CompletedProcess:
    return specflux(repo, "flow", "resume", env={**env, "SPECFLUX_CRASH_AT": ""}, timeout=180)


def journal(repo: Path) -> list[dict]:
    """The `files` events of the run's log."""
    [events] = list((repo / ".specflux" / "runs").glob("*/events.jsonl"))
    return [e for e in map(json.loads, events.read_text().splitlines()) if e["type"] == "files"]


def accepted_text(repo: Path) -> str:
    """Task 1's text as the run's acceptance wrote it (from the journal)."""
    [record] = [e for e in journal(repo) if any(f["path"] == str(TASK1) for f in e["files"])]
    [entry] = [f for f in record["files"] if f["path"] == str(TASK1)]
    return entry["text"]


def completed(repo: Path) -> None:
    state = json.loads(specflux(repo, "flow", "status", "--json").stdout)
    assert state["status"] == "completed", state
    for task in ("1", "2"):
        assert json.loads(specflux(repo, "show", task, "--json").stdout)["metadata"]["status"] == "complete"
    assert "APPLES.md written" in (repo / ".specflux" / "task-states" / "task-2-state.md").read_text()  # wired
    assert git(repo, "status", "--porcelain") == ""
    lint = specflux(repo, "lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_an_acceptance_is_journaled_before_its_files_are_written(project, tmp_path):
    """Killed right after the journal is on the disk: task 1's file is still the old one, and the
    journal holds its new text and the hash of the old bytes; resume carries the acceptance out."""
    env = agent_env(tmp_path)
    done = start(project, env, "recorded:files")
    assert done.returncode == -9, done.stdout + done.stderr
    [record] = journal(project)
    paths = [f["path"] for f in record["files"]]
    assert str(TASK1) in paths and str(TASK1).replace("1", "2") in paths  # the file and its dependent's
    assert (project / TASK1).read_bytes() != accepted_text(project).encode()
    assert '"status": "complete"' in accepted_text(project)
    import hashlib

    assert record["files"][paths.index(str(TASK1))]["before"] == hashlib.sha256(
        (project / TASK1).read_bytes()).hexdigest()
    again = resume(project, env)
    assert again.returncode == 0, again.stdout + again.stderr
    completed(project)


def test_a_task_file_emptied_by_a_power_loss_is_restored(project, tmp_path):
    """The acceptance written and committed, then the file found empty (a rename that reached the
    disk before its bytes): resume writes the journal's text back, byte for byte, and says so."""
    env = agent_env(tmp_path)
    done = start(project, env, "recorded:task_status:complete")
    assert done.returncode == -9, done.stdout + done.stderr
    wanted = accepted_text(project)
    (project / TASK1).write_bytes(b"")
    again = resume(project, env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{TASK1}: restored from the run's journal (its bytes were lost in a crash)" in again.stderr
    assert (project / TASK1).read_text() == wanted
    completed(project)


def test_a_lost_write_of_an_earlier_step_is_redone_and_committed(project, tmp_path):
    """Task 1 accepted, then the run killed in task 2's coder step; task 1's file found as it was
    before the acceptance (the rename lost): resume writes the acceptance again and commits it."""
    env = agent_env(tmp_path)
    done = start(project, env, "event:step_finished:coder@2")
    assert done.returncode == -9, done.stdout + done.stderr
    pre = git(project, "log", "--format=%H", "--", str(TASK1)).split()
    old = subprocess.run(["git", "show", f"{pre[1]}:{TASK1}"], cwd=project, capture_output=True).stdout
    assert b'"status": "complete"' not in old
    (project / TASK1).write_bytes(old)
    git(project, "add", str(TASK1))
    git(project, "commit", "-q", "-m", "the disk lost the acceptance's rename")
    again = resume(project, env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{TASK1}: restored from the run's journal (its last write was lost in a crash)" in again.stderr
    assert "task files restored from its journal" in git(project, "log", "--format=%s")
    completed(project)


def test_a_file_changed_since_is_left_alone(project, tmp_path):
    """A person's edit after the run's write is not a lost write: resume keeps it."""
    env = agent_env(tmp_path)
    done = start(project, env, "event:step_finished:coder@2")
    assert done.returncode == -9, done.stdout + done.stderr
    edited = (project / TASK1).read_text().replace("\n## 0. Metadata", "\nA note of mine.\n\n## 0. Metadata", 1)
    (project / TASK1).write_text(edited)
    git(project, "commit", "-q", "-am", "my note")
    again = resume(project, env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "restored from the run's journal" not in again.stderr
    assert (project / TASK1).read_text() == edited
    completed(project)


class Recorder:
    def __init__(self) -> None:
        self.calls: list = []

    def before(self, writes):
        self.calls.append(("before", [(p.name, b, t) for p, b, t in writes]))

    def undone(self):
        self.calls.append(("undone",))


def test_a_journaled_change_set_records_first_and_writes_without_fsyncs(tmp_path, monkeypatch):
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("old\n")
    synced = []
    monkeypatch.setattr("os.fsync", lambda fd: synced.append(fd))
    journal = Recorder()
    changes = ChangeSet()
    changes.write(a, "new\n")
    changes.write(b, "created\n")
    with journaled(journal):
        changes.apply()
    assert journal.calls == [("before", [("a.md", b"old\n", "new\n"), ("b.md", None, "created\n")])]
    assert synced == [] and a.read_text() == "new\n" and b.read_text() == "created\n"
    changes.rollback()  # the commit after it failed: the files put back, the journal told
    assert journal.calls[-1] == ("undone",) and a.read_text() == "old\n" and not b.exists()
    synced.clear()
    plain = ChangeSet()
    plain.write(a, "again\n")
    plain.apply()  # outside `journaled`: each file fsynced, and its folder
    assert len(synced) == 2


def test_a_change_set_that_deletes_is_not_journaled(tmp_path, monkeypatch):
    a, gone = tmp_path / "a.md", tmp_path / "gone.md"
    gone.write_text("x\n")
    journal = Recorder()
    changes = ChangeSet()
    changes.write(a, "new\n")
    changes.remove(gone)
    with journaled(journal):
        changes.apply()
    assert journal.calls == [] and not gone.exists()
