"""git: commit chosen paths with trailers, read a task's history, spot what a session changed.

Everything runs the git CLI, so importing this module costs nothing and the user's git config
(hooks, signing, identity) is honoured exactly as `git commit` would honour it.
"""

from __future__ import annotations

import os
import random
import re
import stat
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from specflux.errors import GitError, IdentityError

IDENTITY_HELP = (
    "git does not know who you are, so it cannot commit. Tell it once with:\n"
    '  git config --global user.name "Your Name"\n'
    '  git config --global user.email "you@example.com"'
)
_IDENTITY_MARKS = ("Please tell me who you are", "identity unknown", "unable to auto-detect",
                   "auto-detection is disabled", "empty ident name")  # fmt: skip
_NOTHING_MARKS = ("nothing to commit", "nothing added to commit", "no changes added to commit")
# Another git holds the index (or a ref), or committed between our reading HEAD and locking it.
_BUSY = re.compile(r"\.lock': File exists|cannot lock ref")
_SUMMARY = re.compile(r"^\[.* ([0-9a-f]{40,64})\] ", re.MULTILINE)
_TRAILER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*\Z")
_FIELD, _RECORD = "\x1f", "\x1e"
_LOG_FORMAT = "%H%x1f%h%x1f%aI%x1f%s%x1f%(trailers:only,unfold)%x1e"
# The commit summary line then shows the whole sha (a 40-hex prefix in a SHA-256 repository).
_FULL_SHA = ("-c", "core.abbrev=40")


@dataclass(frozen=True)
class Commit:
    """One commit as specflux reads it back."""

    sha: str
    short: str
    date: str  # ISO 8601 author date
    subject: str
    trailers: dict[str, str]


@dataclass(frozen=True)
class Git:
    """The git work tree at `root`; relative paths given to its methods are relative to `root`.

    `busy_wait` is how many seconds to keep retrying while another git process holds a lock.
    """

    root: Path
    busy_wait: float = field(default=10.0, compare=False)

    @classmethod
    def find(cls, path: str | Path) -> Git | None:
        """The work tree containing `path`, or None outside one (or without git installed)."""
        start = Path(path).absolute()
        while not start.is_dir():
            start = start.parent
        try:
            done = _run(("rev-parse", "--show-toplevel"), start)
        except FileNotFoundError:
            return None
        if done.returncode == 0:
            return cls(Path(done.stdout.rstrip("\n")))
        if "dubious ownership" in done.stderr:
            raise GitError(done.stderr.strip(), path=start)
        return None

    def commit(
        self, paths: Sequence[str | Path], subject: str, trailers: Mapping[str, str], body: str = ""
    ) -> str:
        """Commit exactly `paths` (changed, new or deleted) and return the sha; "" if none changed.

        Whatever else the user has staged or modified stays as it was.
        """
        if not paths:
            raise ValueError("commit needs at least one path")
        specs = list(dict.fromkeys(_literal(self._relative(p)) for p in paths))
        args = (*_FULL_SHA, "commit", "-m", _message(subject, trailers, body), "--", *specs)
        with _exclusive(self._git_dir() / "specflux-commit.flock"):
            done = self._git(*args)
            unknown = [s for s in specs if f"pathspec '{s}' did not match" in done.stderr]
            if done.returncode == 0 or not unknown:
                return _committed(done)
            try:  # new files: git commit only takes paths it knows, so add those and try again
                _check(self._git("add", "--", *unknown), "add")
                return _committed(self._git(*args))
            except GitError:
                self._git("rm", "--cached", "-q", "--ignore-unmatch", "--", *unknown)
                raise

    def history(self, paths: Sequence[str | Path]) -> list[Commit]:
        """Commits touching any of `paths`, newest first."""
        if not paths:
            return []
        return self._log("--", *(_literal(self._relative(p)) for p in paths))

    def find_commits(self, trailers: Mapping[str, str]) -> list[Commit]:
        """Commits whose trailers hold every given key/value, newest first."""
        greps = [f"--grep={key}: {value}" for key, value in trailers.items()]
        found = self._log("--fixed-strings", "--all-match", *greps)  # a cheap prefilter
        return [c for c in found if all(c.trailers.get(k) == v for k, v in trailers.items())]

    def status_snapshot(self) -> dict[str, str]:
        """Fingerprint of every modified, untracked or deleted path (root-relative, posix)."""
        done = self._git("--no-optional-locks", "status", "--porcelain=v1", "-z", "-uall")
        _check(done, "status")
        paths: list[str] = []
        entries = iter(done.stdout.split("\0"))
        for entry in entries:
            if not entry:
                continue
            paths.append(entry[3:].rstrip("/"))
            if "R" in entry[:2] or "C" in entry[:2]:  # renames and copies carry the old path next
                paths.append(next(entries))
        return {path: _fingerprint(self.root / path) for path in paths}

    def _relative(self, path: str | Path) -> str:
        """`path` as a posix path relative to the work tree."""
        full = Path(os.path.abspath(self.root / path))
        for candidate in (full, full.parent.resolve() / full.name):
            try:
                return candidate.relative_to(self.root).as_posix()
            except ValueError:
                continue
        raise GitError(f"is outside the git work tree {self.root}", path=path)

    def _git_dir(self) -> Path:
        dot = self.root / ".git"
        if dot.is_file():  # a linked worktree or a submodule: "gitdir: <path>"
            return (self.root / dot.read_text().partition("gitdir:")[2].strip()).resolve()
        return dot

    def _log(self, *args: str) -> list[Commit]:
        done = self._git("log", "--no-show-signature", f"--format={_LOG_FORMAT}", *args)
        if done.returncode and (
            "does not have any commits yet" in done.stderr or "bad default revision" in done.stderr
        ):
            return []
        _check(done, "log")
        return [_parse_commit(r.lstrip("\n")) for r in done.stdout.split(_RECORD) if r.strip()]

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run git in the work tree, waiting (with backoff) while another git holds a lock."""
        deadline = time.monotonic() + self.busy_wait
        delay = 0.01
        while True:
            done = _run(args, self.root)
            if done.returncode == 0 or not _BUSY.search(done.stderr) or time.monotonic() > deadline:
                return done
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 0.3)


def changed_paths(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Paths whose fingerprint differs between two `status_snapshot`s, sorted."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Queue specflux's commits in one repository behind an OS lock (freed if the holder dies).

    `git commit -- paths` reads the index before it locks it, so two at once can each write back
    an index without the other's update (we saw a freshly added file vanish from the index).
    """
    if not lock.parent.is_dir():  # GIT_DIR points elsewhere: rely on git's own locking
        yield
    elif os.name == "nt":
        import filelock  # a dependency on Windows only

        with filelock.FileLock(str(lock)):
            yield
    else:
        import fcntl

        with lock.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield


