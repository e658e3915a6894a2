# Over 500 lines: it is also the Landlock launcher, run alone (`python -I -S sandbox.py`, only mountns.py beside it), so the rules of what a command may write stay here with Landlock, and the bwrap and sandbox-exec options that use them could leave only round an import circle.
"""Confining the writes of the commands an API agent runs (`run_command`).

A command may write inside the repository and its own temporary folder, never in `.git/` (git
runs its hooks from there, outside any sandbox) nor in `.specflux/` (the task files, which the
agent changes only through `check_criterion` and `end_session`). Reads stay unrestricted.

Three operating-system mechanisms, best first:

- **bubblewrap** (`bwrap`, Linux, where installed and able to start): a private mount namespace in
  which `/` is read-only and the repository, its temp folder and a fresh `/dev` are writable, with
  `.git` and `.specflux` mounted read-only again on top.
- **Landlock** (Linux 5.13 and later, no dependency): this file, run as a launcher
  (`python sandbox.py landlock --repo ROOT --write TMP [--mounts] -- COMMAND...`), applies it to
  itself and then `exec`s the command, so the command and every child inherit it. Landlock only
  *allows*, and a rule covers a whole directory tree, so `.git` cannot be carved out of a rule on
  the repository root. With `--mounts` (where this system lets a process make a mount namespace:
  `mountns.py`) the launcher mounts `.git` and `.specflux` read-only in a namespace of its own and
  allows writes beneath the whole root, top level included. Without, it grants writes beneath
  every top-level entry of the repository except `.git` and `.specflux`, and a command cannot
  create, delete or rename entries directly at the repository root (it can rewrite the files
  there): granting that on the root would let it create `.git/hooks/pre-commit`.
- **sandbox-exec** (macOS): a small Seatbelt profile. Written from the documentation, untested.

`choose(setting)` picks one (detection is cached per process); `Sandbox.argv` wraps a shell
command in it.

The launcher runs for every command, with `python -I -S`: module-level imports are the few
standard modules it needs (about 13 ms of start-up; dataclasses, pathlib, subprocess and platform
would add 20 ms more), and paths are plain strings.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat
import sys

PROTECTED = (".git", ".specflux")  # top-level entries of the repository a command may not write
SETTINGS = ("auto", "off", "landlock", "bwrap", "sandbox-exec")
SHELL = "/bin/sh"  # what subprocess uses for shell=True

# Devices a command may write to (not all of /dev). /dev/ptmx opens a new pseudo-terminal.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm")

_LABELS = {"landlock": "Landlock", "bwrap": "bubblewrap", "sandbox-exec": "sandbox-exec"}


# -- the choice ------------------------------------------------------------------------------


class Sandbox:
    """How `run_command` runs: `name` is "bwrap", "landlock" or "sandbox-exec" (confined),
    "none" (nothing available: `reason` says why) or "off" (switched off in config.toml)."""

    def __init__(self, name: str, reason: str = "", abi: int = 0, top_level: bool = True):
        self.name = name
        self.reason = reason  # for "none": why; for a confined one: a caveat, or ""
        self.abi = abi  # the Landlock ABI version, for "landlock"
        # A command may add and remove entries at the repository's top level (always under
        # bwrap; under Landlock where the launcher can make a mount namespace).
        self.top_level = top_level

    def __repr__(self) -> str:
        return f"Sandbox({self.name!r}, reason={self.reason!r})"

    @property
    def confined(self) -> bool:
        return self.name in _LABELS

    def describe(self) -> str:
        """One line for the start of the session and its progress-log entry."""
        if self.name == "off":
            return 'run_command is not sandboxed ([agent] sandbox = "off")'
        if self.name == "none":
            return (f"run_command is not sandboxed: {self.reason}; its commands can write anywhere this "
                    'user can (set [agent] sandbox = "off" in .specflux/config.toml to silence this)')
        where = "not .git/ or .specflux/"
        if not self.top_level:
            where += ", and no new files or folders at its top level"
        line = (f"run_command is sandboxed with {_LABELS[self.name]}: writes only inside the repository "
                f"({where}) and its temp folder")
        if self.name == "landlock" and not self.top_level:  # no mount namespace to hide it under
            line += "; it can still read the engine's private folder (the runs' event keys: docs/engine-state.md)"
        return f"{line}; {self.reason}" if self.reason else line

    @property
    def warning(self) -> str | None:
        """The line to show when commands run unconfined without the user having asked, else None."""
        return self.describe() if self.name == "none" else None

    @property
    def confines_network(self) -> bool:
        """Whether `argv(..., connect=PORTS)` confines the network: bubblewrap (a namespace of its
        own), Landlock from ABI 4 (TCP connections to those ports only)."""
        return self.name == "bwrap" or (self.name == "landlock" and self.abi >= 4)

    def argv(self, command: str, root: str | os.PathLike, tmp: str | os.PathLike,
             also: "tuple[str, ...] | list[str]" = (), hide: "list[str] | None" = None,
             connect: "list[int] | None" = None) -> list[str]:
        """The argv that runs shell `command` in this sandbox, writing only beneath `root` (minus
        `.git` and `.specflux`) and `tmp`, and the existing folders `also` (which may be inside
        `.specflux`: an agent CLI's task files and hand-in), and not reading the folders `hide`
        (None: the engine's private folders of `root`, store/state_dir.py; under Landlock only where
        it has a mount namespace). Run it with cwd `root` and TMPDIR `tmp`.
        With `connect` (where `confines_network`), no network: under Landlock TCP connections to
        those ports only, under bubblewrap a network namespace of its own (loopback alone)."""
        shell = [SHELL, "-c", command]
        if hide is None:
            from specflux.store.state_dir import hidden  # not at the top: the launcher runs alone

            hide = hidden(root)
        root, tmp = os.path.realpath(root), os.path.realpath(tmp)
        also = [os.path.realpath(path) for path in also]
        hide = [os.path.realpath(path) for path in hide]
        if self.name == "landlock":
            extra = [arg for path in also for arg in ("--write", path)]
            extra += [arg for path in hide for arg in ("--hide", path)] if self.top_level else []
            if connect is not None and self.confines_network:
                extra += ["--connect", ",".join(map(str, connect)) or "-"]
            return [sys.executable, "-I", "-S", os.path.abspath(__file__), "landlock",
                    "--repo", root, "--write", tmp, *extra, *(["--mounts"] if self.top_level else []), "--", *shell]
        if self.name == "bwrap":
            extra = [arg for path in also for arg in ("--bind", path, path)]
            extra += [arg for path in hide for arg in ("--tmpfs", path, "--remount-ro", path)]
            if connect is not None:
                extra.append("--unshare-net")
            return [_which("bwrap") or "bwrap", *bwrap_options(root, tmp), *extra, "--", *shell]
        if self.name == "sandbox-exec":
            return ["sandbox-exec", *seatbelt_options(root, tmp, also, hide), *shell]
        return shell


def choose(setting: str = "auto") -> Sandbox:
    """The sandbox for `[agent] sandbox = setting`.

    "auto" gives the best one available, or a Sandbox named "none" whose `reason` says why there
    is none; an explicit choice that is not available raises AgentError.
    """
    if setting not in SETTINGS:
        _fail(f"unknown sandbox {setting!r}; choose one of {', '.join(SETTINGS)}")
    if setting == "off":
        return Sandbox("off")
    if setting != "auto":
        problem = _problem(setting)
        if problem:
            _fail(f'[agent] sandbox = "{setting}", but {_LABELS[setting]} cannot be used here: {problem}')
        return _sandbox(setting)
    candidates = {"linux": ("bwrap", "landlock"), "darwin": ("sandbox-exec",)}.get(sys.platform, ())
    problems = []
    for name in candidates:
        problem = _problem(name)
        if problem is None:
            return _sandbox(name)
        problems.append(problem)
    return Sandbox("none", reason=" and ".join(problems) or f"specflux has no sandbox for {sys.platform}")


def _fail(message: str):
    from specflux.base.errors import AgentError  # here: the launcher runs without specflux importable

    raise AgentError(message)


def _problem(name: str) -> str | None:
    """Why sandbox `name` cannot be used in this process, or None."""
    if name == "landlock":
        return _landlock_problem()
    if name == "bwrap":
        return _bwrap_problem(_which("bwrap"))
    return _seatbelt_problem()


def _sandbox(name: str) -> Sandbox:
    if name != "landlock":
        return Sandbox(name)
    abi, caveats = _landlock_abi(), []
    mounts = _mounts_problem()
    if mounts:
        caveats.append(f"the top level stays closed because no mount namespace can be made here ({mounts})")
    if abi < 3:
        caveats.append(f"this kernel's Landlock (ABI {abi}) cannot stop truncate(2) of existing files")
    return Sandbox(name, reason="; ".join(caveats), abi=abi, top_level=mounts is None)


def _which(program: str) -> str | None:
    import shutil  # here, like subprocess below: the launcher does not need them

    return shutil.which(program)


# -- what a command may write in the repository ----------------------------------------------


def protected_targets(root: str) -> list[str]:
    """Where `.git` and `.specflux` really are, when that is elsewhere inside the repository (a
    symlink, or a `.git` file saying `gitdir: PATH`; PATH also as written, when that passes
    through a symlink inside the repository)."""
    found = []
    for name in PROTECTED:
        path = os.path.join(root, name)
        targets = []
        if os.path.islink(path):
            targets = [os.path.realpath(path)]
        elif name == ".git" and os.path.isfile(path):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    gitdir = f.read().partition("gitdir:")[2].strip()
            except OSError:
                continue
            written = os.path.normpath(os.path.join(root, gitdir)) if gitdir else None
            targets = [os.path.realpath(written), written] if written else []
        for target in dict.fromkeys(targets):
            if target != root and target.startswith(root + os.sep):
                found.append(target)
    return found


def root_is_writable(root: str) -> bool:
    """Whether commands may add and remove entries at the top level of `root`: only where `.git`
    and `.specflux` are both there and, like every `read_only_entries`, not symlinks (a symlink
    cannot be mounted on). Else a command could create a `.git` that git, run later outside the
    sandbox, would pick up with its hooks, or a `.specflux/config.toml` switching the sandbox off."""
    paths = [os.path.join(root, name) for name in PROTECTED]
    if not all(os.path.exists(p) and not os.path.islink(p) for p in paths):
        return False
    return not any(os.path.islink(os.path.join(root, name)) for name in read_only_entries(root))


def read_only_entries(root: str) -> list[str]:
    """The top-level entries to mount read-only where the root is writable: `.git`, `.specflux`
    and any entry holding where one of them really is (the whole entry: were only the folder deep
    inside it read-only, a command could rename the entry away and put a new one in its place)."""
    holders = {os.path.relpath(t, root).split(os.sep)[0] for t in protected_targets(root)}
    return [*PROTECTED, *sorted(holders - set(PROTECTED))]


def writable_entries(root: str) -> list[str]:
    """The names of the top-level entries of `root` a command may write beneath: not `.git`,
    `.specflux` (in any letter case), a symlink, or an entry holding where one of them really is."""
    holders = {os.path.relpath(t, root).split(os.sep)[0] for t in protected_targets(root)}
    with os.scandir(root) as entries:
        names = [e.name for e in entries if not e.is_symlink()]
    return sorted(n for n in names if n.lower() not in PROTECTED and n not in holders)


# -- bubblewrap ------------------------------------------------------------------------------


# A PID namespace with its own /proc: what the command leaves running is killed when it exits, and
# it sees (and signals) no process outside. --cap-drop ALL: bwrap run by root leaves root its
# capabilities, and with CAP_SYS_ADMIN a command could simply unmount the read-only .git.
_BWRAP_BASE = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--die-with-parent",
               "--cap-drop", "ALL")


@functools.cache
def _bwrap_problem(path: str | None) -> str | None:
    """Why bwrap at `path` cannot sandbox here (it needs namespaces), or None: runs it once."""
    import subprocess

    if path is None:
        return "bwrap is not installed"
    probe = [path, *_BWRAP_BASE, "--", "true"]
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{path} does not start ({e})"
    if done.returncode:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{path} cannot create its namespaces here ({said[-1] if said else f'exit {done.returncode}'})"
    return None


def temp_env(tmp: str | os.PathLike) -> dict[str, str]:
    """The environment that sends a confined command's temporary files to `tmp`, the one folder
    outside the repository it may write: TMPDIR, TMP and TEMP, and zsh's TMPPREFIX (zsh puts a
    here-document's temporary file there, default /tmp/zsh, not in TMPDIR)."""
    tmp = os.fspath(tmp)
    return {"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp, "TMPPREFIX": os.path.join(tmp, "zsh")}


def bwrap_options(root: str, tmp: str) -> list[str]:
    """bwrap options: everything read-only but a fresh /dev, `tmp` and the repository, whose
    `read_only_entries` are mounted read-only on top (a mount point cannot be removed or renamed,
    so they cannot be swapped either).

    Where the root is not writable (`root_is_writable`), only its other top-level entries are.
    """
    options = list(_BWRAP_BASE)
    if root_is_writable(root):
        options += ["--bind", root, root]
        for name in read_only_entries(root):
            path = os.path.join(root, name)
            options += ["--ro-bind", path, path]
    else:
        for name in writable_entries(root):
            path = os.path.join(root, name)
            options += ["--bind", path, path]
    return [*options, "--bind", tmp, tmp, "--chdir", root]


# -- Landlock --------------------------------------------------------------------------------

# Syscall numbers: the same on every architecture since Linux 5.1's unified table (not alpha).
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

# Filesystem access rights (linux/landlock.h). Reads (EXECUTE, READ_FILE, READ_DIR) are never
# handled, so they stay allowed everywhere.
WRITE_FILE = 1 << 1
REMOVE_DIR, REMOVE_FILE = 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (1 << n for n in range(6, 13))
REFER = 1 << 13  # ABI 2: rename and link across directories
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5: ioctl on devices
_V1 = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
       | MAKE_BLOCK | MAKE_SYM)
_FILE_RIGHTS = WRITE_FILE | TRUNCATE | IOCTL_DEV  # the only write rights a rule on a non-directory takes


def write_rights(abi: int) -> int:
    """The write-type rights Landlock ABI `abi` knows: the ones to handle (deny unless allowed)."""
    rights = _V1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    # Not the scopes (ABI 6). A kernel older than ABI 4 takes the network field while it is 0.
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


_RULE_NET_PORT, CONNECT_TCP = 2, 1 << 1  # ABI 4: TCP connect(2) only to the ports allowed


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.cache
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args) -> int:
    """syscall(2); OSError on failure. Integers go as longs, the width the kernel reads."""
    wrapped = [a if isinstance(a, ctypes.c_void_p) else ctypes.c_long(a) for a in args]
    result = _libc().syscall(ctypes.c_long(number), *wrapped)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _landlock_abi() -> int:
    """The kernel's Landlock ABI version; OSError saying why where there is none."""
    if sys.platform != "linux":
        raise OSError(errno.ENOSYS, "Landlock is Linux-only")
    kernel, machine = os.uname().release, os.uname().machine
    if machine.startswith("alpha"):
        raise OSError(errno.ENOSYS, "Landlock's syscall numbers differ on alpha")
    try:
        return _syscall(_CREATE_RULESET, ctypes.c_void_p(None), 0, _CREATE_RULESET_VERSION)
    except OSError as e:
        if e.errno == errno.ENOSYS:
            why = f"this kernel ({kernel}) has no Landlock (it needs Linux 5.13 or later)"
        elif e.errno == errno.EOPNOTSUPP:
            why = f"Landlock is built into this kernel ({kernel}) but not enabled (see the lsm= boot option)"
        else:
            why = f"Landlock is not usable here ({kernel}: {e.strerror})"
        raise OSError(e.errno, why) from None
    except (AttributeError, TypeError) as e:  # no libc syscall() to call
        raise OSError(errno.ENOSYS, f"cannot call the kernel from Python here ({e})") from None


