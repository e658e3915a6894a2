"""`claims release --force` while the claim's worker renews it (the race behind a CI failure: the
worker's renewal landed between the release's read and its drop), against a real `git daemon`:
a renewal by the same run is released as it now stands; a takeover by another worker is refused,
naming it. The renewal is made by a second clone's real push, between the read and the drop."""

from __future__ import annotations

import pytest
from remote_kit import Daemon, claims_on, clone, make_origin

from specflux.base.errors import SpecfluxError
from specflux.flow.remote import queue
from specflux.flow.remote.claims import Claims


class _RacedBy(Claims):
    """Claims whose first drop finds the claim already moved by `move` (a real push from another clone)."""

    def __init__(self, claims: Claims, move):
        super().__init__(claims.remote, claims.lease_s, claims.skew_s)
        self.move, self.drops = move, 0

    def drop(self, claim, by, why):
        self.drops += 1
        if self.drops == 1:
            self.move()
        return super().drop(claim, by, why)


def _claimed(tmp_path):
    bare = make_origin(tmp_path, [("Slow", [])], lease_s=60)
    daemon = Daemon(tmp_path).start()
    a, b = clone(daemon.url("origin.git"), tmp_path / "a"), clone(daemon.url("origin.git"), tmp_path / "b")
    worker = queue.open_claims(a, "origin")
    held = worker.create("1", "wa", "run-1")
    assert held is not None
    return bare, daemon, worker, held, queue.open_claims(b, "origin")


def test_a_forced_release_of_a_claim_renewed_under_it_releases_it(tmp_path):
    bare, daemon, worker, held, mine = _claimed(tmp_path)
    try:
        renewed = []
        raced = _RacedBy(mine, lambda: renewed.append(worker.swap(held, "wa", "run-1")))
        row = queue.release(raced, "1", "me", force=True)
        assert renewed[0] is not None and renewed[0].sha != held.sha, "the renewal did not land first"
        assert raced.drops == 2 and row["worker"] == "wa" and row["run"] == "run-1"
        assert claims_on(bare) == []
    finally:
        daemon.kill()


def test_a_forced_release_of_a_claim_taken_over_under_it_names_the_new_holder(tmp_path):
    bare, daemon, worker, held, mine = _claimed(tmp_path)
    try:
        raced = _RacedBy(mine, lambda: worker.swap(held, "wb", "run-2"))
        with pytest.raises(SpecfluxError, match=r"taken over by wb \(run run-2\)"):
            queue.release(raced, "1", "me", force=True)
        assert claims_on(bare) == ["refs/specflux/claims/1"]  # the new holder's claim stands
    finally:
        daemon.kill()


def test_a_release_without_force_of_a_stale_claim_renewed_under_it_is_refused(tmp_path):
    bare, daemon, worker, held, _ = _claimed(tmp_path)
    try:
        stale = queue.open_claims(tmp_path / "b", "origin", lease_s=0.0, skew_s=0.0)
        old = Claims(worker.remote, 0.0).swap(held, "wa", "run-1")  # its lease ends now: stale at once
        assert old is not None
        raced = _RacedBy(stale, lambda: worker.swap(old, "wa", "run-1"))  # its worker renews it for 60 s
        with pytest.raises(SpecfluxError, match=r"renewed by wa \(run run-1\) while releasing it: its worker is live"):
            queue.release(raced, "1", "me")
        assert raced.drops == 1 and claims_on(bare) == ["refs/specflux/claims/1"]
    finally:
        daemon.kill()
