"""How a worker spends its round trips (issue 26): a claim is pushed with the lease that the branch
has not moved since the worker judged the task to do, so it needs no second fetch; a claim lost to
another worker moves it on to the next task at once; a worker's fetches start no `git maintenance`
(it runs once, when the worker stops). Over a real `git daemon` on loopback."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from conftest import git
from remote_kit import Daemon, claims_on, clone, coder, env_for, log_of, make_origin, remote_status, worker


def test_a_claim_is_refused_when_the_branch_moved_since_the_worker_judged_the_task(tmp_path):
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.transport import Remote

    bare = make_origin(tmp_path, [("Apples", []), ("Pears", [])])
    with Daemon(tmp_path) as daemon:
        a, b = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "b")
        remote = Remote(a, "origin", "main", give_up_s=30)
        claims = Claims(remote, lease_s=60)
        remote.fetch()
        seen = remote.tip()
        git(b, "commit", "-q", "--allow-empty", "-m", "someone pushes to the queue's branch")
        git(b, "push", "-q", "origin", "HEAD:main")
        assert claims.create("1", "wa", "run-a", tip=seen) is None
        assert claims.lost_to_branch  # the branch moved: look again, not "another worker has it"
        assert claims_on(bare) == []  # one atomic push: no claim made
        assert git(bare, "rev-parse", "main") == git(b, "rev-parse", "HEAD")  # and the branch left as it was

        remote.fetch()
        made = claims.create("1", "wa", "run-a", tip=remote.tip())
        assert made is not None and claims_on(bare) == ["refs/specflux/claims/1"]
        assert (made.worker, made.run, made.task) == ("wa", "run-a", "1")
        assert git(bare, "rev-parse", "refs/specflux/claims/1").strip() == made.sha
        assert claims.create("1", "wb", "run-b", tip=remote.tip()) is None
        assert not claims.lost_to_branch  # taken by another: the branch is where it was


class _Claimed(Exception):
    pass


def test_a_claim_lost_to_another_worker_moves_on_to_the_next_task_at_once(tmp_path, monkeypatch):
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.transport import Remote
    from specflux.flow.remote.worker import Options, Worker
    from specflux.surface.tasks import open_manager

    make_origin(tmp_path, [("Apples", []), ("Pears", []), ("Plums", [])])
    with Daemon(tmp_path) as daemon:
        a, b = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "b")
        rival = Claims(Remote(b, "origin", "main", give_up_s=30), lease_s=60)

        class Probe(Worker):
            def _work(self, task, claim, run_id, checked=False):
                self.took = (task, claim.worker)
                raise _Claimed

        probe = Probe(a, Options(worker="wa", poll_s=0.3, give_up_s=30), object(), open_manager=lambda: open_manager(str(a)))
        fetches, naps = [], []
        real_fetch = probe.remote.fetch

        def fetch():
            real_fetch()
            fetches.append(1)
            if len(fetches) == 1:  # another worker takes task 1 just after this worker looked
                assert rival.create("1", "wb", "run-b") is not None

        monkeypatch.setattr(probe.remote, "fetch", fetch)
        monkeypatch.setattr("specflux.flow.remote.worker.time.sleep", naps.append)
        lines = []
        probe.say = lines.append
        with pytest.raises(_Claimed):
            probe.run()
    assert probe.took in (("2", "wa"), ("3", "wa")), lines  # one of the next ones (_spread)
    assert len(fetches) == 1 and naps == [], (fetches, naps, lines)  # no sleep, no second fetch in between
    assert "task 1: another worker claimed it first" in lines


def test_workers_that_lost_a_claim_spread_over_the_next_ready_tasks(monkeypatch):
    """The next try after a lost race is one of the next SPREAD ready tasks, at random, and every
    candidate is still tried once; takeovers of stale claims stay after the ready tasks."""
    from specflux.flow.remote import worker

    candidates = ["1", "2", "3", "4", "5", "6", "stale-9"]
    monkeypatch.setattr(worker.random, "randrange", lambda n: n - 1)  # the farthest allowed
    worker._spread(candidates, 1, 6)
    assert candidates == ["1", "5", "2", "3", "4", "6", "stale-9"]  # within the next SPREAD = 4
    worker._spread(candidates, 5, 6)  # the last ready one: nothing to spread
    worker._spread(candidates, 6, 6)  # takeovers: never moved ahead
    assert candidates == ["1", "5", "2", "3", "4", "6", "stale-9"]
    monkeypatch.setattr(worker.random, "randrange", lambda n: 0)
    worker._spread(candidates, 2, 6)
    assert sorted(candidates) == ["1", "2", "3", "4", "5", "6", "stale-9"] and candidates[2] == "2"


@pytest.fixture(scope="module")
def traced_worker(tmp_path_factory) -> tuple[Path, list[str]]:
    """One worker through a queue of one task, with `GIT_TRACE`: its clone and the git commands it
    ran, in order (`fetch ...`, without the leading `git `). Read by the tests below, each for its part."""
    tmp_path = tmp_path_factory.mktemp("traced-worker")
    bare = make_origin(tmp_path, [("Apples", [])])
    trace = tmp_path / "trace.txt"
    env = {**env_for(tmp_path, {"coder:1": [coder("1")]}), "GIT_TRACE": str(trace)}
    with Daemon(tmp_path) as daemon:
        a = clone(daemon.url("origin.git"), tmp_path / "a")
        code = worker(a, "wa", env).wait(timeout=180)
    assert code == 0, log_of(a, "wa")
    assert remote_status(bare, "1") == "complete"
    return a, [line.split("trace: built-in: git ", 1)[1] for line in trace.read_text().splitlines()
               if "trace: built-in: git " in line]


def test_a_worker_fetches_once_a_task_and_runs_git_maintenance_only_when_it_stops(traced_worker):
    a, lines = traced_worker
    fetches = [i for i, line in enumerate(lines) if line.startswith("fetch ") and "origin +refs/heads/main:" in line]
    # one to find the task (the claim needs no second look), one to integrate, one to find nothing left
    assert len(fetches) == 3, "\n".join(lines)
    assert all("--no-auto-maintenance" in lines[i] for i in fetches)
    upkeep = [i for i, line in enumerate(lines) if line.startswith("maintenance run")]
    assert len(upkeep) == 1 and upkeep[0] > fetches[-1], "\n".join(lines)  # once, as the worker stops (not
    assert lines[upkeep[0]].startswith("maintenance run --auto --quiet")  # after its run's history commit too)
    assert os.path.exists(a / ".git") and git(a, "status", "--porcelain", "--untracked-files=no") == ""


def test_a_worker_runs_few_git_processes_before_its_first_agent(traced_worker):
    """From its start to its first agent session (whose baseline is the first `status
    --porcelain=v2`), a worker asks git once each where it can: where the repository is, its
    settings, whether the tree is clean; then fetch, check out, claim. The merge driver is written
    at the first integration, and the task's file is known committed (checked out just now)."""
    _, lines = traced_worker
    session = next(i for i, line in enumerate(lines) if line.startswith("status --porcelain=v2"))
    before = Counter(line.split()[0] for line in lines[:session])
    assert before["status"] == 1 and before["rev-parse"] == 1 and before["config"] == 1, "\n".join(lines[:session])
    assert sum(before.values()) <= 11, "\n".join(lines[:session])
    assert any(line.startswith("config --local merge.specflux.driver") for line in lines[session:])