@functools.cache
def _landlock_problem() -> str | None:
    try:
        _landlock_abi()
    except OSError as e:
        return e.strerror
    return None


def _allow(ruleset: int, path: str, rights: int, dir_fd: int | None = None) -> None:
    """Let the ruleset write beneath `path`, not following a final symlink: all of `rights` for
    a directory, the file rights among them for anything else."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dir_fd)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            return
        allowed = rights if stat.S_ISDIR(mode) else rights & _FILE_RIGHTS
        attr = _PathBeneathAttr(allowed, fd)
        _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_void_p(ctypes.addressof(attr)), 0)
    finally:
        os.close(fd)


def restrict_writes(repo: str, also: list[str], mounts: bool = False, hide: "list[str] | None" = None,
                    connect: list[int] | None = None) -> None:
    """Confine this process and its future children with Landlock: writes only beneath the
    writable entries of `repo`, the folders `also` and the DEVICES, and with `connect` (ABI 4)
    TCP connections only to those ports. Irreversible.

    With `mounts`, where the root is writable (`root_is_writable`): in a mount namespace of its
    own where the `read_only_entries` are mounted read-only, writes beneath the whole of `repo`.
    """
    abi = _landlock_abi()
    rights = write_rights(abi)
    if connect is not None and abi < 4:
        raise OSError(errno.ENOTSUP, f"this kernel's Landlock (ABI {abi}) cannot confine the network (it needs ABI 4)")
    attr = _RulesetAttr(rights, CONNECT_TCP if connect is not None else 0)
    ruleset = _syscall(_CREATE_RULESET, ctypes.c_void_p(ctypes.addressof(attr)), ctypes.sizeof(attr), 0)
    try:
        whole = mounts and root_is_writable(repo)
        if whole:
            mountns = _mountns()
            mountns.enter()  # first: a descriptor opened before it names the host's mounts
        root_fd = os.open(repo, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:  # entries opened relative to the root, so a swapped path cannot redirect a rule
            if whole:
                for name in read_only_entries(repo):
                    mountns.make_read_only(root_fd, name)
                for path in also:  # a folder inside .specflux an agent CLI writes through specflux
                    if path.startswith(repo + os.sep):
                        mountns.make_writable(path)
                for path in hide or []:  # the engine's private folder: an empty one on top of it
                    mountns.hide(path)
                _allow(ruleset, ".", rights, dir_fd=root_fd)
            for name in [] if whole else writable_entries(repo):
                try:
                    _allow(ruleset, name, rights, dir_fd=root_fd)
                except FileNotFoundError:  # removed since it was listed: nothing to allow
                    pass
        finally:
            os.close(root_fd)
        for path in [*also, *(d for d in DEVICES if os.path.exists(d))]:
            _allow(ruleset, os.path.realpath(path), rights)
        for port in connect or ():
            rule = _NetPortAttr(CONNECT_TCP, port)
            _syscall(_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.c_void_p(ctypes.addressof(rule)), 0)
        _no_new_privs()
        _syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    _drop_capabilities()


def _mountns():
    """The sibling module `mountns`, also from the launcher (a script: no package to import from)."""
    if __package__:
        from specflux.agent import mountns
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import mountns
    return mountns


@functools.cache
def _mounts_problem() -> str | None:
    """Why the Landlock launcher cannot open the repository's top level here (it needs a mount
    namespace), or None: runs it once, on a scratch repository, and checks what it allowed."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="specflux-probe-") as scratch:
        repo, tmp = os.path.join(scratch, "repo"), os.path.join(scratch, "tmp")
        for path in (tmp, *(os.path.join(repo, name) for name in PROTECTED)):
            os.makedirs(path)
        argv = Sandbox("landlock").argv("touch new && ! touch .git/x 2>/dev/null", repo, tmp, hide=[])
        try:
            done = subprocess.run(argv, cwd=repo, stdin=subprocess.DEVNULL, capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"the launcher does not start ({e})"
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        if done.returncode:
            if said:
                return said[-1].rpartition("so it did not run: ")[2]
            return f"the launcher's check failed (exit {done.returncode})"
        if not os.path.exists(os.path.join(repo, "new")) or os.path.exists(os.path.join(repo, ".git", "x")):
            return "the launcher's check did not do what it should"
    return None


def _no_new_privs() -> None:
    """Landlock requires no_new_privs (or CAP_SYS_ADMIN); it also keeps setuid programs from
    gaining privileges inside the sandbox."""
    if _libc().prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                     ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")


_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4


def _drop_capabilities() -> None:
    """Empty the capability bounding set, so that a command started by root gets none at exec.

    Landlock holds against capabilities, but some need no file to write: loading a kernel
    module, rebooting. (Best effort: without CAP_SETPCAP there is nothing this process may drop,
    and a container that took it away has usually taken the others too.)
    """
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    prctl = _libc().prctl
    prctl(ctypes.c_int(_PR_CAP_AMBIENT), ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0),
          ctypes.c_ulong(0), ctypes.c_ulong(0))
    for cap in range(last + 1):
        prctl(ctypes.c_int(_PR_CAPBSET_DROP), ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0),
              ctypes.c_ulong(0))


