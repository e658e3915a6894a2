"""Claims: who works on which task, as refs on the shared remote.

A claim is `refs/specflux/claims/<task-id>` on the remote, pointing at a commit with no parent and the
empty tree whose message is one line of JSON: `{"worker", "run", "task", "claimedAt", "leaseUntil"}`
(ISO 8601, UTC). Every change to a claim is one push that names what the ref must be before it:

- create: `--force-with-lease=REF:` (the ref must not exist): of workers racing for a task, the
  remote's ref transaction lets exactly one through;
- renew and take over: `--force-with-lease=REF:OLD` (compare and swap on the claim as it was seen);
- release: a deletion with the same lease; one on purpose by anyone else (`specflux claims release`,
  a claim for a task that does not exist) also writes `refs/specflux/released/<task>` in the same
  push, saying who and why, so that the worker that held it tells it from a deletion by an unknown
  hand (which it answers by claiming the task again: its work is not dropped for it).

Stale: a claim whose `leaseUntil` plus `skew_s` is past by this machine's clock, or (a clock that
cannot be trusted) one this process has seen unchanged for `lease_s` plus `skew_s` by its own
monotonic clock. The assumption, written down: machines' clocks agree within `skew_s` (NTP does far
better); the second rule needs no clock agreement at all, only that a live holder renews (a new
commit, so a new sha) more often than its lease.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from specflux.base.records import record
from specflux.flow.remote.marker import iso, marker
from specflux.flow.remote.transport import CLAIMS, RELEASED, Remote


@record(frozen=True)
class Claim:
    task: str
    sha: str
    worker: str
    run: str
    claimed_at: str
    lease_until: str
    note: str = ""  # what happened to the claim on its way (claimed again after its ref was deleted)

    def seconds_left(self, now: float | None = None) -> float:
        return _epoch(self.lease_until) - (time.time() if now is None else now)

    def as_json(self, skew_s: float = 0.0, now: float | None = None) -> dict[str, Any]:
        left = self.seconds_left(now)
        return {"task": self.task, "worker": self.worker, "run": self.run, "claimedAt": self.claimed_at,
                "leaseUntil": self.lease_until, "leaseLeftS": round(left, 1), "stale": left + skew_s < 0,
                "ref": CLAIMS + self.task, "sha": self.sha, "note": self.note}


def _epoch(text: str) -> float:
    for shape in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, shape).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    return 0.0  # a claim whose lease cannot be read has none left


class Claims:
    """The claims of the queue on `remote`."""

    def __init__(self, remote: Remote, lease_s: float = 60.0, skew_s: float = 5.0):
        self.remote, self.lease_s, self.skew_s = remote, lease_s, skew_s
        self._seen: dict[str, tuple[str, float]] = {}  # task -> (sha, monotonic time first seen)
        self.lost_to_branch = False  # the last create/swap with a `tip` was refused because the branch moved

    @staticmethod
    def ref(task_id: str) -> str:
        return CLAIMS + task_id

    # ------------------------------------------------------------------ reading

    def fetched(self) -> dict[str, Claim]:
        """{task: Claim} as the last `Remote.fetch` saw them."""
        prefix = self.remote.seen_claims
        found = {ref[len(prefix):]: parse_claim(ref[len(prefix):], sha, subject)
                 for ref, (sha, subject) in self.remote.refs().items() if ref.startswith(prefix)}
        now = time.monotonic()
        self._seen = {t: (c.sha, self._seen[t][1] if t in self._seen and self._seen[t][0] == c.sha else now)
                      for t, c in found.items()}
        return found

    def read(self) -> dict[str, Claim]:
        """{task: Claim} on the remote now (fetches first)."""
        self.remote.fetch()
        return self.fetched()

    def stale(self, claim: Claim) -> bool:
        """Whether `claim` may be taken over (see the module's note on clocks)."""
        if claim.seconds_left() + self.skew_s < 0:
            return True
        sha, since = self._seen.get(claim.task, (None, 0.0))
        return sha == claim.sha and time.monotonic() - since > self.lease_s + self.skew_s

    # ------------------------------------------------------------------ changing

    def _commit(self, task: str, worker: str, run: str, claimed_at: str | None = None, note: str = "") -> Claim:
        now = time.time()
        fields = {"worker": worker, "run": run, "task": task, "claimedAt": claimed_at or iso(now),
                  "leaseUntil": iso(now + self.lease_s)}
        fields = {**fields, "note": note} if note else fields
        sha = marker(self.remote, fields, tree=self.remote.empty_tree())
        return parse_claim(task, sha, json.dumps(fields))

    def create(self, task: str, worker: str, run: str, note: str = "", *, tip: str | None = None) -> Claim | None:
        """Claim `task`: the Claim when this push created the ref, None when it was not created: it
        existed already, or (`tip` given) the remote branch is no longer at `tip` (`lost_to_branch`
        says which)."""
        claim = self._commit(task, worker, run, note=note)
        ref = self.ref(task)
        return self._push(claim, ref, [f"--force-with-lease={ref}:", f"{claim.sha}:{ref}"], tip)

    def swap(self, old: Claim, worker: str, run: str, *, patient: bool = True, tip: str | None = None) -> Claim | None:
        """Replace `old` with a new claim of `worker` (a renewal when it is the worker's own, a
        takeover when not): the new Claim, or None when the ref is no longer `old` (or, `tip` given,
        the remote branch is no longer at `tip`)."""
        own = old.worker == worker and old.run == run
        claim = self._commit(old.task, worker, run, old.claimed_at if own else None, old.note if own else "")
        ref = self.ref(old.task)
        return self._push(claim, ref, [f"--force-with-lease={ref}:{old.sha}", f"{claim.sha}:{ref}"], tip, patient)

    def _push(self, claim: Claim, ref: str, specs: list[str], tip: str | None, patient: bool = True) -> Claim | None:
        """Push a claim; with `tip`, in one atomic push with the lease `the remote branch is at tip`
        (pushing it where it is: a push that changes nothing there, refused when it moved). A claim
        made so needs no second look at the branch: nothing was integrated between the fetch that
        showed the task to do and the claim, since an integration moves the branch."""
        if tip:
            self.lost_to_branch = False
            branch = f"refs/heads/{self.remote.branch}"
            specs = ["--atomic", *specs, f"--force-with-lease={branch}:{tip}", f"{tip}:{branch}"]
        pushed = self.remote.push(*specs, patient=patient)
        if pushed.ok:
            self._seen.pop(claim.task, None)
            return claim
        if tip:
            self.lost_to_branch = f"refs/heads/{self.remote.branch}" in pushed.rejected()
        return None

    def release(self, task: str, expected: str | None = None) -> bool:
        """Delete the claim on `task` (only if it is still `expected`, when given); True when deleted.
        A worker's own claim: by hand, see `drop`."""
        ref = self.ref(task)
        lease = [f"--force-with-lease={ref}:{expected}"] if expected else []
        return self.remote.push(*lease, f":{ref}").ok

    def drop(self, claim: Claim, by: str, why: str) -> bool:
        """Delete someone's claim on purpose (`claims release`, a claim for a task that does not exist),
        leaving `refs/specflux/released/<task>` to say who and why: its worker, when it finds its claim
        gone, tells this from a deletion by an unknown hand. True when deleted (the claim was still `claim`)."""
        note = marker(self.remote, {"task": claim.task, "worker": claim.worker, "run": claim.run, "claim": claim.sha,
                                    "by": by, "why": why, "at": iso(time.time())})
        ref = self.ref(claim.task)
        return self.remote.push("--atomic", f"--force-with-lease={ref}:{claim.sha}", f":{ref}",
                                f"+{note}:{RELEASED}{claim.task}").ok

    def dropped(self, task: str) -> dict[str, Any]:
        """The last `drop` of `task`'s claim on the remote ({} when none): {worker, run, claim, by, why, at}."""
        local = f"refs/specflux/seen/{self.remote.track_as or self.remote.name}/released/{task}"
        if self.remote.git("fetch", "-q", self.remote.name, f"+{RELEASED}{task}:{local}").returncode:
            return {}
        try:
            fields = json.loads(self.remote.git("log", "-1", "--format=%s", local).stdout.strip())
        except ValueError:
            return {}
        return fields if isinstance(fields, dict) else {}

def parse_claim(task: str, sha: str, subject: str) -> Claim:
    try:
        data = json.loads(subject)
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    return Claim(task=task, sha=sha, worker=str(data.get("worker", "?")), run=str(data.get("run", "?")),
                 claimed_at=str(data.get("claimedAt", "1970-01-01T00:00:00Z")),
                 lease_until=str(data.get("leaseUntil", "1970-01-01T00:00:00Z")), note=str(data.get("note", "")))
