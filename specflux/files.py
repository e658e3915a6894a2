"""Files on disk: exact reads, atomic writes, per-task locks, and all-or-nothing change sets."""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from .errors import ParseError

_UMASK = os.umask(0)
os.umask(_UMASK)


def read_text(path: Path, shown_as: str | None = None) -> str:
    """The file's exact text: no newline translation; invalid UTF-8 is an error located at
    `shown_as` (the path as the user should see it) or `path`."""
    return decode(path.read_bytes(), shown_as or str(path))


def decode(data: bytes, shown_as: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ParseError(f"not valid UTF-8 (byte {e.start})", shown_as, line) from None


def atomic_write(path: Path, text: str) -> None:
    """Replace `path` with `text` so that readers see the old file or the new one, never half."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class FileLock:
    """An exclusive lock on a separate lock file (never the task file: os.replace swaps inodes).

    POSIX flock from the standard library (the `filelock` package costs ~35 ms to import);
    `filelock` is used where fcntl does not exist.
    """

    def __init__(self, path: Path):
        self.path = path
        self._fd: int | None = None
        self._fallback = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            import filelock

            self._fallback = filelock.FileLock(str(self.path))
            self._fallback.acquire()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._fd = fd

    def release(self) -> None:
        if self._fallback is not None:  # pragma: no cover
            self._fallback.release()
        elif self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


@contextmanager
def locked(paths: Iterable[Path]) -> Iterator[None]:
    """Hold every lock, taken in sorted order so two callers can never deadlock."""
    locks = [FileLock(p) for p in sorted(set(paths))]
    taken: list[FileLock] = []
    try:
        for lock in locks:
            lock.acquire()
            taken.append(lock)
        yield
    finally:
        for lock in reversed(taken):
            lock.release()


class ChangeSet:
    """Writes gathered first, applied together, and undone together if a later step fails."""

    def __init__(self) -> None:
        self.pending: dict[Path, str] = {}
        self._originals: dict[Path, bytes | None] = {}

    def write(self, path: Path, text: str) -> None:
        self.pending[path] = text

    @property
    def paths(self) -> list[Path]:
        return list(self.pending)

    def apply(self) -> list[Path]:
        """Write every pending file; returns the paths whose bytes actually changed."""
        changed = []
        for path, text in self.pending.items():
            try:
                before = path.read_bytes()
            except FileNotFoundError:
                before = None
            if before is not None and before == text.encode("utf-8"):
                continue
            self._originals[path] = before
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text)
            changed.append(path)
        return changed

    def rollback(self) -> None:
        for path, before in self._originals.items():
            if before is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write(path, before.decode("utf-8"))
        self._originals.clear()
