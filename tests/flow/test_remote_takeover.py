"""Workers that die or stall: 8 workers started at once on one task run its agent once; `kill -9` of a
worker leaves a claim that expires and another worker takes over and runs the task again from what is
on the remote; a worker that was stopped past its lease finds its claim gone and drops its result."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from conftest import git
from patience import patience
from remote_kit import (Daemon, claims_on, clone, coder, completions, env_for, log_of, make_origin, remote_status,
                        worker)


def _wait_for(path: Path, timeout: float = 60) -> None:
    end = time.time() + patience(timeout)
    while not path.exists():
        assert time.time() < end, f"{path} never appeared"
        time.sleep(0.05)


def test_eight_workers_started_at_once_on_one_task_run_its_agent_once(tmp_path):
    bare = make_origin(tmp_path, [("Only", [])])
    env = env_for(tmp_path, {"coder:1": [coder("1", 1.0)]})
    with Daemon(tmp_path) as daemon:
        clones = [clone(daemon.url("origin.git"), tmp_path / f"c{i}") for i in range(8)]
        procs = [worker(c, f"w{i}", env) for i, c in enumerate(clones)]
        codes = [p.wait(timeout=180) for p in procs]
    logs = "".join(log_of(c, f"w{i}") for i, c in enumerate(clones))
    assert codes == [0] * 8, logs
    assert (tmp_path / "agent-state" / "coder-1.count").read_text() == "1", logs
    assert logs.count("task 1: claimed by") == 1 and logs.count("integrated into origin/main") == 1
    assert remote_status(bare, "1") == "complete" and completions(bare, "1") == 1
    assert claims_on(bare) == []


def test_a_killed_workers_claim_expires_and_another_worker_takes_it_over(tmp_path):
    bare = make_origin(tmp_path, [("Slow", []), ("After", ["1"])], lease_s=2, skew_s=0.5)
    env = env_for(tmp_path, {"coder:1": [coder("1", 60), coder("1")], "coder:2": [coder("2")]})
    with Daemon(tmp_path) as daemon:
        a, b = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "b")
        first = worker(a, "wa", env)
        _wait_for(tmp_path / "agent-state" / "coder-1-1.txt")  # its agent is at work on task 1
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        assert [r.rsplit("/", 1)[1] for r in claims_on(bare)] == ["1"]  # left behind, live for a while yet
        began = time.time()
        second = worker(b, "wb", env)
        assert second.wait(timeout=120) == 0, log_of(b, "wb")
    log = log_of(b, "wb")
    assert "task 1: the claim of wa" in log and "is stale" in log and "taking it over" in log
    assert time.time() - began >= 1.0  # it waited for the lease to run out
    assert remote_status(bare, "1") == remote_status(bare, "2") == "complete"
    assert completions(bare, "1") == 1 and completions(bare, "2") == 1
    assert claims_on(bare) == []
    assert (tmp_path / "agent-state" / "coder-1.count").read_text() == "2"  # once more, by wb
    assert "specflux/work/1" in git(a, "branch", "--list", "specflux/*")  # the killed worker's work stays local


def test_a_worker_stopped_past_its_lease_finds_its_claim_taken_and_drops_its_result(tmp_path):
    bare = make_origin(tmp_path, [("Contested", [])], lease_s=2, skew_s=0.5)
    env = env_for(tmp_path, {"coder:1": [coder("1", 4.0), coder("1", 3.0)]})
    a, b = clone(str(bare), tmp_path / "a"), clone(str(bare), tmp_path / "b")
    first = worker(a, "wa", env)
    _wait_for(tmp_path / "agent-state" / "coder-1-1.txt")
    os.killpg(first.pid, signal.SIGSTOP)  # the machine hangs: no renewals
    try:
        second = worker(b, "wb", env)
        _wait_for(tmp_path / "agent-state" / "coder-1-2.txt")  # wb took the claim over and works
    finally:
        os.killpg(first.pid, signal.SIGCONT)  # wa comes back while wb holds the claim
    assert second.wait(timeout=120) == 0, log_of(b, "wb")
    assert first.wait(timeout=120) == 1, log_of(a, "wa")
    log = log_of(a, "wa")
    assert "taken over by wb" in log and "its result is dropped, not integrated" in log, log
    assert remote_status(bare, "1") == "complete" and completions(bare, "1") == 1
    assert claims_on(bare) == []
    assert "specflux/dropped/1/" in git(a, "branch", "--list", "specflux/*")
