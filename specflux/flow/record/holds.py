"""One run per task at a time: a run holds the tasks it works on.

`holds/task-<id>.json`, in the engine's private folder (the git common dir's `specflux/private/`,
out of every agent's reach: store/state_dir.py), names the run holding the task and the process driving it
(pid, its start time, the host). A hold is live while that process is (the same pid with the same
start time, so a reused pid is not mistaken for it) and its run has not ended; anything else is
stale and may be taken. Claims are made under one `flock` (`holds.lock` beside it; a wait for it
ends after SPECFLUX_LOCK_TIMEOUT naming its holder: base/lock_wait.py), so two
`flow start`s racing over the same tasks are told apart: the first claims, the second is refused,
naming the run that holds them (or, with `--all`, takes only what is free).

A run takes its holds when it is created and again whenever it is driven (`flow resume` from a
new process takes back the holds of its crashed self), and gives them up when its driving stops
(finished, paused or stopped): a paused run no longer holds anything another run could do.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from specflux.base.files import atomic_write

if TYPE_CHECKING:
    from specflux.store.workspace import Workspace


def _start_time(pid: int) -> str | None:
    """When process `pid` started (ticks since boot; /proc), or None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def _me() -> dict[str, object]:
    pid = os.getpid()
    return {"pid": pid, "started": _start_time(pid) or "", "host": socket.gethostname()}


class Holds:
    def __init__(self, ws: "Workspace"):
        self.ws = ws
        self.dir = ws.private_dir / "holds"
        self._read: dict[Path, tuple[tuple[int, int, int, int], dict]] = {}  # hold_of's, while the stat holds

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Claims and releases, one process at a time."""
        from specflux.base.lock_wait import note_holder, wait_for

        self.ws.ensure_folder(self.dir)
        lock = self.dir.parent / "holds.lock"
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            wait_for(fd, str(lock), "the lock of the runs' holds")
            note_holder(fd)
            for stale in self.dir.glob(".task-*.tmp"):  # a kill mid-claim left it: holds are
                stale.unlink(missing_ok=True)  # written under this lock only, so none is in use
            self._take_old_holds()
            yield
        finally:
            os.close(fd)

    def _take_old_holds(self) -> None:
        """Move the holds an older specflux kept in `.specflux/locks/holds/` here (once)."""
        old = self.ws.dir / "locks" / "holds"
        if not old.is_dir() or old.is_symlink():
            return
        for path in old.glob("task-*.json"):
            if not self._path(path.name[len("task-"):-len(".json")]).exists():
                try:
                    os.replace(path, self.dir / path.name)
                except OSError:
                    pass
        import shutil

        shutil.rmtree(old, ignore_errors=True)

    def _path(self, task_id: str) -> Path:
        return self.dir / f"task-{task_id}.json"

    def holder(self, task_id: str, other_than: str | None = None) -> str | None:
        """The run holding `task_id` now (a live hold, of a run other than `other_than`), or None."""
        try:
            hold = json.loads(self._path(task_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        run_id = hold.get("run")
        if not run_id or run_id == other_than or not self._live(hold):
            return None
        return run_id

    def _live(self, hold: dict) -> bool:
        if hold.get("host") != socket.gethostname():
            return True  # another machine's process: this one cannot tell, so it is taken as alive
        pid = hold.get("pid")
        if not isinstance(pid, int):
            return False
        started = _start_time(pid)
        if started is None or (hold.get("started") and started and started != hold["started"]):
            return False
        from specflux.flow.record.run import Run

        run = Run(self.ws, hold["run"])
        try:
            return run.events.exists() and not run.finished()
        except Exception:  # a run folder the holder left broken: not a run anyone can go on with
            return False

    def held(self, task_ids: Iterable[str], other_than: str | None = None) -> dict[str, str]:
        """{task: run} for the tasks among `task_ids` that another live run holds."""
        found = {}
        for task_id in task_ids:
            run_id = self.holder(task_id, other_than)
            if run_id:
                found[task_id] = run_id
        return found

    def claim(self, run_id: str, task_ids: Iterable[str]) -> None:
        """Hold `task_ids` for `run_id`, driven by this process (call under `locked`, after `held`)."""
        me = json.dumps({"run": run_id, **_me()})
        for task_id in task_ids:
            path = self._path(task_id)
            try:
                if path.read_text(encoding="utf-8") == me:  # taken already by this process
                    continue
            except (OSError, UnicodeDecodeError):
                pass
            # no fsync: a hold names a live process, and none outlives a power cut
            atomic_write(path, me, sync=False)

    def release(self, run_id: str) -> None:
        """Give up every hold of `run_id`."""
        if not self.dir.is_dir() and not (self.ws.dir / "locks" / "holds").is_dir():
            return
        with self.locked():
            for path in self.dir.glob("task-*.json"):
                try:
                    if json.loads(path.read_text(encoding="utf-8")).get("run") == run_id:
                        path.unlink()
                except (OSError, ValueError):
                    continue


    def hold_of(self, task_id: str) -> dict | None:
        """The hold on `task_id` as it is written (run, pid, started, host), live or not; None when
        there is none (or it cannot be read)."""
        from specflux.base.files import clock_passed, stat_key

        path = self._path(task_id)
        try:
            st = os.stat(path)
            key = stat_key(st)
            known = self._read.get(path)
            if known is not None and known[0] == key:
                return dict(known[1])  # a run re-checks each hold every step: a stat, not a read
            hold = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(hold, dict):
            return None
        if clock_passed(st):  # any later write gives it a later change time: its stat tells
            self._read[path] = (key, dict(hold))
        return hold


def describe(held: dict[str, str]) -> str:
    """`task 1 (run X), task 2 (run X)` for a refusal."""
    return ", ".join(f"task {t} (run {r})" for t, r in held.items())