def test_a_worker_waiting_on_another_workers_claim_looks_without_fetching_until_something_changes(tmp_path):
    import time

    bare = make_origin(tmp_path, [("Apples", [])], lease_s=60, poll_s=0.2)  # no renewal while task 1 runs
    env = env_for(tmp_path, {"coder:1": [coder("1", 3.0)]})
    trace = tmp_path / "trace-b.txt"
    with Daemon(tmp_path) as daemon:
        a, b = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "b")
        first = worker(a, "wa", env)
        while claims_on(bare) != ["refs/specflux/claims/1"]:  # wa holds task 1 before wb starts
            assert first.poll() is None, log_of(a, "wa")
            time.sleep(0.05)
        second = worker(b, "wb", {**env, "GIT_TRACE": str(trace)})
        codes = [first.wait(timeout=180), second.wait(timeout=180)]
    assert codes == [0, 0], log_of(a, "wa") + log_of(b, "wb")
    assert remote_status(bare, "1") == "complete"
    assert "task 1 is claimed by wa" in log_of(b, "wb")
    lines = [line.split("trace: built-in: ", 1)[1] for line in trace.read_text().splitlines() if "trace: built-in: git " in line]
    fetches = [line for line in lines if line.startswith("git fetch ") and "+refs/heads/main:" in line]
    # one to find task 1 claimed, one when wa's integration changed the remote (seen by ls-remote): nothing left
    assert len(fetches) == 2, "\n".join(lines)
    assert any(line.startswith("git ls-remote ") for line in lines), "\n".join(lines)
