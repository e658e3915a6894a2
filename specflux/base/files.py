"""Files on disk: exact reads, atomic writes, per-task locks, and all-or-nothing change sets."""

from __future__ import annotations

import errno
import os
import stat
from _thread import get_ident  # (not `threading`: a one-task command never imports it)
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol

from specflux.base.crashpoint import crash_point
from specflux.base.durability import durable, sync_later
from specflux.base.errors import ParseError, SpecfluxError
from specflux.base.leftovers import remove_stale_temps

_UMASK = os.umask(0)
os.umask(_UMASK)
if TYPE_CHECKING:  # (a class made only for the type checker: `show` and `list` never journal)
    class WriteJournal(Protocol):
        """Where a change set's writes are made durable as one record, instead of one fsync (and one
        of the folder) per file: a run's event log, fsynced once per step (see `journaled`)."""

        def before(self, writes: list[tuple[Path, bytes | None, str]]) -> None:
            """Record (path, bytes before or None, text after) of every write, durably, before any of
            them is made: after a power loss the record is there to redo a write the disk lost."""

        def undone(self) -> None:
            """The writes recorded last were put back (a later write or the commit failed)."""


_journals: "dict[int, WriteJournal]" = {}  # thread id -> the WriteJournal of its change sets, if any


@contextmanager
def journaled(journal: "WriteJournal") -> Iterator[None]:
    """Within the block (in this thread), a change set records its writes in `journal` and then
    writes its files without fsyncs: one fsync in all (the journal's) for the writes of one step.
    A change set that also deletes files writes them the usual way."""
    me = get_ident()
    was = _journals.get(me)
    _journals[me] = journal
    try:
        yield
    finally:
        if was is None:
            del _journals[me]
        else:
            _journals[me] = was


_watchers: "dict[int, list[Path]]" = {}  # thread id -> the paths it wrote or removed, where watched


@contextmanager
def watching_writes() -> Iterator[list[Path]]:
    """The files this thread writes (`atomic_write`) or removes (a change set) within the block,
    in order: what specflux itself changed in a window (a session's bookkeeping after its agent
    stopped, while a `git status` started at the stop runs)."""
    me = get_ident()
    was = _watchers.get(me)
    _watchers[me] = seen = []
    try:
        yield seen
    finally:
        if was is None:
            del _watchers[me]
        else:
            was += seen
            _watchers[me] = was


def _wrote(path: Path) -> None:
    seen = _watchers.get(get_ident())
    if seen is not None:
        seen.append(path)


_clock: dict[int, int] = {}  # st_dev -> the latest change time this process saw a write of its own get


def observe_clock(st: os.stat_result) -> None:
    """Note the change time of a file this process has just written (its fstat): the file system's
    own clock had reached it. See `clock_passed`."""
    if st.st_ctime_ns > _clock.get(st.st_dev, 0):
        _clock[st.st_dev] = st.st_ctime_ns


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a file's bytes may have moved since another stat of it: inode (a replace), size
    and both times (a write in place). Equal keys mean unchanged bytes only where `clock_passed`."""
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def clock_passed(st: os.stat_result) -> bool:
    """Whether the clock of the file system `st` is on had passed the file's mtime and ctime before
    now (a write of this process since got a later change time): any change made to the file from
    now on gets a later time, so while its stat is unchanged, its bytes are too. Git's racy-entry
    rule, with a clock read from the file system itself rather than assumed from its granularity."""
    return _clock.get(st.st_dev, 0) > max(st.st_mtime_ns, st.st_ctime_ns)


def read_text(path: Path, shown_as: str | None = None) -> str:
    """The file's exact text: no newline translation; invalid UTF-8 is an error located at
    `shown_as` (the path as the user should see it) or `path`."""
    return decode(path.read_bytes(), shown_as or str(path))


def read_bytes(path: str) -> bytes:
    """The whole file, read with os.open/fstat/read: a third faster than open().read() for a
    file of a few KB (no buffer objects), and `list` reads thousands."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)  # one byte more than the size: a file that grew is seen
        if len(data) != size:  # it grew, shrank, or the read was short: read on to the end
            chunks = [data]
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            data = b"".join(chunks)
        return data
    finally:
        os.close(fd)


