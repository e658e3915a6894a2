"""Claims as refs on the remote: of racing workers exactly one gets each task, every time, over a
file path and over a real `git daemon`; leases renew and expire; a stale claim is taken over by
compare and swap; `specflux claims` shows and releases them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from conftest import git
from remote_kit import Daemon, clone, env_for, make_origin, specflux

RACER = """
import json, sys, time
from pathlib import Path
from specflux.flow.remote.claims import Claims
from specflux.flow.remote.transport import Remote
root, name, start, rounds, slot = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
claims = Claims(Remote(root, "origin", "main", give_up_s=30), lease_s=60)
won = []
for r in range(rounds):
    time.sleep(max(0.0, start + r * slot - time.time()))
    if claims.create(f"race-{r}", name, f"run-{name}") is not None:
        won.append(r)
print(json.dumps(won))
"""

RACERS = 8


def _race(tmp_path: Path, url: str, rounds: int, slot: float) -> None:
    clones = [clone(url, tmp_path / f"c{i}") for i in range(RACERS)]
    for c in clones:  # each clone's first fetch and its empty tree, before the race
        git(c, "fetch", "-q", "origin")
    start = time.time() + 2.0
    env = env_for(tmp_path, {})
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(c), f"w{i}", str(start), str(rounds), str(slot)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i, c in enumerate(clones)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    won = {f"w{i}": json.loads(out) for i, (out, _) in enumerate(outs)}
    for r in range(rounds):
        winners = [w for w, rs in won.items() if r in rs]
        assert len(winners) == 1, (r, winners)
    refs = git(tmp_path / "origin.git", "for-each-ref", "--format=%(refname) %(contents:subject)", "refs/specflux/claims/")
    assert len(refs.splitlines()) == rounds
    for line in refs.splitlines():
        ref, body = line.split(" ", 1)
        claim = json.loads(body)
        assert set(claim) >= {"worker", "run", "claimedAt", "leaseUntil"}
        assert r"race-" in ref and int(ref.rsplit("-", 1)[1]) in won[claim["worker"]]


def test_eight_workers_racing_for_a_task_one_gets_it_every_time_over_a_file_path(tmp_path):
    make_origin(tmp_path, [("Only", [])])
    _race(tmp_path, str(tmp_path / "origin.git"), rounds=12, slot=0.6)


def test_eight_workers_racing_for_a_task_one_gets_it_every_time_over_git_daemon(tmp_path):
    make_origin(tmp_path, [("Only", [])])
    with Daemon(tmp_path) as daemon:
        _race(tmp_path, daemon.url("origin.git"), rounds=12, slot=0.6)


def test_renewal_takeover_by_compare_and_swap_and_the_claims_command(tmp_path):
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.lease import Lease
    from specflux.flow.remote.transport import Remote

    make_origin(tmp_path, [("Only", [])])
    a, b = clone(str(tmp_path / "origin.git"), tmp_path / "a"), clone(str(tmp_path / "origin.git"), tmp_path / "b")
    ca = Claims(Remote(a, "origin", "main"), lease_s=2.5, skew_s=0.3)
    cb = Claims(Remote(b, "origin", "main"), lease_s=2.5, skew_s=0.3)
    mine = ca.create("1", "wa", "run-a")
    assert mine is not None and cb.create("1", "wb", "run-b") is None
    lost = []
    with Lease(ca, mine, "wa", "run-a", on_lost=lost.append, every_s=0.3) as lease:
        time.sleep(3.5)  # past the first lease: renewals keep it live
        seen = cb.read()["1"]
        assert not cb.stale(seen) and seen.worker == "wa" and lease.renewals >= 3
        assert seen.claimed_at == mine.claimed_at and seen.lease_until > mine.lease_until
    assert cb.swap(mine, "wb", "run-b") is None  # a swap on what the claim no longer is: refused
    time.sleep(3.0)  # no renewals now: the lease runs out
    old = cb.read()["1"]
    assert cb.stale(old)
    rows = json.loads(specflux(b, "claims", "--json").stdout)
    assert [(r["task"], r["worker"], r["run"], r["stale"]) for r in rows] == [("1", "wa", "run-a", True)]
    assert "stale" in specflux(b, "claims").stdout
    taken = cb.swap(old, "wb", "run-b")
    assert taken is not None and taken.worker == "wb"
    with Lease(ca, old, "wa", "run-a", on_lost=lost.append, every_s=0.1) as late:  # the old holder comes back
        time.sleep(1.0)
    assert late.lost and "wb (run run-b)" in late.lost and lost == [late.lost]
    assert specflux(b, "claims", "release", "1", "--force").stdout.startswith("released the claim of wb (run run-b) on task 1")
    assert json.loads(specflux(a, "claims", "--json").stdout) == []
    assert specflux(a, "claims", "release", "1", check=False).returncode != 0


def test_an_integration_whose_claim_was_taken_over_is_refused_and_says_by_whom(tmp_path):
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.integrate import integrate
    from specflux.flow.remote.lease import Lease
    from specflux.flow.remote.transport import Remote

    bare = make_origin(tmp_path, [("Only", [])])
    a, b = clone(str(bare), tmp_path / "a"), clone(str(bare), tmp_path / "b")
    ca, cb = Claims(Remote(a, "origin", "main"), lease_s=60), Claims(Remote(b, "origin", "main"), lease_s=60)
    mine = ca.create("1", "wa", "run-a")
    lease = Lease(ca, mine, "wa", "run-a", every_s=3600)  # no renewal comes before the push
    assert cb.swap(cb.read()["1"], "wb", "run-b") is not None  # taken over (as if the lease had run out)
    (a / "out.txt").write_text("wa's result\n")
    git(a, "add", "out.txt")
    git(a, "commit", "-q", "-m", "wa's result")
    before = git(bare, "rev-parse", "main")
    result = integrate(ca.remote, lease, "1")
    assert result.outcome == "lost" and result.detail == "its claim was taken over by wb (run run-b)"
    assert git(bare, "rev-parse", "main") == before  # the atomic push moved nothing
    assert [r for r in git(bare, "for-each-ref", "--format=%(refname)", "refs/specflux/claims/").split()] == \
        ["refs/specflux/claims/1"]


HOLD = """#!/bin/sh
# pre-receive: the push that finds {folder}/hold waits here (until {folder}/go) while others go through
if mv {folder}/hold {folder}/held 2>/dev/null; then
  touch {folder}/waiting
  i=0; while [ ! -f {folder}/go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
fi
exit 0
"""


def test_an_integration_refused_by_the_remote_mid_push_merges_and_pushes_again_at_once(tmp_path):
    """Two workers pushing at once: the remote takes one, and refuses the other's atomic push as a
    whole (`cannot lock ref 'refs/heads/main'`, every ref `atomic transaction failed`). That
    refusal names the branch, not the claim: the worker merges and pushes again at once, with no
    look at its claim (`ls-remote`) and no wait."""
    import threading

    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.integrate import integrate
    from specflux.flow.remote.lease import Lease
    from specflux.flow.remote.transport import Remote

    bare = make_origin(tmp_path, [("Only", [])])
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(HOLD.format(folder=tmp_path))
    hook.chmod(0o755)
    a, b = clone(str(bare), tmp_path / "a"), clone(str(bare), tmp_path / "b")
    ca = Claims(Remote(a, "origin", "main"), lease_s=60)
    mine = ca.create("1", "wa", "run-a")
    lease = Lease(ca, mine, "wa", "run-a", every_s=3600)
    (a / "out-a.txt").write_text("wa's result\n")
    git(a, "add", "out-a.txt")
    git(a, "commit", "-q", "-m", "wa's result")
    pushes, looks, slept = [], [], []
    push, remote_ref = ca.remote.push, ca.remote.remote_ref
    ca.remote.push = lambda *args, **kw: pushes.append(push(*args, **kw)) or pushes[-1]
    ca.remote.remote_ref = lambda ref: looks.append(ref) or remote_ref(ref)
    (tmp_path / "hold").touch()
    result = []
    worker = threading.Thread(target=lambda: result.append(integrate(ca.remote, lease, "1", sleep=slept.append)))
    worker.start()
    for _ in range(600):  # wa's push is at the remote, held
        if (tmp_path / "waiting").exists():
            break
        time.sleep(0.05)
    (b / "out-b.txt").write_text("another worker's result\n")
    git(b, "add", "out-b.txt")
    git(b, "commit", "-q", "-m", "another worker's result")
    git(b, "push", "-q", "origin", "HEAD:main")  # lands while wa's push waits
    (tmp_path / "go").touch()
    worker.join(60)
    assert result and result[0].outcome == "pushed" and result[0].tries == 2, result
    refused = pushes[0]
    assert not refused.ok and "atomic transaction failed" in refused.text and "cannot lock ref" in refused.text
    assert list(refused.rejected()) == ["refs/heads/main"]  # the branch moved; the claim was as the lease said
    assert looks == [] and slept == []
    assert set(git(bare, "ls-tree", "--name-only", "main").split()) >= {"out-a.txt", "out-b.txt"}
    assert git(bare, "for-each-ref", "refs/specflux/claims/") == ""  # deleted in the same push


def test_pushes_refused_because_the_branch_moved_are_tried_again_at_once_then_with_backoff(tmp_path, monkeypatch):
    """Workers finishing together are refused in turn; each refusal is another's result landing, so
    the next try goes at once, QUICK_TRIES times, and only then with a growing, jittered wait."""
    from specflux.flow.remote import integrate as integration
    from specflux.flow.remote.claims import Claims
    from specflux.flow.remote.lease import Lease
    from specflux.flow.remote.transport import Remote

    monkeypatch.setattr(integration, "QUICK_TRIES", 3)
    bare = make_origin(tmp_path, [("Only", [])])
    a, b = clone(str(bare), tmp_path / "a"), clone(str(bare), tmp_path / "b")
    ca = Claims(Remote(a, "origin", "main"), lease_s=60)
    lease = Lease(ca, ca.create("1", "wa", "run-a"), "wa", "run-a", every_s=3600)
    (a / "out-a.txt").write_text("wa's result\n")
    git(a, "add", "out-a.txt")
    git(a, "commit", "-q", "-m", "wa's result")
    push, pushed, slept = ca.remote.push, [], []

    def others_first(*args, **kw):  # another worker's result lands just before each of wa's first 4 pushes
        if len(pushed) < 4:
            (b / f"other-{len(pushed)}.txt").write_text("another worker's result\n")
            git(b, "add", "-A")
            git(b, "commit", "-q", "-m", f"another worker's result {len(pushed)}")
            git(b, "push", "-q", "origin", "HEAD:main")
        pushed.append(push(*args, **kw))
        return pushed[-1]
    ca.remote.push = others_first
    result = integration.integrate(ca.remote, lease, "1", sleep=slept.append)
    assert result.outcome == "pushed" and result.tries == 5
    assert [p.ok for p in pushed] == [False, False, False, False, True]
    assert len(slept) == 2 and 0.05 <= slept[0] <= 0.1 and 0.1 <= slept[1] <= 0.2  # after tries 3 and 4, not 1 and 2
    assert (b / "other-3.txt").exists() and "out-a.txt" in git(bare, "ls-tree", "--name-only", "main").split()
