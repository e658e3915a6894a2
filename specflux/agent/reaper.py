"""Ending every process an agent's session started, `setsid` daemons included.

A process group is not enough: a process that calls `setsid` (or is double-forked into a session
of its own) leaves the group, and a `kill` of the group misses it. It then goes on writing into
the work tree after the session, or holds a lock of the engine's (`flock` needs only a descriptor
opened for reading) and freezes the next run.

So an agent's command runs under this launcher, `python -I -S reaper.py --parent PID -- COMMAND...`.
On Linux it makes itself a *child subreaper* (`prctl(PR_SET_CHILD_SUBREAPER)`): every process
beneath it whose parent exits becomes its child, not init's, so nothing the command starts can
leave its tree. It asks for SIGTERM when specflux (PID) dies (`PR_SET_PDEATHSIG`), starts the
command and waits. When the command exits, or SIGTERM comes (specflux ending the session: `stop`,
or dying), it kills every process left beneath it, waits them out, and exits with the command's
status (128 + N for a command killed by signal N). One reaper per session: parallel lanes'
sessions never see each other's processes.

Under bubblewrap the agent also runs in a PID namespace of its own (`--unshare-pid`): there the
kernel kills what is left when the command exits, and the agent cannot see or signal anything
outside. Elsewhere (macOS) the launcher only starts the command and waits; a session's end kills
its process group.

Standard library only, no specflux import: it is run as a script for every agent CLI session and
every `run_command`, where start-up time counts.
"""

from __future__ import annotations

import _signal as signal  # the C module: `signal` imports enum, a sixth of the launcher's start
import ctypes
import os
import sys

_PR_SET_PDEATHSIG, _PR_SET_CHILD_SUBREAPER = 1, 36
GRACE_S = 10  # how long `stop` waits for the reaper to end everything before it kills the group


class _Stop(Exception):
    pass


def argv(command: list[str]) -> list[str]:
    """`command` under the reaper, whose parent is this process."""
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), "--parent", str(os.getpid()), "--", *command]


def stop(proc, grace_s: float = GRACE_S) -> None:
    """End the session of `proc` (a subprocess.Popen of `argv`, started in a session of its own)
    and everything it started, and reap it: SIGTERM to the reaper, which kills every process
    beneath it; SIGKILL to its process group as well if it has not ended after `grace_s`."""
    import subprocess

    try:
        proc.send_signal(signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def live_descendants(pid: int) -> list[int]:
    """Every process beneath `pid` that is not a zombie, parents before their children (read
    from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in (b"Z", b"X"):
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), ()):
            found.append(child)
            todo.append(child)
    return found


def kill_all() -> int:
    """Kill every process beneath this one and reap it; the number killed. Orphans of the
    killed come to this process (a subreaper), and are found on the next pass."""
    killed = 0
    while True:
        for pid in live_descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:  # no child left: nothing beneath this process
            return killed
        except InterruptedError:
            pass


def _prctl(option: int, value: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                      ctypes.c_ulong(0)) == 0


def _stop(signum, frame):
    raise _Stop


def _status(status: int) -> int:
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def run(parent: int, command: list[str]) -> int:
    """Run `command` as described above; its exit status."""
    linux = sys.platform.startswith("linux")
    if linux:
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _stop)
    if parent and os.getppid() != parent:  # specflux died before the death signal was asked for
        return 128 + signal.SIGTERM
    status, me, stopped = 128 + signal.SIGTERM, os.getpid(), False
    try:
        child = os.fork()
        if child == 0:
            for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(signum, signal.SIG_DFL)
            try:
                os.execvp(command[0], command)
            except OSError as e:
                print(f"specflux: {command[0]}: {e.strerror}", file=sys.stderr)
                os._exit(127 if isinstance(e, FileNotFoundError) else 126)
        while True:  # orphans of the command are this process's children too: wait for the command
            pid, raw = os.waitpid(-1, 0)
            if pid == child:
                status = _status(raw)
                break
    except _Stop:
        if os.getpid() != me:  # the signal came to the child before it could reset its handlers
            os._exit(128 + signal.SIGTERM)
        stopped = True
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    if linux:
        kill_all()
    elif stopped:  # no subreaper: the process group is what there is
        os.killpg(0, signal.SIGKILL)
    return status


def _main(args: list[str]) -> int:
    parent = 0
    if len(args) >= 2 and args[0] == "--parent":
        parent, args = int(args[1]), args[2:]
    if not args or args[0] != "--" or len(args) < 2:
        print("usage: python reaper.py [--parent PID] -- COMMAND [ARG]...", file=sys.stderr)
        return 2
    return run(parent, args[1:])


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
