"""What the work tree holds now: each path's `git status` (porcelain v2) and its fingerprint.

A fingerprint is what is at a path, read from the disk: a content hash (plus the exec bit), a link
target, "directory" or "deleted"; two `Git.status_snapshot`s compared by `changed_paths` tell which
paths changed between them.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from specflux.base.errors import GitError
from specflux.base.records import record

REGULAR = ("100644", "100755")  # the modes of a regular file
UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})  # porcelain v1 letters
# `git status` as read_status reads it: untracked files one by one, renames split, no index refresh
# written back (a status running beside specflux's own writes takes no lock)
STATUS_ARGS = ("--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z", "-uall", "--no-renames")


@record(frozen=True)
class StatusEntry:
    """One line of `git status --porcelain=v2`: HEAD, index and work-tree state of a path."""

    xy: str  # v2 letters ("." unchanged), "??" untracked, "u" + letters for an unmerged path
    head_mode: str = "000000"
    index_mode: str = "000000"
    work_mode: str = "000000"
    head_sha: str = ""
    index_sha: str = ""

    @property
    def untracked(self) -> bool:
        return self.xy == "??"

    @property
    def index_is_head(self) -> bool:
        """The index entry equals HEAD's (both absent for an untracked path)."""
        if self.xy[0] == "u":
            return False
        return (self.head_mode, self.head_sha) == (self.index_mode, self.index_sha)

    @property
    def v1(self) -> str:
        if self.xy[0] == "u":
            return self.xy[1:]
        return "??" if self.untracked else self.xy.replace(".", " ")


def dirty_records(entries: Mapping[str, StatusEntry], under: str = "", outside: str = ".specflux") -> list[str]:
    """"XY path" (porcelain v1 letters, repository-relative path) of every path `read_status` shows
    under the folder `under` ("" for the whole work tree), `outside/` aside: what is uncommitted."""
    prefix = f"{under}/" if under else ""
    skip = f"{prefix}{outside}"
    return [f"{entry.v1} {path}" for path, entry in sorted(entries.items())
            if path.startswith(prefix) and path != skip and not path.startswith(skip + "/")]


def read_status(run_bytes: Callable[..., subprocess.CompletedProcess[bytes]]) -> tuple[str, dict[str, StatusEntry]]:
    """HEAD's sha ("" when unborn) and the v2 status of every path git shows, renames split;
    `run_bytes(*args)` runs git in the work tree with bytes out (`Git._git_raw`)."""
    done = run_bytes(*STATUS_ARGS)
    if done.returncode:
        raise GitError(f"git status failed: {done.stderr.decode(errors='replace').strip()}")
    head, entries = "", {}
    records = iter(done.stdout.split(b"\0"))
    for raw in records:
        kind = raw[:2]
        if kind == b"# ":
            key, _, value = raw[2:].decode().partition(" ")
            if key == "branch.oid" and value != "(initial)":
                head = value
        elif kind == b"? ":  # after `git rm --cached`, a path is also its staged deletion
            entries.setdefault(os.fsdecode(raw[2:]).rstrip("/"), StatusEntry("??"))
        elif kind in (b"1 ", b"2 "):
            parts = raw.split(b" ", 9 if kind == b"2 " else 8)
            xy, _, mode_h, mode_i, mode_w, sha_h, sha_i = (p.decode() for p in parts[1:8])
            entries[os.fsdecode(parts[-1])] = StatusEntry(xy, mode_h, mode_i, mode_w, sha_h, sha_i)
            if kind == b"2 ":
                entries[os.fsdecode(next(records))] = StatusEntry("D.")  # not with --no-renames
        elif kind == b"u ":  # u XY sub m1 m2 m3 mW h1 h2 h3 path: stage 2 is "ours" (HEAD)
            parts = raw.split(b" ", 10)
            m2, mode_w, h2 = parts[4].decode(), parts[6].decode(), parts[8].decode()
            xy = "u" + parts[1].decode()
            entries[os.fsdecode(parts[10])] = StatusEntry(xy, m2, "unmerged", mode_w, h2)
    return head, entries


def changed_paths(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Paths whose fingerprint differs between two `status_snapshot`s, sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


def examine(path: Path, keep: int) -> tuple[str, bytes | None]:
    """`fingerprint(path)`, and the bytes of a regular file of at most `keep` bytes (else None)."""
    if keep > 0:
        try:
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_size <= keep:
                import hashlib

                data = path.read_bytes()
                if len(data) <= keep:
                    executable = "+x" if info.st_mode & 0o111 else ""
                    return hashlib.sha1(data).hexdigest() + executable, data
        except OSError:
            pass
    return fingerprint(path), None


def fingerprint(path: Path) -> str:
    """What is at `path` now: a content hash (plus exec bit), a link target, or "deleted"."""
    try:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            return "link:" + os.readlink(path)
        if stat.S_ISDIR(mode):
            return "directory"  # a submodule or nested repository
        import hashlib  # ~3 ms, paid only by the commands that take snapshots

        digest = hashlib.sha1()
        with path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
    except FileNotFoundError:
        return "deleted"
    return digest.hexdigest() + ("+x" if mode & 0o111 else "")
