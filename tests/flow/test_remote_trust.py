"""The queue checks the remote it builds on (issue 23, deliverable 5; issue 24's remote points), each
against a real `git daemon` on loopback with workers as processes of their own: a coder that clones
the remote and pushes "task 2 complete" to the queue branch, or deletes its claim ref; a claim for a
task that does not exist; `claims release` of a live claim; a second worker in one clone; sessions
whose usage is unknown; a worker that waits."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from conftest import git
from patience import patience
from remote_kit import (Daemon, claims_on, clone, coder, completions, env_for, log_of, make_origin, remote_status,
                        specflux, worker)

PY = shlex.quote(sys.executable)


def _until(what, timeout: float = 90, why: str = "") -> None:
    end = time.time() + patience(timeout)
    while not what():
        assert time.time() < end, why or "the awaited thing never happened"
        time.sleep(0.05)


def _in_log(repo: Path, name: str, text: str) -> bool:
    path = repo.parent / f"{name}.log"
    return path.exists() and text in path.read_text()


def _forge(tmp: Path, url: str, task: str) -> str:
    """A shell line that clones the remote elsewhere and pushes task `task` complete, as an agent could."""
    evil = tmp / f"evil-{task}"
    return (f"git clone -q {url} {evil} && git -C {evil} config user.name Agent && git -C {evil} config user.email "
            f"agent@example.com && {PY} -m specflux.cli --root {evil} complete {task} --summary forged && "
            f"git -C {evil} push -q origin HEAD:main")


def test_a_direct_push_of_task_2_complete_is_named_and_holds_its_dependents_until_a_person_confirms_it(tmp_path):
    bare = make_origin(tmp_path, [("Apples", []), ("Pears", []), ("Salad", ["2"])])
    with Daemon(tmp_path) as daemon:
        url = daemon.url("origin.git")
        env = env_for(tmp_path, {"coder:1": [coder("1", sh=_forge(tmp_path, url, "2"))], "coder:3": [coder("3")]})
        a = clone(url, tmp_path / "a")
        first = worker(a, "wa", env)
        assert first.wait(timeout=180) == 1, log_of(a, "wa")  # a person is needed: said, and exit 1
        log = log_of(a, "wa")
        assert remote_status(bare, "1") == remote_status(bare, "2") == "complete"
        assert remote_status(bare, "3") == "pending" and not (tmp_path / "agent-state" / "coder-3.count").exists(), log
        assert "task 3 waits for task 2, complete on origin/main but unconfirmed" in log, log
        assert "no integration that held its claim completed it" in log and "task 2: complete — forged" in log
        assert "specflux claims confirm 2" in log
        status = json.loads(specflux(a, "flow", "status", "--remote", "origin", "--json").stdout)
        assert list(status["unconfirmed"]) == ["2"]  # task 1 was integrated: its record vouches for it
        text = specflux(a, "flow", "status", "--remote", "origin").stdout
        assert "2 complete (1 unconfirmed)" in text and "task 2: no integration that held its claim" in text, text
        listed = specflux(a, "claims").stdout
        assert "task 2: no integration that held its claim" in listed and "specflux claims confirm 2" in listed
        done = specflux(a, "claims", "confirm", "2").stdout
        assert "confirmed task 2's completion on origin/main" in done and "Worker <worker@example.com>" in done
        assert git(bare, "for-each-ref", "--format=%(refname)", "refs/specflux/done/").split() == \
            ["refs/specflux/done/1", "refs/specflux/done/2"]
        again = worker(a, "wa2", env)
        assert again.wait(timeout=180) == 0, log_of(a, "wa2")
        assert remote_status(bare, "3") == "complete" and completions(bare, "3") == 1
        assert json.loads(specflux(a, "flow", "status", "--remote", "origin", "--json").stdout)["unconfirmed"] == {}
        refused = specflux(a, "claims", "confirm", "9", check=False)
        assert refused.returncode == 1 and "no task 9 on origin/main" in refused.stderr


def test_a_completion_set_back_by_a_person_and_pushed_complete_again_is_unconfirmed(tmp_path):
    bare = make_origin(tmp_path, [("Apples", []), ("Pie", ["1"])])
    with Daemon(tmp_path) as daemon:
        url = daemon.url("origin.git")
        env = env_for(tmp_path, {"coder:1": [coder("1")], "coder:2": [coder("2")]})
        a, person = clone(url, tmp_path / "a"), clone(url, tmp_path / "person")
        assert worker(a, "wa", env, "--lease", "3").wait(timeout=180) == 0  # tasks 1 and 2 integrated
        git(person, "pull", "-q")
        for status in ("pending", "complete"):  # undone by a person, then done again by hand: no integration
            specflux(person, "set", "1", "--status", status)
            git(person, "commit", "-qam", f"task 1: {status} by hand", "--allow-empty")
            git(person, "push", "-q", "origin", "main")
        doubtful = json.loads(specflux(person, "flow", "status", "--remote", "origin", "--json").stdout)["unconfirmed"]
    assert list(doubtful) == ["1"] and "it was pending after its completion record" in doubtful["1"], doubtful
    assert "integrated by wa" in doubtful["1"]
    assert remote_status(bare, "2") == "complete"


def test_a_deleted_claim_ref_is_claimed_again_and_the_work_goes_on(tmp_path):
    bare = make_origin(tmp_path, [("Slow", [])], lease_s=2, skew_s=0.5, poll_s=0.2)
    with Daemon(tmp_path) as daemon:
        url = daemon.url("origin.git")
        delete = f"git push -q {url} :refs/specflux/claims/1 && sleep 3"  # then past a renewal or two
        env = env_for(tmp_path, {"coder:1": [coder("1", sh=delete)]})
        a = clone(url, tmp_path / "a")
        proc = worker(a, "wa", env)
        assert proc.wait(timeout=180) == 0, log_of(a, "wa")
    log = log_of(a, "wa")
    assert "task 1: its claim was deleted on the remote by something other than an integration" in log, log
    assert "claimed it again, the work goes on" in log and "dropped" not in log
    assert (tmp_path / "agent-state" / "coder-1.count").read_text() == "1"  # its work was not done twice
    assert remote_status(bare, "1") == "complete" and completions(bare, "1") == 1 and claims_on(bare) == []


def test_a_claim_for_a_task_that_does_not_exist_is_reported_and_cleared(tmp_path):
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.transport import Remote

    bare = make_origin(tmp_path, [("Only", [])])
    with Daemon(tmp_path) as daemon:
        a = clone(daemon.url("origin.git"), tmp_path / "a")
        assert Claims(Remote(a, "origin", "main"), lease_s=600).create("9", "ghost", "run-g") is not None  # live
        assert Claims(Remote(a, "origin", "main"), lease_s=600).create("1", "wb", "run-b") is not None
        listed = specflux(a, "claims").stdout
        assert "cleared the claim of ghost (run run-g) on task 9: there is no task 9 on origin/main" in listed
        assert claims_on(bare) == ["refs/specflux/claims/1"]  # the claim on a real task stays
        released = json.loads(git(bare, "log", "-1", "--format=%s", "refs/specflux/released/9"))
        assert released["worker"] == "ghost" and released["why"] == "no task 9 on origin/main"
        assert "cleared" not in specflux(a, "claims").stdout


def test_release_of_a_live_claim_says_whose_work_it_drops_and_needs_force(tmp_path):
    bare = make_origin(tmp_path, [("Slow", [])], lease_s=3)
    with Daemon(tmp_path) as daemon:
        url = daemon.url("origin.git")
        env = env_for(tmp_path, {"coder:1": [coder("1", 6.0), coder("1")]})
        a, b = clone(url, tmp_path / "a"), clone(url, tmp_path / "b")
        proc = worker(a, "wa", env)
        _until(lambda: (tmp_path / "agent-state" / "coder-1-1.txt").exists())
        refused = specflux(b, "claims", "release", "1", check=False)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "task 1's claim is live: wa (run run-" in refused.stderr and "drops that worker's work" in refused.stderr
        assert "specflux claims release 1 --force" in refused.stderr
        assert claims_on(bare) == ["refs/specflux/claims/1"]
        forced = specflux(b, "claims", "release", "1", "--force").stdout
        assert forced.startswith("released the claim of wa (run run-") and "its worker's work on the task is dropped" in forced
        proc.wait(timeout=180)
    log = log_of(a, "wa")
    assert "its claim was released by Worker <worker@example.com>" in log and "its result is dropped" in log, log
    assert remote_status(bare, "1") == "pending" and claims_on(bare) == []


def test_a_second_worker_in_the_same_clone_is_refused_naming_the_first(tmp_path):
    bare = make_origin(tmp_path, [("Slow", []), ("Next", [])])
    with Daemon(tmp_path) as daemon:
        env = env_for(tmp_path, {"coder:1": [coder("1", 4.0)], "coder:2": [coder("2")]})
        a = clone(daemon.url("origin.git"), tmp_path / "a")
        first = worker(a, "wa", env)
        _until(lambda: (tmp_path / "agent-state" / "coder-1-1.txt").exists())
        for extra in ((), ("--parallel", "2")):
            second = worker(a, "wb", env, *extra)
            assert second.wait(timeout=60) == 1
            said = log_of(a, "wb")
            assert f"a worker already runs in this clone: worker wa (pid {first.pid}) on origin/main" in said, said
            assert "git worktree" not in said and "Traceback" not in said
        assert first.wait(timeout=180) == 0, log_of(a, "wa")
    assert remote_status(bare, "1") == remote_status(bare, "2") == "complete"
    assert completions(bare, "1") == completions(bare, "2") == 1
    assert (tmp_path / "agent-state" / "coder-1.count").read_text() == "1"


def test_flow_status_remote_shows_unknown_usage_as_unknown_never_0(tmp_path):
    make_origin(tmp_path, [("Only", [])])
    with Daemon(tmp_path) as daemon:
        env = env_for(tmp_path, {"coder:1": [coder("1")]})  # the fake agent prints no usage at all
        a = clone(daemon.url("origin.git"), tmp_path / "a")
        assert worker(a, "wa", env).wait(timeout=180) == 0, log_of(a, "wa")
        status = specflux(a, "flow", "status", "--remote", "origin")
        metrics = json.loads(specflux(a, "flow", "status", "--remote", "origin", "--json").stdout)["metrics"]
    assert metrics["usageUnknown"] >= 2  # the coder's session and the reviewer's
    assert "tokens unknown" in status.stdout and "0 input" not in status.stdout, status.stdout
    assert "cost unknown" in status.stdout


def test_a_worker_says_who_holds_its_ready_task_and_with_wait_waits_for_the_chain_to_open(tmp_path):
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.transport import Remote

    bare = make_origin(tmp_path, [("Base", []), ("Top", ["1"]), ("Side", [])], poll_s=0.2)
    with Daemon(tmp_path) as daemon:
        url = daemon.url("origin.git")
        env = env_for(tmp_path, {"coder:2": [coder("2")], "coder:3": [coder("3")]})
        a, person = clone(url, tmp_path / "a"), clone(url, tmp_path / "person")
        specflux(person, "complete", "1", "--summary", "done by hand")  # a completion no integration made
        git(person, "push", "-q", "origin", "main")
        Claims(Remote(person, "origin", "main"), lease_s=600).create("3", "ghost", "run-g")  # live for 10 minutes
        proc = worker(a, "wa", env, "--wait", "120")
        _until(lambda: _in_log(a, "wa", "task 3 is claimed by ghost (run run-g, lease"), why=log_of(a, "wa"))
        assert "nothing else is ready; waiting for it to be integrated or released" in log_of(a, "wa")
        specflux(person, "claims", "release", "3", "--force")
        _until(lambda: _in_log(a, "wa", "task 3: complete, integrated"), why=log_of(a, "wa"))
        _until(lambda: _in_log(a, "wa", "waiting up to 120 s for that to change"), why=log_of(a, "wa"))
        assert "task 2 waits for task 1, complete on origin/main but unconfirmed" in log_of(a, "wa")
        assert proc.poll() is None  # still there, waiting for the chain to open
        specflux(person, "claims", "confirm", "1")
        assert proc.wait(timeout=120) == 0, log_of(a, "wa")
    assert remote_status(bare, "2") == remote_status(bare, "3") == "complete"
    assert "stopped: nothing left to do on origin/main" in log_of(a, "wa")


def test_a_worker_clears_a_stale_claim_for_a_task_that_does_not_exist(tmp_path):
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.transport import Remote

    bare = make_origin(tmp_path, [("Only", [])])
    with Daemon(tmp_path) as daemon:
        a = clone(daemon.url("origin.git"), tmp_path / "a")
        # a claim whose lease ran out before the worker starts (a worker that drained the queue
        # within a short lease's skew once stopped before the claim was stale, and left it)
        assert Claims(Remote(a, "origin", "main"), lease_s=-1, skew_s=0).create("8", "gone", "run-x") is not None
        env = env_for(tmp_path, {"coder:1": [coder("1")]})
        assert worker(a, "wa", env).wait(timeout=180) == 0, log_of(a, "wa")
    assert "cleared the stale claim of gone (run run-x) on task 8: there is no task 8 on origin/main" in log_of(a, "wa")
    assert claims_on(bare) == [] and remote_status(bare, "1") == "complete"


def test_wait_is_bounded_and_says_how_long_it_waited(tmp_path):
    bare = make_origin(tmp_path, [("Base", []), ("Top", ["1"])], poll_s=0.2)
    with Daemon(tmp_path) as daemon:
        a, person = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "person")
        specflux(person, "complete", "1", "--summary", "done by hand")
        git(person, "push", "-q", "origin", "main")
        proc = worker(a, "wa", env_for(tmp_path, {}), "--wait", "1")
        assert proc.wait(timeout=120) == 1, log_of(a, "wa")
    log = log_of(a, "wa")
    assert "waiting up to 1 s for that to change" in log and "stopped: waited 1 s and nothing opened on origin/main" in log
    assert "specflux claims confirm 1" in log and remote_status(bare, "2") == "pending"