def decode(data: bytes, shown_as: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ParseError(f"not valid UTF-8 (byte {e.start})", shown_as, line) from None


class FileSystemError(SpecfluxError):
    """The file system refused a read or a write (permissions, a full disk, a folder in the way)."""

    errno: int | None = None  # the OSError's, where one said it

    @property
    def out_of_space(self) -> bool:
        """A full disk or a used-up quota: nothing wrong with the work, only with where it goes."""
        return self.errno in (errno.ENOSPC, errno.EDQUOT)


_ADVICE = {
    errno.ENOSPC: "the disk is full; free some space and try again",
    errno.EDQUOT: "the disk quota is used up; free some space and try again",
    errno.EROFS: "the file system is mounted read-only",
    errno.EPERM: "the operating system refused (is the file immutable? see `lsattr`)",
    errno.EACCES: "permission denied; check the permissions of the file and its folder",
    errno.ENOTDIR: "a file stands where a folder should be; move it away",
    errno.EISDIR: "a folder stands where a file should be; move it away",
    errno.EEXIST: "something else stands where specflux needs a folder; move it away",
}


def os_advice(e: OSError) -> str:
    """What an OSError means and what to do, in words (`the disk is full; free some space ...`)."""
    return _ADVICE.get(e.errno or 0, e.strerror or str(e))


def os_error(e: OSError, shown_as: str, doing: str = "write") -> FileSystemError:
    """One sentence for an OSError: what failed, where, and what to do."""
    advice = os_advice(e)
    error = FileSystemError(f"cannot {doing} this file: {advice}", shown_as)
    error.errno = e.errno
    return error


def check_writable(path: Path, shown_as: str) -> None:
    """Refuse to replace a file (or write into a folder) whose permissions say no one may write it.

    Checked on the mode bits, not with access(): the atomic replace would otherwise overwrite a
    read-only file (a rename needs only the folder's permission), and root passes every access().
    """
    for target, what in ((path, "file"), (path.parent, "folder")):
        try:
            mode = target.stat().st_mode
        except FileNotFoundError:
            continue
        if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
            where = shown_as if what == "file" else os.path.dirname(shown_as) or "."
            raise FileSystemError(f"the {what} is read-only; make it writable (chmod u+w) to change it", where)


def atomic_write(path: Path, text: str, *, sync: bool = True) -> None:
    """Replace `path` with `text` so that readers see the old file or the new one, never half.
    `sync=False`: without the fsyncs, for a file derived from others and rebuilt from them when it
    is missing, stale or broken (a run's state.json and narrative.md): after a power loss it may
    be the old one or empty, which its reader must recognise.

    Inside `not_durable()` (a replay into a throw-away clone, which no one reads while the replay
    writes it, and which a crash leaves to be thrown away) the bytes go into the file itself,
    where it is a plain file of one name: a rename over a file makes ext4 start writing the new
    one out at once (`auto_da_alloc`), ~0.1 ms a write against ~3 µs in place, and a 100-step
    replay writes ~800 times."""
    import tempfile  # not at the top: `show` and `list` never write

    if not durable() and _written_in_place(path, text.encode("utf-8")):
        _wrote(path)
        return
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    if sync and sync_later(path):  # at the end of a `synced_together` block, with the rest
        sync = False
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            if sync and durable():
                os.fsync(f.fileno())
            observe_clock(os.fstat(f.fileno()))
        crash_point(f"atomic:{path.name}")
        os.replace(tmp, path)
        _wrote(path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if sync:
        _fsync_dir(path.parent)


def _written_in_place(path: Path, data: bytes) -> bool:
    """`data` written into `path` itself (made if missing); False, with nothing written, where that
    would not do what a replace does: a symbolic link (a replace puts a file in its place, and
    writing through it could reach outside the clone), a file of several names, a read-only file."""
    flags = os.O_WRONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)  # (the umask applies, as to a replace)
    except OSError:  # a link (ELOOP), read-only (EACCES), made meanwhile (EEXIST): replace it
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return False
        crash_point(f"atomic:{path.name}")  # (where a replace is killed too: the file still the old one)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if st.st_size > len(data):
            os.ftruncate(fd, len(data))
        observe_clock(os.fstat(fd))
    finally:
        os.close(fd)
    return True


def _fsync_dir(folder: Path) -> None:
    if not durable():
        return
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
            import fcntl  # noqa: F401 - only to know whether flock exists here
        except ImportError:  # pragma: no cover - Windows
            import filelock

            self._fallback = filelock.FileLock(str(self.path))
            self._fallback.acquire()
            return
        from specflux.base.lock_wait import note_holder, wait_for

        fd = _open_lock(self.path)
        try:
            wait_for(fd, _shown(self.path), f"the lock {self.path.name}")
        except BaseException:
            os.close(fd)
            raise
        note_holder(fd)
        self._fd = fd

    def release(self) -> None:
        if self._fallback is not None:  # pragma: no cover
            self._fallback.release()
        elif self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def _open_lock(path: Path) -> int:
    """The lock file open for flock: for writing, created if need be; else, where this process may
    not write there (an agent's `specflux` in the sandbox, where the engine's folder is read-only),
    for reading, which is all flock needs, if the engine made it beforehand."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            try:
                return os.open(path, os.O_RDONLY)
            except OSError:
                pass
        where = path.parent if e.errno in (errno.EEXIST, errno.ENOTDIR) else path
        raise FileSystemError(f"cannot take the lock: {_ADVICE.get(e.errno or 0, e.strerror)}",
                              _shown(where)) from None


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


def _shown(path: Path) -> str:
    """`path` relative to the folder holding .specflux/ when it is inside one."""
    parts = path.parts
    if ".specflux" in parts:
        return "/".join(parts[parts.index(".specflux"):])
    return str(path)


_deferring = False  # a deferred_interrupts block is open (in the main thread)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C (and SIGTERM) until the block is done, then raise KeyboardInterrupt: a write
    and its commit, or their undoing, are never cut in half however often the user presses it."""
    import signal  # not at the top: `show` and `list` never write
    import threading

    global _deferring
    if threading.current_thread() is not threading.main_thread() or _deferring:
        yield  # another thread, or inside a block that already defers: the outer one raises, at its end
        return
    _deferring = True
    caught: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _deferring = False
    if caught:
        raise KeyboardInterrupt


class ChangeSet:
    """Writes gathered first, applied together, and undone together if a later step fails."""

    def __init__(self, shown: Callable[[Path], str] = _shown) -> None:
        self.pending: dict[Path, str] = {}
        self.removed: list[Path] = []
        self._originals: dict[Path, bytes | None] = {}
        self._journal: "WriteJournal | None" = None  # where the writes were recorded, if anywhere
        self.shown = shown

    def text_of(self, path: Path) -> str | None:
        """The text queued for `path` in this change set, or None."""
        return self.pending.get(path)

    def write(self, path: Path, text: str) -> None:
        self.pending[path] = text

    def remove(self, path: Path) -> None:
        """Delete `path` when the change set is applied (after every write)."""
        self.pending.pop(path, None)
        self.removed.append(path)

    @property
    def paths(self) -> list[Path]:
        return [*self.pending, *self.removed]

    def apply(self) -> list[Path]:
        """Write every pending file; returns the paths whose bytes actually changed.

        Every file is checked before the first is written; if a write still fails (a full disk),
        the files already written are put back, so a failure leaves every file as it was.
        """
        todo = []
        for path, text in self.pending.items():
            shown = self.shown(path)
            try:
                before = path.read_bytes()
            except FileNotFoundError:
                before = None
            except OSError as e:
                raise os_error(e, shown, "read") from None
            data = text.encode("utf-8")
            if before is not None and before == data:
                continue
            check_writable(path, shown)
            todo.append((path, before))
        journal = _journals.get(get_ident()) if todo and not self.removed else None
        if journal is not None:
            journal.before([(path, before, self.pending[path]) for path, before in todo])
            self._journal = journal
        changed = []
        try:
            for path, before in todo:
                self._originals[path] = before
                crash_point(f"writing:{path.name}")
                if ".specflux" not in path.parts:  # the user's own file (a write-back's source): what a
                    remove_stale_temps(path)  # kill left beside it would show in their `git status`
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(path, self.pending[path], sync=journal is None)
                except OSError as e:
                    del self._originals[path]
                    raise os_error(e, self.shown(path)) from None
                changed.append(path)
                crash_point(f"wrote:{path.name}")
            for path in self.removed:
                try:
                    self._originals[path] = path.read_bytes()
                    path.unlink()
                    _wrote(path)
                except FileNotFoundError:
                    self._originals.pop(path, None)
                    continue
                except OSError as e:
                    self._originals.pop(path, None)
                    raise os_error(e, self.shown(path), "delete") from None
                changed.append(path)
        except BaseException:
            self.rollback()
            raise
        return changed

    def rollback(self) -> None:
        """Put back every file this change set wrote (best effort: a file that cannot be put back
        is left for the caller's error to explain)."""
        for path, before in self._originals.items():
            try:
                if before is None:
                    path.unlink(missing_ok=True)
                else:
                    _restore(path, before)
            except OSError:
                pass
        self._originals.clear()
        if self._journal is not None:
            journal, self._journal = self._journal, None
            journal.undone()


def _restore(path: Path, data: bytes) -> None:
    """Put `data` back at `path`: atomically when there is room, else in place (a full disk may
    have room for the old bytes in the file's own blocks but none for a temporary copy)."""
    try:
        atomic_write(path, data.decode("utf-8"))
    except OSError:
        with open(path, "r+b") as f:
            f.write(data)
            f.truncate()
            f.flush()
            os.fsync(f.fileno())
