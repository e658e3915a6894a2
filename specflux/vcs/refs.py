"""HEAD, a branch and a fresh commit read from the git directory's files, without a git process.

A workflow step asks where the branch is before and after every agent session, and what the
session's commit holds; a git process for each costs more than the answer (a fork, an exec and
git's start-up, ~2-4 ms, several times a step). Git's on-disk formats for these are stable and
documented (gitrepository-layout(5)): `HEAD` is a sha or `ref: refs/heads/NAME`, a branch is a
loose file under `refs/` or a line of `packed-refs`, and an object just written is a loose,
zlib-compressed file under `objects/`. Anything else (the reftable backend, a symref chain, a
packed object, a SHA-256 repository, an unreadable file) answers None, and the caller asks git:
this module only ever makes the common case faster, never a different answer.
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

from specflux.base.files import stat_key
from specflux.base.records import record

_SHA = re.compile(rb"[0-9a-f]{40}")


@record(frozen=True)
class GitDirs:
    """A work tree's own git dir (HEAD, index) and the common one (refs, objects): the same
    folder unless the work tree is a linked worktree."""

    own: Path
    common: Path

    @classmethod
    def of(cls, root: Path) -> GitDirs | None:
        """The git dirs of the work tree at `root`, or None where they are not plain to see
        (GIT_DIR set, a `.git` file that does not say where, or no `.git`)."""
        if "GIT_DIR" in os.environ or "GIT_COMMON_DIR" in os.environ:
            return None
        dot = root / ".git"
        try:
            if dot.is_dir():
                own = dot
            else:
                text = dot.read_text(errors="replace")
                if not text.startswith("gitdir:"):
                    return None
                own = (root / text.partition("gitdir:")[2].strip()).resolve()
            common_file = own / "commondir"
            common = (own / common_file.read_text().strip()).resolve() if common_file.is_file() else own
        except OSError:
            return None
        return cls(own, common)


def head_at(root: Path) -> tuple[str | None, str] | None:
    """`head` of the work tree at `root` (None where its git dirs are not plain to see)."""
    dirs = GitDirs.of(root)
    return head(dirs) if dirs is not None else None


def head(dirs: GitDirs) -> tuple[str | None, str] | None:
    """(branch, sha) of HEAD: branch None when it is detached; None when it cannot be read here
    (an unborn branch, reftable, a symbolic ref to a symbolic ref)."""
    try:
        text = (dirs.own / "HEAD").read_bytes().strip()
    except OSError:
        return None
    if _SHA.fullmatch(text):
        return None, text.decode()
    if not text.startswith(b"ref: refs/heads/"):
        return None
    ref = text[5:].decode(errors="replace")
    if ref == "refs/heads/.invalid":  # the reftable backend's placeholder
        return None
    sha, name = resolve(dirs, ref), ref[len("refs/heads/"):]
    if sha is None or any(resolve(dirs, other) for other in (
            f"refs/{name}", f"refs/tags/{name}", f"refs/remotes/{name}", f"refs/remotes/{name}/HEAD")):
        return None  # ambiguous: git would call it heads/NAME
    return name, sha


def resolve(dirs: GitDirs, ref: str) -> str | None:
    """The sha a full ref name (`refs/heads/x`) points at: its loose file, else its line in
    `packed-refs`; None when neither has it (or it is itself symbolic)."""
    common = os.fspath(dirs.common)  # (plain strings: a step resolves refs ~70 times)
    try:
        with open(os.path.join(common, ref), "rb") as loose:
            text = loose.read().strip()
    except IsADirectoryError:
        return None
    except OSError:
        text = b""
    if _SHA.fullmatch(text):
        return text.decode()
    if text:
        return None  # symbolic, or not a sha
    return _packed(os.path.join(common, "packed-refs")).get(ref)


_PACKED: dict[str, tuple[tuple[int, int, int, int], dict[str, str]]] = {}  # parsed, while its stat holds


def _packed(path: str) -> dict[str, str]:
    """{ref: sha} of a `packed-refs` file (peeled `^` lines aside), read again only when its
    stat moved (git rewrites it whole, through a lock file renamed over it: a new inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return {}
    key = stat_key(st)
    known = _PACKED.get(path)
    if known is not None and known[0] == key:
        return known[1]
    refs: dict[str, str] = {}
    try:
        with open(path, "rb") as packed:
            for line in packed:
                sha, _, name = line.rstrip(b"\n").partition(b" ")
                if name and _SHA.fullmatch(sha):
                    refs[name.decode(errors="replace")] = sha.decode()
    except OSError:
        return {}
    if len(_PACKED) > 16:
        _PACKED.clear()
    _PACKED[path] = (key, refs)
    return refs


@record(frozen=True)
class CommitHeader:
    tree: str
    parents: tuple[str, ...]


def commit_header(dirs: GitDirs, sha: str) -> CommitHeader | None:
    """The tree and parents of commit `sha` when it is a loose object (a commit just made is),
    else None."""
    raw = loose_object(dirs, sha)
    if raw is None or not raw.startswith(b"commit "):
        return None
    body = raw[raw.index(b"\0") + 1:]
    tree, parents = None, []
    for line in body.split(b"\n"):
        if not line:
            break
        if line.startswith(b"tree "):
            tree = line[5:].decode()
        elif line.startswith(b"parent "):
            parents.append(line[7:].decode())
    return None if tree is None else CommitHeader(tree, tuple(parents))


def tree_entries(dirs: GitDirs, sha: str) -> list[tuple[str, str, str]] | None:
    """(mode, name, sha) of each entry of tree `sha` when it is a loose object, else None."""
    raw = loose_object(dirs, sha)
    if raw is None or not raw.startswith(b"tree "):
        return None
    body, entries, at = raw[raw.index(b"\0") + 1:], [], 0
    while at < len(body):
        space = body.index(b" ", at)
        nul = body.index(b"\0", space)
        entries.append((body[at:space].decode(), body[space + 1:nul].decode("utf-8", "surrogateescape"),
                        body[nul + 1:nul + 21].hex()))
        at = nul + 21
    return entries


def loose_object(dirs: GitDirs, sha: str) -> bytes | None:
    """The inflated loose object `sha` ("<type> <size>\\0<content>"), or None when it is not
    loose (packed) or not readable."""
    if len(sha) != 40:
        return None
    try:
        with open(dirs.common / "objects" / sha[:2] / sha[2:], "rb") as f:
            return zlib.decompress(f.read())
    except (OSError, zlib.error):
        return None
