"""Workers on separate clones sharing one queue through a git remote (CONTRACT section 8): each a
process of its own running `flow start --all --remote origin` with the fake agent CLI, over a file
path and over a real `git daemon` on loopback."""

from __future__ import annotations

import json

from conftest import git
from remote_kit import (Daemon, claims_on, clone, coder, completions, env_for, log_of, make_origin, remote_status,
                        specflux, worker)


def test_two_workers_share_a_queue_each_task_done_once_and_dependents_wait_for_the_remote(tmp_path):
    bare = make_origin(tmp_path, [("Apples", []), ("Pears", []), ("Index", ["1"]), ("Plums", [])])
    env = env_for(tmp_path, {"coder:1": [coder("1", 1.0)], "coder:2": [coder("2", 1.0)], "coder:3": [coder("3")],
                             "coder:4": [coder("4", 0.5)]})
    a, b = clone(str(bare), tmp_path / "a"), clone(str(bare), tmp_path / "b")
    procs = [worker(a, "wa", env), worker(b, "wb", env)]
    codes = [p.wait(timeout=180) for p in procs]
    assert codes == [0, 0], log_of(a, "wa") + log_of(b, "wb")
    logs = log_of(a, "wa") + log_of(b, "wb")
    for task in "1234":
        assert remote_status(bare, task) == "complete", logs
        assert completions(bare, task) == 1, (task, logs)
        assert git(bare, "show", f"main:out/{task}.txt") == f"task {task}\n"
    assert claims_on(bare) == []
    claimed = {t: w for w in ("wa", "wb") for line in log_of(tmp_path / w[1], w).splitlines()
               for t in "1234" if f"task {t}: claimed by {w}" in line}
    assert set(claimed) == set("1234") and set(claimed.values()) == {"wa", "wb"}, logs
    context = (tmp_path / "agent-state" / "coder-3-1.txt").read_text()
    assert "out/1.txt written" in context  # task 1's chain output reached task 3 through the remote
    status = json.loads(specflux(a, "flow", "status", "--remote", "origin", "--json").stdout)
    assert status["claims"] == [] and all(status["tasks"][t] == "complete" for t in "1234")
    assert status["metrics"]["tasksCompleted"] == 4 and status["metrics"]["totalAttempts"] == 4
    assert len(status["runs"]) == 4
    text = specflux(b, "flow", "status", "--remote", "origin").stdout
    assert "queue on origin/main" in text and "4 complete" in text and "4 run(s) integrated" in text
    assert "no claims on origin" in text


def test_two_upstreams_integrated_by_two_workers_both_reach_their_dependent_over_git_daemon(tmp_path):
    bare = make_origin(tmp_path, [("Apples", []), ("Pears", []), ("Salad", ["1", "2"])])
    env = env_for(tmp_path, {"coder:1": [coder("1", 1.0)], "coder:2": [coder("2", 1.0)], "coder:3": [coder("3")]})
    with Daemon(tmp_path) as daemon:
        a, b = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "b")
        procs = [worker(a, "wa", env), worker(b, "wb", env)]
        codes = [p.wait(timeout=180) for p in procs]
    logs = log_of(a, "wa") + log_of(b, "wb")
    assert codes == [0, 0], logs
    assert all(remote_status(bare, t) == "complete" and completions(bare, t) == 1 for t in "123"), logs
    # both workers wired their chain output into task 3's file on their own branches; the task-file
    # merge driver kept both when the second integration merged the first
    salad = git(bare, "show", "main:.specflux/task-states/task-3-state.md")
    assert "### From Task #1" in salad and "### From Task #2" in salad
    context = (tmp_path / "agent-state" / "coder-3-1.txt").read_text()
    assert "out/1.txt written" in context and "out/2.txt written" in context


def test_one_clone_with_parallel_workers_in_worktrees_beside_a_worker_elsewhere(tmp_path):
    bare = make_origin(tmp_path, [(f"Task {n}", []) for n in range(1, 6)])
    env = env_for(tmp_path, {f"coder:{t}": [coder(t, 1.5)] for t in "12345"})
    a, b = clone(str(bare), tmp_path / "a"), clone(str(bare), tmp_path / "b")
    procs = [worker(a, "wa", env, "--parallel", "2"), worker(b, "wb", env)]
    codes = [p.wait(timeout=180) for p in procs]
    logs = log_of(a, "wa") + log_of(b, "wb")
    assert codes == [0, 0], logs
    assert all(remote_status(bare, t) == "complete" and completions(bare, t) == 1 for t in "12345"), logs
    holders = {line.split("claimed by ")[1].split(" ")[0] for line in logs.splitlines() if "claimed by" in line}
    assert {"wa/1", "wa/2"} <= holders, logs
    spans = sorted(tuple(map(float, (tmp_path / "agent-state" / f"coder-{t}-1.times").read_text().split()[:2]))
                   for t in "12345")
    assert any(spans[i + 1][0] < spans[i][1] for i in range(len(spans) - 1))  # sessions at once
    assert git(a, "worktree", "list").count("\n") == 1  # the workers' worktrees are gone
    assert git(a, "for-each-ref", "refs/specflux/track/", "refs/specflux/seen/wa/") == ""  # and their refs
    assert git(a, "rev-parse", "main") == git(bare, "rev-parse", "main")  # and the clone's branch is up to date
    assert claims_on(bare) == []


def test_a_config_write_waits_out_another_gits_lock_on_the_shared_config(tmp_path, monkeypatch):
    """Worktrees share one .git/config and git fails a write at once while another git holds its
    lock: a crew's workers registering the merge driver together once failed that way."""
    import time

    import pytest

    from specflux.base.errors import GitError
    from specflux.flow.remote.transport import Remote

    bare = make_origin(tmp_path, [("Apples", [])])
    a = clone(str(bare), tmp_path / "a")
    lock = a / ".git" / "config.lock"
    lock.write_text("")
    waits = []
    real_sleep = time.sleep

    def the_other_git_finishes(seconds):  # while the writer waits (an event, not a time)
        waits.append(seconds)
        lock.unlink(missing_ok=True)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", the_other_git_finishes)
    Remote(a, "origin", "main").set_config("merge.specflux.name", "held a moment")
    monkeypatch.setattr(time, "sleep", real_sleep)
    assert waits  # it did wait, and wrote once the lock was gone
    assert git(a, "config", "merge.specflux.name").strip() == "held a moment"
    lock.write_text("")  # held for good: an error naming the setting, after a bounded wait
    with pytest.raises(GitError, match="config merge.specflux.name"):
        Remote(a, "origin", "main").set_config("merge.specflux.name", "never")
    lock.unlink()
    assert git(a, "config", "merge.specflux.name").strip() == "held a moment"
