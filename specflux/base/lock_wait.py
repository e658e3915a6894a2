"""Waiting for an `flock` with a deadline, and naming who holds it when the deadline passes.

`flock` needs only a descriptor opened for reading, so any process that can open a lock file can
hold it: a leftover of an agent session (`setsid`, outliving its session) is enough to stop every
engine that waits for that lock. No wait of the engine is endless: `wait_for(fd, ...)` tries the
lock, sleeps a little longer each time (10 ms up to 0.5 s), and after SPECFLUX_LOCK_TIMEOUT seconds
(60 unless set) raises LockTimeout, whose message names the holder and what to do.

The holder comes from the kernel (`/proc/locks` lists every flock with the pid that took it and
the file's device and inode), with its command line from `/proc/PID/cmdline`; where that says
nothing (another system, a pid of another namespace), from the note the holder wrote into the lock
file when it took it (`note_holder`: its pid and command), which only a holder that could open the
file for writing leaves.
"""

from __future__ import annotations

import os
import sys
import time

from specflux.base.errors import SpecfluxError

DEFAULT_TIMEOUT = 60.0


class LockTimeout(SpecfluxError):
    """A lock was not free within the timeout (SPECFLUX_LOCK_TIMEOUT)."""


def timeout() -> float:
    """SPECFLUX_LOCK_TIMEOUT in seconds (60 unless set; a bad value is the default)."""
    try:
        value = float(os.environ.get("SPECFLUX_LOCK_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value >= 0 else DEFAULT_TIMEOUT


def wait_for(fd: int, shown: str, what: str) -> None:
    """Take an exclusive flock on `fd` (the lock file `shown`, which is `what`: "the lock of task
    7"), waiting at most `timeout()` seconds; LockTimeout naming the holder after that."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    limit = timeout()
    deadline = time.monotonic() + limit
    pause = 0.01
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockTimeout(f"waited {limit:g} s for {what} and it is still held: {holder(fd)}; if that process "
                              "is a leftover (of an agent session, say), end it and try again; if it is a specflux "
                              "still at work, wait for it or raise SPECFLUX_LOCK_TIMEOUT", shown)
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.5)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            continue


def note_holder(fd: int) -> None:
    """Write this process's pid and command into the lock file open as `fd` (which it holds): what
    a waiter names when the kernel cannot say. Best effort (a descriptor opened read-only cannot).

    The note is written over the old one, then the file cut to its length; never emptied first: on
    ext4, cutting a file to nothing makes its next close write its data back at once (auto_da_alloc,
    meant for programs that truncate and rewrite), ~3 ms on every lock taken. A note this process
    wrote already (the same lock taken again) is left as it is."""
    note = f"{os.getpid()} {shown_command(sys.argv)}\n".encode("utf-8", "replace")
    try:
        if os.pread(fd, len(note) + 1, 0) == note:
            return
        os.pwrite(fd, note, 0)
        os.ftruncate(fd, len(note))
    except OSError:
        pass


def holder(fd: int) -> str:
    """Who holds the flock on the file open as `fd`: "pid 123 (sleep 1000)", or what is known."""
    st = os.fstat(fd)
    pids = _kernel_holders(st.st_dev, st.st_ino)
    if pids:
        return ", ".join(f"pid {pid} ({_command(pid)})" for pid in pids)
    try:
        note = os.pread(fd, 512, 0).decode("utf-8", "replace").split("\n", 1)[0].strip()  # (the line being written)
    except OSError:
        note = ""
    pid, _, command = note.partition(" ")
    if pid.isdigit():
        return f"pid {pid} ({command or 'command unknown'}), as its note in the lock file says"
    return "a process the system does not name (no /proc/locks here)"


def _kernel_holders(dev: int, ino: int) -> list[int]:
    """The pids /proc/locks gives for flocks on the file (`dev`, `ino`), besides this process."""
    want = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    pids = []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 08:02:5678 0 EOF" ("->" marks a waiter: not a holder)
                if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK":
                    continue
                if fields[5] == want and fields[4].isdigit() and int(fields[4]) not in (0, os.getpid()):
                    pids.append(int(fields[4]))
    except OSError:
        return []
    return sorted(set(pids))


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "gone, or not visible from here"
    return shown_command([a.decode("utf-8", "replace") for a in argv if a]) or "no command line"


def shown_command(argv: list[str]) -> str:
    """A command on one line: each argument's whitespace collapsed and cut at 60 characters."""
    parts = [" ".join(arg.split()) for arg in argv]
    return " ".join(p if len(p) <= 60 else p[:57] + "..." for p in parts)[:300]
