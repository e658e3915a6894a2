"""A run's folder: `.specflux/runs/<run-id>/` with its events, snapshot, narrative and recordings.

`events.jsonl` is the truth; `state.json` (a snapshot folded from it, with the last `seq` it
saw) and `narrative.md` are derived and rebuilt whenever they are missing or behind. The engine
holds `engine.lock` while it drives the run, so a second engine is refused and a crashed one is
recognised (its lock is free again). The run's locks and key live in the engine's private folder
(`locks_dir`, store/state_dir.py), not in the run folder an agent can read.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from specflux.base.files import atomic_write
from specflux.store.workspace import Workspace
from specflux.flow.record import narrative
from specflux.flow.record.events import FORGED, EventLog, RunError
from specflux.flow.state import FINISHED, fold, public


class Run:
    def __init__(self, ws: Workspace, run_id: str):
        self.ws = ws
        self.id = run_id
        self.dir = ws.dir / "runs" / run_id
        self.events = EventLog(self.dir / "events.jsonl", ws.relative(self.dir / "events.jsonl"), key=_read_key(ws, run_id),
                               lock=self.locks_dir / "events.lock")
        self._state: dict[str, Any] | None = None
        self._offset = 0
        self.unsaved_in_git = False  # known: created here and not committed yet (`commit`)
        self.maintain = True  # its history commit lets git run its automatic maintenance (a worker's: at its stop)

    # ----------------------------------------------------------------- finding runs

    @classmethod
    def create(cls, ws: Workspace, created: dict[str, Any], run_id: str | None = None) -> "Run":
        """A new run folder whose first event is `run_created` (the fields of `created`)."""
        run_id = run_id or f"run-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(2).hex()}"
        run = cls(ws, run_id)
        if run.events.exists():
            raise RunError(f"run {run_id} exists already", ws.relative(run.dir))
        from specflux.store.workspace import ensure_ignored

        ws.ensure_folder(run.dir)
        ensure_ignored(ws.dir)
        run.events.key = _new_key(ws, run_id)
        run.unsaved_in_git = True
        ws.ensure_folder(run.recordings_dir)
        run.record({"type": "run_created", "runId": run_id, **created})
        return run

    @classmethod
    def find(cls, ws: Workspace, run_id: str | None = None) -> "Run":
        """The run named `run_id` (a unique prefix is enough), or the latest run."""
        ids = cls.ids(ws)
        if not ids:
            raise RunError("no workflow runs yet (start one with `specflux flow start`)")
        if run_id is None:
            return cls(ws, ids[-1])
        matches = [i for i in ids if i == run_id] or [i for i in ids if i.startswith(run_id)]
        if len(matches) != 1:
            what = "no run" if not matches else "more than one run"
            raise RunError(f"{what} matches {run_id!r} (runs: {', '.join(ids[-5:])})")
        return cls(ws, matches[0])

    @staticmethod
    def ids(ws: Workspace) -> list[str]:
        """Run ids, oldest first (they start with their creation time)."""
        try:
            names = os.listdir(ws.dir / "runs")
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = sorted(n for n in names if (ws.dir / "runs" / n / "events.jsonl").is_file())
        seconds = [n[:19] for n in found]  # run-YYYYMMDD-HHMMSS
        if len(set(seconds)) == len(seconds):
            return found
        return sorted(found, key=lambda n: (n[:19], _started_at(ws.dir / "runs" / n / "events.jsonl"), n))

    # ----------------------------------------------------------------- paths

    @property
    def locks_dir(self) -> Path:
        """The run's locks: in the engine's private folder, where no agent can open them (a lock
        an agent can open for reading is a lock it can hold)."""
        return self.ws.private_dir / "runs" / self.id

    @property
    def recordings_dir(self) -> Path:
        return self.dir / "recordings"

    @property
    def handins_dir(self) -> Path:
        return self.dir / "handins"

    def recording(self, key: str) -> Path:
        """The recording of one try of a step: `s8#1` -> s8.jsonl, `s8#2` -> s8-2.jsonl."""
        step_id, _, n = key.partition("#")
        return self.recordings_dir / (f"{step_id}.jsonl" if n in ("", "1") else f"{step_id}-{n}.jsonl")

    # ----------------------------------------------------------------- events and state

    def record(self, event: dict[str, Any], sync: bool = True) -> dict[str, Any]:
        """Append an event (fsynced, with those before it, unless `sync` is False: then with the
        next synced one, or `events.sync()`) and fold it into the state: parsed from the line as
        written, when the state had every line before it (else the next `state()` reads it)."""
        written = self.events.append(event, sync)
        start, data, end = self.events.last_line
        if self._state and start == self._offset:  # no one else's line between: ours is the next one
            line = json.loads(data)
            fold([line], self._state, in_place=True)
            if self.events.key is not None:
                self._state["lastMac"] = line["mac"]
            self._offset = self._state["eventsOffset"] = end
        return written

    def state(self) -> dict[str, Any]:
        """The state folded from every event: from the snapshot on (when it is current), and then
        only the events appended since the last call (each event is parsed once)."""
        if self._state is None:
            snapshot = self._read_snapshot()
            if snapshot is not None and isinstance(snapshot.get("eventsOffset"), int):
                self._state, self._offset = snapshot, snapshot["eventsOffset"]
            else:
                self._state, self._offset = {}, 0
        elif self._state and self._size() == self._offset:  # nothing appended since: one stat, no read
            return self._state
        newer, offset, mac = self.events.read_verified_from(self._offset, self._state.get("lastMac", ""))
        if newer:
            seen = self._state.get("lastSeq", 0)
            forged = [e for e in newer if FORGED in e]
            fold((e for e in newer if FORGED not in e and e["seq"] > seen), self._state, in_place=True)
            if forged and "tampered" not in self._state:  # left out of the fold; the engine ends the run
                first = forged[0]
                self._state["tampered"] = (f"line {first[FORGED]} of {self.events.shown_as} (a {first.get('type')} "
                                           f"event) was not written by specflux")
        self._state["lastMac"] = mac
        self._offset = offset
        self._state["eventsOffset"] = offset
        if not self._state:
            raise RunError(f"run {self.id} has no events", self.events.shown_as)
        return self._state

    def _size(self) -> int:
        try:
            return os.stat(self.events.path).st_size
        except FileNotFoundError:
            return 0

    def save(self) -> None:
        """Write `state.json` and `narrative.md` from the events (both derived, both rebuildable:
        written whole but not fsynced; after a power loss a missing, stale or empty one is folded
        again from the events, which are on the disk before either is written)."""
        self.events.sync()
        state = self.state()
        if self.events.key is not None:  # a snapshot an agent edited is not taken for the fold
            state = {**state, "stateMac": self._snapshot_mac(state)}
        atomic_write(self.dir / "state.json", json.dumps(state, indent=2, ensure_ascii=False) + "\n", sync=False)
        atomic_write(self.dir / "narrative.md", narrative.render(self.id, self.events.read()), sync=False)

    def commit(self, git, subject: str) -> str:
        """Commit the run's history (events, state, narrative) so that git holds the run too."""
        self.save()
        paths = [self.dir / name for name in ("events.jsonl", "state.json", "narrative.md")]
        sha = git.commit(paths, subject, {"Specflux-Run": self.id, "Specflux-Role": "engine"}, maintain=self.maintain,
                         new=self.unsaved_in_git)
        self.unsaved_in_git = False
        return sha

    def _read_snapshot(self) -> dict[str, Any] | None:
        try:
            data = json.loads((self.dir / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # missing or torn: fold from the start
        if not isinstance(data, dict) or not isinstance(data.get("lastSeq"), int):
            return None
        if self.events.key is not None and data.pop("stateMac", None) != self._snapshot_mac(data):
            return None  # written by someone else than specflux: fold from the events
        return data

    def _snapshot_mac(self, state: dict[str, Any]) -> str:
        import hashlib
        import hmac

        body = json.dumps({k: v for k, v in state.items() if k != "stateMac"}, sort_keys=True, ensure_ascii=False)
        return hmac.new(self.events.key, body.encode("utf-8"), hashlib.sha256).hexdigest()[:32]

    def public_state(self) -> dict[str, Any]:
        return public(self.state())

    # ----------------------------------------------------------------- the engine's lock

    @contextmanager
    def engine_lock(self) -> Iterator[None]:
        """Held while an engine drives this run; a second engine is refused."""
        import fcntl

        self.ws.ensure_folder(self.locks_dir)
        fd = os.open(self.locks_dir / "engine.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunError(f"run {self.id} is already being driven by another process "
                               "(use `specflux flow pause/stop` from here)") from None
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            yield
        finally:
            os.close(fd)

    def engine_running(self) -> bool:
        """Whether some process holds the engine lock now."""
        import fcntl

        path = self.locks_dir / "engine.lock"
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def wait_while_pausing(self, seconds: float) -> None:
        """Wait, at most `seconds`, while the process that paused this run is still ending: its status
        says paused before that process has made its history commit and given up its holds and the
        engine lock, and a resume pressed at once (on the board, say) would otherwise be refused."""
        deadline = time.monotonic() + seconds
        while self.engine_running() and self.state().get("status") == "paused" and time.monotonic() < deadline:
            time.sleep(0.05)

    def finished(self) -> bool:
        return self.state().get("status") in FINISHED


def _started_at(events: Path) -> str:
    """The time (to the millisecond) of a run's first event: the order of runs started in one second."""
    try:
        with open(events, encoding="utf-8") as f:
            return str(json.loads(f.readline()).get("at") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def _keys_dir(ws: Workspace) -> Path:
    """Where the runs' event keys live: the engine's private folder (store/state_dir.py), never
    in the work tree, never committed, hidden from sandboxed agents."""
    return ws.private_dir / "keys"


def _read_key(ws: Workspace, run_id: str) -> bytes | None:
    path = _keys_dir(ws) / run_id
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        return _old_key(ws, run_id, path)
    except (OSError, ValueError):
        return None


def _old_key(ws: Workspace, run_id: str, path: Path) -> bytes | None:
    """A run's key where an older specflux kept it (`.git/specflux-keys/`, `.specflux/locks/keys/`),
    moved to `path` as it is found."""
    from specflux.store.state_dir import old_places

    places = old_places(ws.dir, ws.root)
    for folder in (places.get("git_keys"), places["keys"]):
        if folder is None:
            continue
        try:
            key = bytes.fromhex((folder / run_id).read_text().strip())
        except (OSError, ValueError):
            continue
        try:
            _write_key(path, key)
            (folder / run_id).unlink()
        except OSError:
            pass
        return key
    return None


def _new_key(ws: Workspace, run_id: str) -> bytes:
    key = os.urandom(32)  # what secrets.token_bytes is (`secrets` imports ~3 ms of modules a worker's start need not)
    _write_key(_keys_dir(ws) / run_id, key)
    return key


def _write_key(path: Path, key: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, key.hex().encode())
    finally:
        os.close(fd)