# -- macOS sandbox-exec (untested: written from Apple's and others' published profiles) ------


@functools.cache
def _seatbelt_problem() -> str | None:
    if sys.platform != "darwin":
        return "sandbox-exec is macOS-only"
    if _which("sandbox-exec") is None:
        return "sandbox-exec is not on PATH"
    return None


_SEATBELT_DEVICES = ('(literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") (literal "/dev/ptmx") '
                     '(literal "/dev/dtracehelper") (regex #"^/dev/ttys[0-9]+$") (regex #"^/dev/fd/[0-9]+$")')


def seatbelt_options(root: str, tmp: str, also: "list[str] | tuple[str, ...]" = (),
                     hide: "list[str] | tuple[str, ...]" = ()) -> list[str]:
    """sandbox-exec options: deny every write, allow the repository, `tmp` and a few devices,
    then deny `.git` and `.specflux` again (the last matching rule wins). Paths go in as -D
    parameters, so the profile needs no quoting of them; they are real paths (/private/var/...,
    not /var/...), which is what Seatbelt matches."""
    protected = [os.path.join(root, name) for name in PROTECTED] + protected_targets(root)
    params = {"REPO": root, "TMP": tmp, **{f"P{i}": p for i, p in enumerate(protected)},
              **{f"A{i}": p for i, p in enumerate(also)}, **{f"H{i}": p for i, p in enumerate(hide)}}
    denied = " ".join(f'(subpath (param "P{i}"))' for i in range(len(protected)))
    again = " ".join(f'(subpath (param "A{i}"))' for i in range(len(also)))
    profile = ("(version 1) (allow default) (deny file-write*) "
               f'(allow file-write* (subpath (param "REPO")) (subpath (param "TMP")) {_SEATBELT_DEVICES}) '
               f"(deny file-write* {denied})" + (f" (allow file-write* {again})" if also else "")
               + "".join(f' (deny file-read* (subpath (param "H{i}")))' for i in range(len(hide))))
    defines = [arg for key, value in params.items() for arg in ("-D", f"{key}={value}")]
    return [*defines, "-p", profile]


