"""Read-only mounts in a private mount namespace: how the Landlock launcher (`sandbox.py`) lets a
command add and remove entries at the repository's top level while `.git` and `.specflux` stay
unwritable.

Landlock alone cannot do that: it only allows, and a rule on the repository root covers every
folder beneath it, `.git/hooks` included. So the launcher first moves itself into a mount
namespace of its own, mounts `.git` and `.specflux` read-only on top of themselves there, and only
then lets Landlock allow writes beneath the whole root. Inside, a write into them fails with EROFS,
and a mount point cannot be removed, renamed or replaced (EBUSY); Landlock then forbids mount and
umount, so the command cannot take the mounts away, and outside the namespace nothing changes.

Root gets the namespace with `unshare(CLONE_NEWNS)`; anyone else through a user namespace first,
which maps the user to itself (no other identity: files keep their owner). Where user namespaces
are switched off (some distributions, most containers), `enter` raises and the launcher's caller
knows beforehand (`sandbox._mounts_problem` tries it once).

Standard library only, no specflux import: the launcher runs as a script under `python -I -S`,
single-threaded, which unshare(CLONE_NEWUSER) requires.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_REC, MS_SLAVE = 0x4000, 1 << 19
# The new mount API (Linux 5.2; mount_setattr 5.12): older than Landlock (5.13), so always there.
# Syscall numbers from the unified table, the same on every architecture but alpha.
_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442
OPEN_TREE_CLONE = 1
AT_EMPTY_PATH, AT_RECURSIVE = 0x1000, 0x8000
MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH = 0x4, 0x40
MOUNT_ATTR_RDONLY = 0x1


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def _syscall(number: int, what: str, *args) -> int:
    return _check(_libc.syscall(ctypes.c_long(number), *args), what)


def enter() -> None:
    """Move this process into a mount namespace of its own, whose mounts receive the host's
    later changes but send none back. OSError when the system does not allow it."""
    if _libc.unshare(ctypes.c_int(CLONE_NEWNS)) != 0:
        code = ctypes.get_errno()
        if code != errno.EPERM:
            raise OSError(code, f"unshare(CLONE_NEWNS): {os.strerror(code)}")
        uid, gid = os.geteuid(), os.getegid()
        _check(_libc.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNS)), "unshare(CLONE_NEWUSER)")
        for name, line in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(line)
    # Without this, root's mounts below could propagate back to the host's shared mounts.
    _check(_libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_SLAVE), None), "mount --make-rslave /")


def make_read_only(dir_fd: int, name: str) -> None:
    """Mount entry `name` of the folder open as `dir_fd` read-only on top of itself, with all the
    mounts beneath it. Call after `enter`, with `dir_fd` opened after it too. Never follows a
    symlink: `name` is opened without following one and the mount is made from that descriptor,
    so swapping a path meanwhile changes nothing."""
    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            raise OSError(errno.ELOOP, f"{name} is a symlink")
        _remount_on_itself(fd, _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0), AT_EMPTY_PATH | AT_RECURSIVE)
    finally:
        os.close(fd)


def make_writable(path: str) -> None:
    """Mount the folder `path`, beneath one that `make_read_only` made read-only, writable again
    on top of itself (an agent CLI's hand-in folder inside `.specflux`, say). Call after
    `make_read_only`. Never follows a symlink."""
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_DIRECTORY)
    try:
        _remount_on_itself(fd, _MountAttr(0, MOUNT_ATTR_RDONLY, 0, 0), AT_EMPTY_PATH)
    finally:
        os.close(fd)


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8


def hide(path: str) -> None:
    """Mount an empty, read-only tmpfs on the folder `path` (the engine's private folder, whose
    keys and locks no command may read or open). Call after `enter`. Never follows a symlink."""
    fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_DIRECTORY)
    try:
        target = f"/proc/self/fd/{fd}".encode()
        flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        _check(_libc.mount(b"tmpfs", target, b"tmpfs", ctypes.c_ulong(flags), b"size=4k,mode=0500"), f"hide {path}")
    finally:
        os.close(fd)


def _remount_on_itself(fd: int, attr: "_MountAttr", setattr_flags: int) -> None:
    """Clone the mount tree at `fd` (with the mounts beneath it), give the clone `attr` (with
    `setattr_flags`: AT_RECURSIVE for every mount in it, else its top one), and mount it on `fd`."""
    empty = ctypes.c_char_p(b"")
    tree = _syscall(_OPEN_TREE, "open_tree", ctypes.c_int(fd), empty,
                    ctypes.c_uint(OPEN_TREE_CLONE | os.O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE))
    try:
        _syscall(_MOUNT_SETATTR, "mount_setattr", ctypes.c_int(tree), empty, ctypes.c_uint(setattr_flags),
                 ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)))
        _syscall(_MOVE_MOUNT, "move_mount", ctypes.c_int(tree), empty, ctypes.c_int(fd), empty,
                 ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
    finally:
        os.close(tree)
