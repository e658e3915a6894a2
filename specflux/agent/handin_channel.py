"""The channel of one step's hand-in: only the session of that step can hand in through it.

When a reviewer (or planner) session of an agent CLI starts, the engine opens a channel: a fresh
private folder outside the repository and `.specflux/` (a new temporary folder, mode 0700, its
name random) and a random per-step key. Both go into that session's environment alone
(`SPECFLUX_HANDIN`, the file to hand in to; `SPECFLUX_HANDIN_KEY`; `SPECFLUX_HANDIN_STEP`), and
the sandbox makes that folder writable for that session only. `specflux submit-review` /
`submit-tasks` sign what they hand in with the key (an HMAC over the step, the kind and the
data), so a hand-in that was written before the step, by another role or by any other process,
even where no sandbox runs, does not verify: it is refused and reported as tampering.

What the session handed in is read once, after it ended (`HandinChannel.receive`), as one of:
a checked hand-in, nothing, a malformed one (`problem`: what was wrong), or one not made by the
step's session (`tampered`: why not). The folder is removed when the channel is closed.
"""

from __future__ import annotations

import hmac
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from specflux.base.records import record
from specflux.agent.handin_cli import checked
from specflux.agent.handin_rules import KEY_VAR, STEP_VAR, HandinError, Kind, sign

FILE_NAME = "handin.json"


@record
class Received:
    """What a step's session handed in: `data` (checked, in the tools' JSON shape) or None, and
    when None, why: `problem` (a malformed hand-in) or `tampered` (not made by this step's session)."""

    data: dict[str, Any] | None = None
    problem: str | None = None
    tampered: str | None = None


class HandinChannel:
    """One step's hand-in channel (see the module's docstring). Close it after the session."""

    def __init__(self, step: str, kind: Kind, parent: str | os.PathLike[str] | None = None):
        self.step, self.kind = step, kind
        self.folder = Path(tempfile.mkdtemp(prefix="specflux-handin-", dir=parent))  # fresh, 0700, never reused
        self.path = self.folder / FILE_NAME
        self.key = os.urandom(32).hex()  # as secrets.token_hex(32), without importing secrets
        self._received: Received | None = None

    def env(self) -> dict[str, str]:
        """The variables of this step's session alone."""
        return {"SPECFLUX_HANDIN": str(self.path), KEY_VAR: self.key, STEP_VAR: self.step}

    def receive(self) -> Received:
        """What the session handed in (read once; later calls give the same answer)."""
        if self._received is None:
            self._received = self._read()
        return self._received

    def close(self) -> None:
        from specflux.base.tidy import remove_later

        remove_later(self.folder)  # in the background: nothing reads it any more

    def _read(self) -> Received:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return Received()
        except OSError as e:
            return Received(problem=f"the hand-in could not be read: {e.strerror or e}")
        try:
            record = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            return Received(problem=f"the hand-in is not UTF-8 text (byte {e.start})")
        except json.JSONDecodeError as e:
            return Received(problem=f"the hand-in is not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}")
        if not isinstance(record, dict):
            return Received(problem='the hand-in is not a JSON object {"kind", "step", "data", "seal"}')
        seal = record.get("seal")
        if not isinstance(seal, str) or not seal:
            return Received(tampered="it carries no seal of this step's key (it was not handed in with "
                                     f"`specflux submit-{self.kind if self.kind == 'tasks' else 'review'}` "
                                     "by this step's session)")
        step, kind, data = record.get("step"), record.get("kind"), record.get("data")
        if step != self.step:
            return Received(tampered=f"it is sealed for step {step!r}, not for this step ({self.step})")
        if not hmac.compare_digest(seal, sign(self.key, self.step, str(kind), data)):
            return Received(tampered="its seal does not match this step's key (it was written by something other "
                                     "than this step's session, or changed after it was handed in)")
        if kind != self.kind:
            return Received(problem=f"a {kind} hand-in where a {self.kind} hand-in was expected")
        try:  # as `specflux submit-review` checks it: a plain verdict without the model (handin_rules.py)
            return Received(data=checked(self.kind, data))
        except HandinError as e:
            return Received(problem=f"the hand-in was refused: {e.message}")
