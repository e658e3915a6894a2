"""Faults around a shared queue: the git daemon killed mid-run and started again (workers wait, keep
their work, finish; nothing lost), a person pushing hand edits to task files meanwhile (kept), and a
real conflict in code (left on `specflux/conflict/<task>`, the task blocked, never forced)."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import git
from patience import patience
from remote_kit import (Daemon, claims_on, clone, coder, completions, env_for, log_of, make_origin, remote_status,
                        specflux, worker)


def _wait_for(path: Path, timeout: float = 60) -> None:
    end = time.time() + patience(timeout)
    while not path.exists():
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.05)


def test_the_remote_going_away_mid_run_and_a_persons_push_meanwhile_lose_nothing(tmp_path):
    bare = make_origin(tmp_path, [("One", []), ("Two", []), ("Three", []), ("Four", [])], lease_s=20)
    env = env_for(tmp_path, {f"coder:{t}": [coder(t, 1.5)] for t in "1234"})
    person = clone(str(bare), tmp_path / "person")  # over the file path: the daemon is not their only way in
    daemon = Daemon(tmp_path).start()
    try:
        a, b = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "b")
        procs = [worker(a, "wa", env), worker(b, "wb", env)]
        _wait_for(tmp_path / "agent-state" / "coder-1-1.txt")
        daemon.kill()  # mid-run: sessions in flight, integrations to come
        task_file = person / ".specflux" / "task-states" / "task-4-state.md"
        text = task_file.read_text()
        task_file.write_text(text.replace("(describe the task in 2-5 sentences)", "Four, as a person wrote it by hand."))
        git(person, "commit", "-q", "-am", "hand edit to task 4")
        git(person, "push", "-q", "origin", "main")
        said, end = "", time.time() + 20.0
        while "waiting for the remote since" not in said and time.time() < end:  # as another terminal sees it
            said = specflux(a, "flow", "status", check=False).stdout + specflux(b, "flow", "status", check=False).stdout
            time.sleep(0.2)
        assert "waiting for the remote since" in said and "work kept locally" in said, said
        assert all(p.poll() is None for p in procs)  # waiting, not failing
        daemon.start()
        codes = [p.wait(timeout=180) for p in procs]
    finally:
        daemon.kill()
    logs = log_of(a, "wa") + log_of(b, "wb")
    assert codes == [0, 0], logs
    assert "waiting for the remote origin" in logs and "answers again" in logs
    for task in "1234":
        assert remote_status(bare, task) == "complete", logs
        assert completions(bare, task) == 1, (task, logs)
    assert "Four, as a person wrote it by hand." in git(bare, "show", "main:.specflux/task-states/task-4-state.md")
    assert "hand edit to task 4" in git(bare, "log", "main", "--format=%s")
    assert claims_on(bare) == []


def test_a_real_conflict_in_code_is_left_on_a_branch_and_the_task_blocked(tmp_path):
    bare = make_origin(tmp_path, [("Apples", []), ("Pears", [])])
    env = env_for(tmp_path, {"coder:1": [{**coder("1", 1.0), "write": {"NOTES.md": "apples\n"}}],
                             "coder:2": [{**coder("2", 1.0), "write": {"NOTES.md": "pears\n"}}]})
    a, b = clone(str(bare), tmp_path / "a"), clone(str(bare), tmp_path / "b")
    procs = [worker(a, "wa", env), worker(b, "wb", env)]
    codes = sorted(p.wait(timeout=180) for p in procs)
    logs = log_of(a, "wa") + log_of(b, "wb")
    assert codes == [0, 1], logs
    statuses = sorted(remote_status(bare, t) for t in "12")
    assert statuses == ["blocked", "complete"], logs
    loser = "1" if remote_status(bare, "1") == "blocked" else "2"
    winner = "2" if loser == "1" else "1"
    assert git(bare, "show", "main:NOTES.md") == ("apples\n" if winner == "1" else "pears\n")
    kept = git(bare, "show", f"specflux/conflict/{loser}:NOTES.md")
    assert kept == ("apples\n" if loser == "1" else "pears\n")  # the loser's work, not forced, kept
    assert f"merge conflict with origin/main in NOTES.md; the work is on the branch specflux/conflict/{loser}" in logs
    subjects = git(bare, "log", "main", "--format=%s")
    assert f"task {loser}: blocked — merge conflict" in subjects
    assert completions(bare, winner) == 1 and completions(bare, loser) == 0
    assert claims_on(bare) == []
