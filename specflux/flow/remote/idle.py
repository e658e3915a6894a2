"""What a worker does when it has nothing to claim, and says so once each time the reason changes.

- The ready tasks are all claimed by other workers: it waits, naming them (each claim ends by an
  integration or a release, or its lease runs out and this worker takes the task over).
- Nothing is ready and nobody works on anything that could make something ready, but tasks are left:
  held back by a completion no integration made (records.py), or behind a dependency that is
  failed, blocked or unconfirmed. It stops, saying which and what would open them; with `--wait S`
  it waits up to S seconds for a person to open the chain (confirm, unblock, push), looking every
  poll interval.
- Nothing is left: it stops.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from specflux.flow.remote.claims import Claim


class Idle:
    def __init__(self, say: Callable[[str], None], where: str, *, poll_s: float, wait_s: float | None):
        self.say, self.where, self.poll_s, self.wait_s = say, where, poll_s, wait_s
        self.why = ""  # why the worker stops, once `waits` said it should
        self._said = ""
        self._since: float | None = None

    def reset(self) -> None:
        self._said, self._since = "", None

    def _once(self, line: str) -> None:
        if line != self._said:
            self._said = line
            self.say(line)

    def waits(self, held: dict[str, "Claim"], held_back: dict[str, dict[str, str]], rest: dict[str, str]) -> bool:
        """Whether to look again after a poll interval (else `why` says why to stop)."""
        poll = f"looking every {self.poll_s:g} s"
        if held:
            names = "; ".join(f"task {t} is claimed by {c.worker} (run {c.run}, lease {max(0.0, c.seconds_left()):.0f} s "
                              "left)" for t, c in held.items())
            self._once(f"{names}: nothing else is ready; waiting for it to be integrated or released, or to take it "
                       f"over if its lease runs out ({poll})")
            return True
        if not held_back and not rest:
            self.why = f"nothing left to do on {self.where}"
            return False
        blocked = [f"task {t} waits for " + ", ".join(f"task {d}, complete on {self.where} but unconfirmed ({why})"
                                                   for d, why in ups.items())
                   + f": check it, then `specflux claims confirm {' '.join(ups)}`" for t, ups in held_back.items()]
        blocked += [f"task {t} waits for {why}" for t, why in rest.items()]
        text = "; ".join(blocked)
        if self.wait_s is None:
            self.why = f"nothing is ready on {self.where} and no one works on it: {text} (`--wait S` waits for that)"
            return False
        now = time.monotonic()
        self._since = self._since if self._since is not None else now
        if now - self._since >= self.wait_s:
            self.why = f"waited {self.wait_s:g} s and nothing opened on {self.where}: {text}"
            return False
        self._once(f"nothing is ready on {self.where}: {text}; waiting up to {self.wait_s:g} s for that to "
                   f"change ({poll})")
        return True