def _run(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LC_ALL": "C"}  # English messages, so failures can be recognised
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, encoding="utf-8", errors="replace",
    )  # fmt: skip


def _literal(relative: str) -> str:
    """A pathspec that matches `relative` only, even when it holds `*`, `?` or `[`."""
    return f":(literal){relative}"


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode:
        raise GitError(f"git {what} failed: {(done.stderr or done.stdout).strip()}")


def _committed(done: subprocess.CompletedProcess[str]) -> str:
    """The sha `git commit` reported, "" when there was nothing to commit, or the error."""
    if done.returncode == 0:
        found = _SUMMARY.search(done.stdout)
        if not found:
            raise GitError(f"git commit said nothing recognisable: {done.stdout.strip()}")
        return found.group(1)
    if any(mark in done.stdout for mark in _NOTHING_MARKS):
        return ""
    if any(mark in done.stderr for mark in _IDENTITY_MARKS):
        raise IdentityError(IDENTITY_HELP)
    raise GitError(f"git commit failed: {(done.stderr or done.stdout).strip()}")


def _message(subject: str, trailers: Mapping[str, str], body: str) -> str:
    """Subject, blank line, body, blank line, `Key: value` trailers."""
    subject = subject.strip()
    if not subject or "\n" in subject:
        raise ValueError(f"a commit subject is one non-empty line, not {subject!r}")
    lines = []
    for key, value in trailers.items():
        if not _TRAILER_KEY.match(key) or "\n" in str(value) or "\r" in str(value):
            raise ValueError(f"not a git trailer: {key!r}: {value!r}")
        lines.append(f"{key}: {value}")
    return "\n\n".join(part for part in (subject, body.strip(), "\n".join(lines)) if part) + "\n"


def _parse_commit(record: str) -> Commit:
    sha, short, date, subject, trailer_text = record.split(_FIELD, 4)
    trailers = {}  # a key given twice keeps its last value
    for line in trailer_text.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            trailers[key.strip()] = value.strip()
    return Commit(sha, short, date, subject, trailers)


def _fingerprint(path: Path) -> str:
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