# -- the Landlock launcher -------------------------------------------------------------------

_USAGE = ("usage: python sandbox.py landlock --repo DIR [--write DIR]... [--hide DIR]... [--connect PORTS] [--mounts] "
          "-- COMMAND [ARG]...")


def _parse(args: list[str]) -> tuple[str, list[str], bool, list[int] | None, list[str], list[str]] | None:
    """(repo, other writable folders, --mounts, the ports of --connect (comma-separated, "-" for
    none; None: the network is not confined), command, folders to hide) from the launcher's
    arguments, or None."""
    if len(args) < 2 or args[0] != "landlock" or "--" not in args:
        return None
    split = args.index("--")
    options, command = args[1:split], args[split + 1:]
    mounts = "--mounts" in options
    options = [o for o in options if o != "--mounts"]
    if not command or len(options) % 2:
        return None
    repo, also, connect, hide = None, [], None, []
    for flag, value in zip(options[::2], options[1::2]):
        if flag == "--repo":
            repo = value
        elif flag == "--write":
            also.append(value)
        elif flag == "--hide":
            hide.append(value)
        elif flag == "--connect" and all(p.isdigit() for p in value.split(",") if p != "-"):
            connect = [int(p) for p in value.split(",") if p != "-"]
        else:
            return None
    return (repo, also, mounts, connect, command, hide) if repo is not None else None


def _launch(args: list[str]) -> int:
    """Apply Landlock to this process, then become the command. Never runs it unconfined."""
    parsed = _parse(args)
    if parsed is None:
        print(_USAGE, file=sys.stderr)
        return 2
    repo, also, mounts, connect, command, hide = parsed
    try:
        restrict_writes(os.path.realpath(repo), also, mounts, hide, connect)
    except OSError as e:
        print(f"specflux sandbox: cannot confine the command with Landlock, so it did not run: {e.strerror or e}",
              file=sys.stderr)
        return 126
    try:
        os.execvp(command[0], command)
    except OSError as e:
        print(f"specflux sandbox: {command[0]}: {e.strerror}", file=sys.stderr)
        return 127 if e.errno == errno.ENOENT else 126


if __name__ == "__main__":
    sys.exit(_launch(sys.argv[1:]))
