"""A worker's lease on its claim: renewed in a thread while the agent works.

Every `lease_s / 3` seconds the thread swaps the claim for a new one (compare and swap on the sha it
holds). A refused swap means another worker took the claim over: the lease is `lost` (and says to
whom), `on_lost` is called once (the worker stops its run), and the thread ends. A remote that does
not answer is not a loss: the thread tries again at its next turn, and integration finds out.

`held()` pauses renewals while the worker pushes with the claim's sha as its lease (integration),
so that the sha it names is the one on the remote.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

from specflux.flow.remote.claims import Claim, Claims, parse_claim
from specflux.flow.remote.transport import Unreachable


class Lease:
    def __init__(self, claims: Claims, claim: Claim, worker: str, run: str, *,
                 on_lost: Callable[[str], None] = lambda why: None, every_s: float | None = None,
                 say: Callable[[str], None] = lambda line: None):
        self.claims, self.claim, self.worker, self.run = claims, claim, worker, run
        self.on_lost, self.say = on_lost, say
        self.every_s = every_s if every_s is not None else max(0.2, claims.lease_s / 3)
        self.lost: str | None = None  # why, once lost
        self.renewals = 0
        self.renew_seconds = 0.0  # time spent renewing, in all
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{claim.task}", daemon=True)

    def __enter__(self) -> "Lease":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop_renewing(self) -> None:
        """No renewal after this one (call under `held`: the claim is gone or not ours)."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            with self._lock:
                if self._stop.is_set():
                    return
                if not self.renew():
                    return

    def renew(self) -> bool:
        """One renewal (under the lock); False once the claim is lost."""
        if self.lost:
            return False
        began = time.monotonic()
        try:
            new = self.claims.swap(self.claim, self.worker, self.run, patient=False)
        except Unreachable:
            return True  # not a loss: the next turn tries again
        finally:
            self.renew_seconds += time.monotonic() - began
        if new is None:
            if self.claim_again():
                return True
            self.lost = self.what_became()
            self.on_lost(self.lost)
            return False
        self.claim = new
        self.renewals += 1
        return True

    def claim_again(self) -> bool:
        """The claim's ref deleted by neither an integration nor `claims release` (an agent that reached
        the remote, a person's `git push :ref`): claim the task again, saying so, rather than drop the
        work for it. True when claimed again (under the lock, or from integration)."""
        task = self.claim.task
        if self.claims.remote.remote_ref(self.claims.ref(task)) is not None:
            return False  # taken over, or changed: not a deletion
        dropped = self.claims.dropped(task)
        if dropped.get("claim") == self.claim.sha:
            return False  # released on purpose: what_became says by whom
        from specflux.flow.remote.marker import iso

        note = (f"claimed again at {iso(time.time())}: its ref was deleted by something other than an integration "
                "or `specflux claims release`")
        new = self.claims.create(task, self.worker, self.run, note=note)
        if new is None:
            return False
        self.claim = new
        self.say(f"task {task}: its claim was deleted on the remote by something other than an integration or "
                 "`specflux claims release`; claimed it again, the work goes on")
        return True

    def what_became(self) -> str:
        """What became of the claim, as the remote says: who took it over, who released it, or that it is gone."""
        remote = self.claims.remote
        ref = self.claims.ref(self.claim.task)
        done = remote.git("fetch", "-q", remote.name, f"+{ref}:{remote.seen_claims}{self.claim.task}")
        remote.forget()
        if done.returncode:
            if "couldn't find remote ref" not in done.stderr:
                return "its claim was taken over by another worker"
            dropped = self.claims.dropped(self.claim.task)
            if dropped.get("claim") == self.claim.sha:
                return f"its claim was released by {dropped.get('by', '?')} at {dropped.get('at', '?')} ({dropped.get('why', '')})"
            return "its claim is gone (deleted on the remote, and the task claimed by no one since)"
        sha = remote.rev(f"{remote.seen_claims}{self.claim.task}")
        taker = parse_claim(self.claim.task, sha or "", remote.git("log", "-1", "--format=%s", sha or "HEAD").stdout.strip())
        return f"its claim was taken over by {taker.worker} (run {taker.run})"

    @contextmanager
    def held(self) -> Iterator[Claim]:
        """The claim as it is on the remote, with renewals paused until the block ends."""
        with self._lock:
            yield self.claim
