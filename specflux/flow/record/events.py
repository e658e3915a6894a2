"""A run's `events.jsonl`: append-only, fsynced, the source of truth of the run.

One JSON object per line, each with `seq` (1, 2, ...), `at` (wall-clock ISO time, for people) and
`type`. Appends are serialised by a lock file, so the engine and a `flow pause` from another
terminal never interleave; an append is fsynced before it returns, or, when the engine groups a
step's events (`sync=False`), with the next synced one: one fsync per step. A line torn by a crash
(`kill -9` in the middle of a write) has no final newline: readers ignore it and the next append
cuts it off first, so a crash never leaves a garbled log behind.

Every line ends with a `mac`: an HMAC of the line, chained to the line before it, keyed by a
secret kept outside the workspace (the engine's private folder, run.py), which agents are not given.
A line an agent appended or edited (a forged `task_status` claiming a task complete, from a
lane's worktree through `../../..`, say) does not verify: `read_verified_from` marks it, the
fold leaves it out, and the engine ends the run `failed` with `failureReason: "tampered"`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from specflux.base.errors import SpecfluxError
from specflux.base.durability import durable
from specflux.base.files import observe_clock

TAIL = 1 << 16  # bytes read back to find the last sequence number
MAC = re.compile(rb',"mac":"([0-9a-f]{32})"\}\s*$')
FORGED = "_forged"  # the key read_verified_from marks a line that does not verify with


class RunError(SpecfluxError):
    """A run that cannot be read, found or driven."""


class EventLog:
    def __init__(self, path: Path, shown_as: str | None = None, key: bytes | None = None,
                 lock: Path | None = None):
        self.path = path
        self.shown_as = shown_as or str(path)
        self._lock = lock or path.with_name(path.name + ".lock")  # a run's is out of agents' reach: run.py
        self.key = key  # None: an unkeyed log (a run from before the chain, or its key is not here)
        self._end = 0  # the file's size after this process's last append (0: not known)
        self._last: tuple[int, str] = (0, "")  # that append's seq and mac: the chain goes on from them
        self._unsynced = False  # lines appended by this process and not fsynced yet
        self.last_line: tuple[int, bytes, int] | None = None  # this process's last append: (start, bytes, end)

    def _mac(self, previous: str, body: bytes) -> str:
        return hmac.new(self.key, previous.encode() + body, hashlib.sha256).hexdigest()[:32]

    def append(self, event: dict[str, Any], sync: bool = True) -> dict[str, Any]:
        """Write one event (its `seq` and `at` filled in); returns it as written. The line is in
        the file (seen by every reader, kept through a `kill -9`) when this returns; with `sync`
        it is on the disk too, with every line appended before it (one fsync for all of them).
        `sync=False` leaves the fsync to the next synced append or `sync()`: the engine groups
        the events of one step that way (see engine.py)."""
        with self._locked():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size == self._end and self._end:  # nothing appended since our own last line
                    last, previous = self._last
                else:
                    last, previous = self._repair_and_last_seq()
                record = {"seq": last + 1, "at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **event}
                line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
                mac = ""
                if self.key is not None:
                    body = line[:-1].encode("utf-8")
                    mac = self._mac(previous, body)
                    line = line[:-2] + f',"mac":"{mac}"}}' + "\n"
                data = line.encode("utf-8")
                os.write(fd, data)
                self._unsynced = True
                if sync:
                    self._fsync(fd)
                st = os.fstat(fd)
                observe_clock(st)  # (the list cache trusts recent rows sooner: base/files.py)
                self._end = st.st_size  # (under the lock: no one else appended)
                self._last = (record["seq"], mac or previous)
                self.last_line = (self._end - len(data), data, self._end)
            finally:
                os.close(fd)
        return record

    def sync(self) -> None:
        """Make every line appended so far durable (one fsync), if any is not yet."""
        if not self._unsynced:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            self._fsync(fd)
        finally:
            os.close(fd)

    def _fsync(self, fd: int) -> None:
        if durable():  # (off in a replay's throw-away clone)
            os.fsync(fd)
        self._unsynced = False

    def read(self, after: int = 0) -> list[dict[str, Any]]:
        """Every complete event with `seq` > `after`, in order. A garbled line that is not the
        torn last one is an error naming its line."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1  # a torn last line (no newline yet) is not an event
        out = []
        for number, raw in enumerate(data[:end].splitlines(), 1):
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except ValueError as e:
                raise RunError(f"not a JSON event: {e}", self.shown_as, number) from None
            if not isinstance(event, dict) or not isinstance(event.get("seq"), int) or "type" not in event:
                raise RunError("an event needs an integer `seq` and a `type`", self.shown_as, number)
            if event["seq"] > after:
                out.append(event)
        return out

    def read_from(self, offset: int) -> tuple[list[dict[str, Any]], int]:
        """The complete events written from byte `offset` on, and the offset after the last one:
        a reader that keeps the offset parses each event once, however long the run."""
        try:
            with open(self.path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return [], offset
        end = data.rfind(b"\n") + 1
        out = []
        for number, raw in enumerate(data[:end].splitlines()):
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except ValueError as e:
                raise RunError(f"not a JSON event: {e}", self.shown_as, self._line_at(offset) + number) from None
            out.append(event)
        return out, offset + end

    def read_verified_from(self, offset: int, previous: str) -> tuple[list[dict[str, Any]], int, str]:
        """As `read_from`, each line checked against the chain from `previous` (the mac of the line
        before `offset`): a line that does not verify is returned marked `FORGED` (with its line
        number). Returns the events, the offset after them and the mac to go on from."""
        try:
            with open(self.path, "rb") as f:
                f.seek(offset)
                data = f.read()
        except FileNotFoundError:
            return [], offset, previous
        end = data.rfind(b"\n") + 1
        out = []
        for number, raw in enumerate(data[:end].splitlines()):
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except ValueError as e:
                raise RunError(f"not a JSON event: {e}", self.shown_as, self._line_at(offset) + number) from None
            if self.key is not None:
                found = MAC.search(raw)
                ok = found is not None and hmac.compare_digest(
                    self._mac(previous, raw[:found.start()] + b"}"), found.group(1).decode())
                if found is not None:
                    previous = found.group(1).decode()
                if not ok:
                    event = {FORGED: self._line_at(offset) + number, "seq": event.get("seq") if isinstance(event, dict) else None,
                             "type": event.get("type") if isinstance(event, dict) else None}
            out.append(event)
        return out, offset + end, previous

    def _line_at(self, offset: int) -> int:
        with open(self.path, "rb") as f:
            return f.read(offset).count(b"\n") + 1

    def exists(self) -> bool:
        return self.path.is_file()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        from specflux.base.lock_wait import wait_for

        try:
            fd = os.open(self._lock, os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            self._lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            wait_for(fd, str(self._lock), f"the lock of {self.shown_as}")
            yield
        finally:
            os.close(fd)

    def _repair_and_last_seq(self) -> tuple[int, str]:
        """Cut a torn last line off; the last complete event's `seq` (0 if none) and the last
        `mac` written (the chain goes on from it; "" if none)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return 0, ""
        with open(self.path, "r+b") as f:
            f.seek(max(0, size - TAIL))
            tail = f.read()
            if tail and not tail.endswith(b"\n"):
                cut = tail.rfind(b"\n") + 1
                f.truncate(size - len(tail) + cut)
                os.fsync(f.fileno())
                tail = tail[:cut]
        previous = ""
        if self.key is not None:
            for raw in reversed(tail.splitlines()):
                found = MAC.search(raw)
                if found:
                    previous = found.group(1).decode()
                    break
        for raw in reversed(tail.splitlines()):
            try:
                return int(json.loads(raw)["seq"]), previous
            except (ValueError, KeyError, TypeError):
                continue
        return 0, previous
