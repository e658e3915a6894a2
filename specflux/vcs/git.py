"""git: commit chosen paths with trailers, read a task's history, spot what a session changed.

Everything runs the git CLI, so importing this module costs nothing and the user's git config
(hooks, signing, identity) is honoured exactly as `git commit` would honour it.

Nothing is committed while a merge, rebase, am, cherry-pick, revert or bisect is in progress (a
commit on a rebase's HEAD vanishes on `--abort`). An agent session's commit (`capture` before the
session, `commit_session` after it) holds the session's changes and never the user's own
uncommitted edits, and leaves the user's index as it was.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from specflux.base.errors import GitError, IdentityError

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

# What marks an operation in progress in a work tree's own git dir, in the order `git status` checks
# them, with the way out: (marker, operation, how to finish it, how to abort it).
_OPERATIONS = (
    ("rebase-merge", "a rebase", "git rebase --continue", "git rebase --abort"),
    ("rebase-apply", "a rebase", "git rebase --continue", "git rebase --abort"),
    ("MERGE_HEAD", "a merge", "git merge --continue", "git merge --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue", "git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue", "git revert --abort"),
    ("sequencer", "a cherry-pick", "git cherry-pick --continue", "git cherry-pick --abort"),
    ("BISECT_LOG", "a bisect", "", "git bisect reset"),
)
_AM = ("an am", "git am --continue", "git am --abort")
_REVERT_SEQUENCE = ("a revert", "git revert --continue", "git revert --abort")
# A session keeps the bytes of each file the user had modified, to commit only the session's part
# of a later change; larger files (or beyond the total) are only fingerprinted, and left out.
KEEP_FILE_BYTES = 8 << 20
KEEP_TOTAL_BYTES = 64 << 20
_REGULAR = ("100644", "100755")
_UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})
_LEFT_OUT = (
    "{path}: you had uncommitted changes there too; left out of the commit so that your work stays "
    "yours — review and commit it yourself"
)
_PARTLY = (
    "{path}: you had uncommitted changes there too; only the session's part of the change is "
    "committed, and your own edits are still uncommitted"
)


@dataclass(frozen=True)
class Dirty:
    """One path the user had changed before an agent session, as `Git.capture` saw it."""

    status: str  # porcelain v1 letters: " M", "M ", "MM", " D", "A ", "??", "UU", ...
    fingerprint: str  # as `status_snapshot` gives it
    mode: str  # working-tree mode as git records it: 100644, 100755, 120000, 160000, 000000
    content: bytes | None = None  # working-tree bytes of a tracked regular file, under the caps
    too_large: bool = False  # a tracked regular file whose bytes were not kept (over the caps)


@dataclass(frozen=True)
class Baseline:
    """The work tree before an agent session: HEAD and every path the user had changed."""

    head: str  # "" on an unborn branch
    dirty: Mapping[str, Dirty]

    @property
    def fingerprints(self) -> dict[str, str]:
        """The `status_snapshot` of that moment (for `changed_paths`)."""
        return {path: d.fingerprint for path, d in self.dirty.items()}

    def to_json(self) -> dict:
        """A JSON-able copy (bytes in base64), so that a run can commit a crashed session's work
        after a restart exactly as the session would have."""
        import base64

        return {"head": self.head, "dirty": {
            path: {"status": d.status, "fingerprint": d.fingerprint, "mode": d.mode, "tooLarge": d.too_large,
                   "content": None if d.content is None else base64.b64encode(d.content).decode("ascii")}
            for path, d in self.dirty.items()}}

    @classmethod
    def from_json(cls, data: Mapping) -> "Baseline":
        import base64

        return cls(data["head"], {
            path: Dirty(d["status"], d["fingerprint"], d["mode"],
                        None if d["content"] is None else base64.b64decode(d["content"]), d["tooLarge"])
            for path, d in data["dirty"].items()})


@dataclass(frozen=True)
class SessionCommit:
    """What `Git.commit_session` committed."""

    sha: str  # "" when there was nothing to commit
    paths: list[str] = field(default_factory=list)  # root-relative paths the commit was built from
    notes: list[str] = field(default_factory=list)  # a sentence per path left out or partly taken
    left_out: list[str] = field(default_factory=list)
    partly: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Entry:
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

        Whatever else the user has staged or modified stays as it was. Raises GitError during a
        merge, rebase, etc. (see `check_can_commit`).
        """
        if not paths:
            raise ValueError("commit needs at least one path")
        specs = list(dict.fromkeys(_literal(self._relative(p)) for p in paths))
        args = (*_FULL_SHA, "commit", "-m", _message(subject, trailers, body), "--", *specs)
        self._refuse_during_operation()
        with _exclusive(self._git_dir() / "specflux-commit.flock"):
            self._index_follows_head(self._git_dir())
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

    def operation_in_progress(self) -> str | None:
        """"a merge", "a rebase", "an am", "a cherry-pick", "a revert", "a bisect", or None.

        Read from this work tree's own git dir (linked worktrees each have theirs), with file checks
        only: no git process.
        """
        found = self._operation()
        return found[0] if found else None

    def check_can_commit(self) -> list[str]:
        """Raise GitError if committing now could lose work; else warnings to show (maybe none).

        Call it before writing anything: the error says nothing was changed.
        """
        self._refuse_during_operation()
        detached = self._detached_at()
        if detached:
            return [f"HEAD is detached at {detached[:7]}: the commit will not be on any branch"]
        return []

    def capture(self) -> Baseline:
        """The work tree before an agent session, for `commit_session` after it.

        Every path `git status` shows (untracked files included) is fingerprinted; each tracked
        regular file the user had changed also keeps its bytes (up to KEEP_FILE_BYTES each and
        KEEP_TOTAL_BYTES in all), so that a later change by the session can be told apart.
        """
        head, entries = self._status()
        dirty: dict[str, Dirty] = {}
        budget = KEEP_TOTAL_BYTES
        for path, entry in entries.items():
            tracked_file = not entry.untracked and entry.work_mode in _REGULAR
            keep = min(KEEP_FILE_BYTES, budget) if tracked_file else 0
            fingerprint, content = _examine(self.root / path, keep)
            too_large = tracked_file and content is None
            budget -= len(content or b"")
            dirty[path] = Dirty(entry.v1, fingerprint, entry.work_mode, content, too_large)
        return Baseline(head, dirty)

    def commit_session(
        self,
        baseline: Baseline,
        paths: Iterable[str | Path] | None,
        subject: str,
        trailers: Mapping[str, str],
        body: str = "",
    ) -> SessionCommit:
        """Commit what an agent session changed since `baseline`, and none of the user's own work.

        `paths` are the paths the session changed (those of them that differ from HEAD are
        committed); None means every path whose state differs from the baseline's.
        A path the user had not touched is committed as it is now (changed, new, deleted, a link,
        its executable bit). A path the user had uncommitted changes to is committed with only the
        session's part of the change (HEAD's version plus the change from the baseline to now, by a
        3-way merge); where that does not merge cleanly, or the user's version was not kept
        (untracked, a link, too large), it is left out; a note says which. The work tree is not
        touched; the commit is built in a temporary index, so whatever the user had staged stays
        staged and uncommitted, and in the user's index only the committed paths whose entry was
        HEAD's move to the new commit (so that nothing shows up as a staged revert).
        Raises GitError during a merge, rebase, etc. (see `check_can_commit`).
        """
        message = _message(subject, trailers, body)  # a bad subject is refused before git runs
        given = None if paths is None else list(dict.fromkeys(self._relative(p) for p in paths))
        self._refuse_during_operation()
        git_dir = self._git_dir()
        with _exclusive(git_dir / "specflux-commit.flock"):
            head, now = self._status()
            session = sorted(now) if given is None else given
            take, merged, left_out = self._sort_out(baseline, now, session)
            partly = sorted(path for _, _, path in merged)
            notes = [_LEFT_OUT.format(path=p) if p in left_out else _PARTLY.format(path=p)
                     for p in sorted([*left_out, *partly])]  # fmt: skip
            self._index_follows_head(git_dir)  # a kill between a commit and its index update, before
            sha = ""
            committed = sorted([*take, *partly])
            follow = [p for p in committed if now[p].index_is_head]
            journal = git_dir / _FOLLOW_JOURNAL
            if follow and head:  # written first: a kill after the commit is repaired by the next one
                from specflux.base.files import atomic_write

                atomic_write(journal, json.dumps({"head": head, "paths": follow}))
            if take or merged:
                try:
                    sha = self._commit_in_temporary_index(git_dir, head, now, take, merged, message)
                except BaseException:  # refused (a hook), or interrupted before HEAD moved
                    if self._git("rev-parse", "-q", "--verify", "HEAD").stdout.strip() == head:
                        journal.unlink(missing_ok=True)
                    raise
            if not sha:
                journal.unlink(missing_ok=True)
                return SessionCommit("", [], notes, left_out, [])
            if follow:  # the user's index: committed paths that were HEAD's there follow the commit
                done = self._git("--literal-pathspecs", "reset", "-q", "--pathspec-from-file=-",
                                 "--pathspec-file-nul", sha, input=_nul_list(follow))  # fmt: skip
                if not done.returncode:
                    journal.unlink(missing_ok=True)
                if done.returncode:
                    notes.append(
                        f"committed {sha[:7]}, but could not bring your index up to it "
                        f"({(done.stderr or done.stdout).strip()}): `git reset -q -- <path>` does "
                        "it for a committed path that `git status` shows as staged"
                    )
            return SessionCommit(sha, committed, notes, left_out, partly)

    def _index_follows_head(self, git_dir: Path) -> None:
        """Finish what a session commit cut short by a kill: the paths it committed whose entry in
        the user's index is still the old HEAD's (they would show as a staged revert) follow HEAD.
        An entry the user has staged anything else into since is left alone."""
        journal = git_dir / _FOLLOW_JOURNAL
        try:
            data = json.loads(journal.read_text(encoding="utf-8"))
            old, paths = str(data["head"]), [str(p) for p in data["paths"]]
        except FileNotFoundError:
            return
        except (ValueError, KeyError, TypeError):
            journal.unlink(missing_ok=True)
            return
        head = self._git("rev-parse", "-q", "--verify", "HEAD").stdout.strip()
        stale = []
        if head and head != old:
            listed = self._git("--literal-pathspecs", "ls-files", "-s", "-z", "--", *paths).stdout
            staged = {rec.split("\t", 1)[1]: rec.split()[1] for rec in listed.split("\0") if "\t" in rec}
            for path in paths:
                was = self._git("rev-parse", "-q", "--verify", f"{old}:{path}").stdout.strip()
                if was and staged.get(path) == was:
                    stale.append(path)
        if stale:
            self._git("--literal-pathspecs", "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul",
                      head, input=_nul_list(stale))
        journal.unlink(missing_ok=True)

    def _sort_out(
        self, baseline: Baseline, now: Mapping[str, _Entry], paths: Iterable[str]
    ) -> tuple[list[str], list[tuple[str, str, str]], list[str]]:
        """Split the session's `paths` into those to take as they are, the (mode, blob, path) of
        the session's part of those the user had changed too, and those to leave out."""
        take: list[str] = []
        merged: list[tuple[str, str, str]] = []
        left_out: list[str] = []
        for path in paths:
            entry, before = now.get(path), baseline.dirty.get(path)
            if entry is None:  # as in HEAD and in the index (or ignored): nothing to commit
                continue
            if before is None:
                take.append(path)
            elif before.fingerprint != _fingerprint(self.root / path):  # else: the user's alone
                part = self._sessions_part(path, before, entry, baseline.head)
                if part is None:
                    left_out.append(path)
                elif part != (entry.head_mode, entry.head_sha):  # else: no change from HEAD
                    merged.append((*part, path))
        return take, merged, left_out

    def history(self, paths: Sequence[str | Path]) -> list[Commit]:
        """Commits touching any of `paths`, newest first."""
        if not paths:
            return []
        return self._log("--", *(_literal(self._relative(p)) for p in paths))

    def commits_since(self, base: str, paths: Sequence[str | Path]) -> list[Commit]:
        """Commits after `base` (all of them when "") up to HEAD touching any of `paths`, newest
        first: what others committed while a session ran."""
        if not paths:
            return []
        return self._log(f"{base}..HEAD" if base else "HEAD", "--",
                         *(_literal(self._relative(p)) for p in paths))

    def committed_text(self, path: str | Path, rev: str = "HEAD") -> str | None:
        """The text of `path` in `rev` as it would be checked out, or None where it is not."""
        done = self._git_raw("cat-file", "--filters", f"{rev}:{self._relative(path)}")
        return None if done.returncode else done.stdout.decode("utf-8", "replace")

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

    def _status(self) -> tuple[str, dict[str, _Entry]]:
        """HEAD's sha ("" when unborn) and the v2 status of every path git shows, renames split."""
        done = self._git_raw("--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z",
                             "-uall", "--no-renames")  # fmt: skip
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
                entries.setdefault(os.fsdecode(raw[2:]).rstrip("/"), _Entry("??"))
            elif kind in (b"1 ", b"2 "):
                parts = raw.split(b" ", 9 if kind == b"2 " else 8)
                xy, _, mode_h, mode_i, mode_w, sha_h, sha_i = (p.decode() for p in parts[1:8])
                entries[os.fsdecode(parts[-1])] = _Entry(xy, mode_h, mode_i, mode_w, sha_h, sha_i)
                if kind == b"2 ":
                    entries[os.fsdecode(next(records))] = _Entry("D.")  # not with --no-renames
            elif kind == b"u ":  # u XY sub m1 m2 m3 mW h1 h2 h3 path: stage 2 is "ours" (HEAD)
                parts = raw.split(b" ", 10)
                m2, mode_w, h2 = parts[4].decode(), parts[6].decode(), parts[8].decode()
                xy = "u" + parts[1].decode()
                entries[os.fsdecode(parts[10])] = _Entry(xy, m2, "unmerged", mode_w, h2)
        return head, entries

    def _sessions_part(self, path: str, before: Dirty, entry: _Entry, base_head: str = "") -> tuple[str, str] | None:
        """(mode, blob) of HEAD's version of `path` plus the session's change to it, or None when
        that cannot be had cleanly.

        When someone committed `path` while the session ran (HEAD moved from `base_head` and its
        version of the path changed: a person's `specflux session`), the user's version from before
        the session is first brought up to that commit (the committed change merged into it), so
        that what was committed meanwhile is not taken for the session's own change."""
        if before.content is None or before.mode not in _REGULAR or entry.work_mode not in _REGULAR:
            return None
        if entry.xy[0] == "u" or before.status in _UNMERGED:
            return None
        if entry.head_mode not in _REGULAR:  # not in HEAD (a file the user had added), or a link
            return None
        full = self.root / path
        try:
            if full.lstat().st_size > KEEP_FILE_BYTES:
                return None
            now = full.read_bytes()
        except OSError:
            return None
        shown = self._git_raw("cat-file", "--filters", f"--path={path}", entry.head_sha)
        if shown.returncode:
            return None
        ours = shown.stdout  # HEAD's version as it would be checked out (filters, line endings)
        mode = entry.head_mode if entry.work_mode == before.mode else entry.work_mode
        user = before.content
        if base_head and self._git_raw("rev-parse", "-q", "--verify", f"{base_head}:{path}").stdout.decode().strip() \
                not in ("", entry.head_sha):  # committed meanwhile: the user's version follows that commit
            old = self._git_raw("cat-file", "--filters", f"--path={path}", f"{base_head}:{path}")
            if old.returncode == 0:
                rebased = self._merge_file(user, old.stdout, ours)
                user = rebased if rebased is not None else user
        if now == user:
            return mode, entry.head_sha  # the session changed the mode only
        if user == ours:
            merged = now  # the user had changed the mode only (or committed all of it meanwhile)
        else:
            found = self._merge_file(ours, user, now)
            if found is None:  # conflicts, or binary files / an error
                return None
            merged = found
        if merged == ours:
            return mode, entry.head_sha
        hashed = self._git_raw("hash-object", "-w", "--stdin", f"--path={path}", input=merged)
        if hashed.returncode:
            why = hashed.stderr.decode(errors="replace").strip()
            raise GitError(f"git hash-object failed: {why}", path=path)
        return mode, hashed.stdout.decode().strip()

    def _merge_file(self, current: bytes, base: bytes, other: bytes) -> bytes | None:
        """`current` plus the change from `base` to `other` (`git merge-file`), or None where they
        conflict (or the files are binary)."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="specflux-merge-") as scratch:
            names = []
            for name, data in (("current", current), ("base", base), ("other", other)):
                (Path(scratch) / name).write_bytes(data)
                names.append(str(Path(scratch) / name))
            done = self._git_raw("merge-file", "-p", "--quiet", *names)
        return None if done.returncode else done.stdout

    def _commit_in_temporary_index(
        self,
        git_dir: Path,
        head: str,
        now: Mapping[str, _Entry],
        take: list[str],
        merged: list[tuple[str, str, str]],
        message: str,
    ) -> str:
        """Commit HEAD plus `take` (as in the work tree) plus `merged` entries, built in an index of
        our own so that the user's index plays no part; the sha, or "" if that equals HEAD."""
        temporary = git_dir / f"specflux-index.{os.getpid()}"
        env = {"GIT_INDEX_FILE": str(temporary)}
        real = self._index_file(git_dir)
        args = ["update-index", "--add", "--remove"]
        try:
            temporary.unlink(missing_ok=True)
            if head:  # (on an unborn branch the temporary index starts empty)
                # the user's index with its stat data, so that git re-reads only the dirty files,
                # and what the user staged put back to HEAD's entries
                resets = _resets(now, {*take, *(path for _, _, path in merged)})
                if resets is not None and real.is_file():
                    # copy2 keeps the index file's mtime: git trusts an entry's stat data only when
                    # it is older than the index, so a fresh mtime would hide a same-size edit made
                    # in the same second as the last index write (racy git)
                    shutil.copy2(real, temporary)
                    for mode, sha, path in resets:
                        args += ["--cacheinfo", f"{mode},{sha},{path}"]
                else:  # a staged path HEAD does not have (only read-tree takes an entry out)
                    _check(self._git("read-tree", "--reset", "HEAD", env=env), "read-tree")
            for mode, sha, path in merged:
                args += ["--cacheinfo", f"{mode},{sha},{path}"]
            if take:
                args += ["-z", "--stdin"]
            _check(self._git(*args, env=env, input=_nul_list(take)), "update-index")
            return _committed(self._git(*_FULL_SHA, "commit", "-m", message, env=env))
        finally:
            for leftover in (temporary, temporary.with_name(temporary.name + ".lock")):
                try:
                    leftover.unlink()
                except FileNotFoundError:
                    pass

    def _index_file(self, git_dir: Path) -> Path:
        named = os.environ.get("GIT_INDEX_FILE")
        return self.root / named if named else git_dir / "index"

    def _operation(self) -> tuple[str, str, str] | None:
        """(operation, how to finish it, how to abort it) for the operation in progress, or None."""
        git_dir = self._git_dir()
        for marker, name, finish, abort in _OPERATIONS:
            where = git_dir / marker
            if not os.path.exists(where):
                continue
            if marker == "rebase-apply" and os.path.exists(where / "applying"):
                return _AM
            if marker == "sequencer":  # between the picks of a sequence: its todo list says which
                try:
                    first = (where / "todo").read_text(errors="replace").split(None, 1)[:1]
                except OSError:
                    first = []
                if first == ["revert"]:
                    return _REVERT_SEQUENCE
                if first not in (["pick"], ["p"]):
                    continue  # no sequence in progress, as git itself reads it
            return name, finish, abort
        return None

    def _refuse_during_operation(self) -> None:
        found = self._operation()
        if found:
            name, finish, abort = found
            way = f"finish it ({finish}) or abort it ({abort})" if finish else f"end it ({abort})"
            raise GitError(
                f"{name} is in progress in {self.root}: {way} before specflux commits; "
                "nothing was changed"
            )

    def _detached_at(self) -> str | None:
        """HEAD's sha when HEAD is detached, else None (on a branch, or unknown)."""
        try:
            text = (self._git_dir() / "HEAD").read_text(errors="replace").strip()
        except OSError:
            return None
        if text.startswith("ref:"):
            if "refs/heads/.invalid" not in text:  # the reftable backend's placeholder
                return None
            done = self._git("symbolic-ref", "-q", "HEAD")
            if done.returncode == 0:
                return None
            text = self._git("rev-parse", "-q", "--verify", "HEAD").stdout.strip()
        return text if re.fullmatch(r"[0-9a-f]{40,64}", text) else None

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
        """This work tree's own git dir (a linked worktree's holds its HEAD, index and state)."""
        dot = self.root / ".git"
        if dot.is_file():  # a linked worktree or a submodule: "gitdir: <path>"
            return (self.root / dot.read_text().partition("gitdir:")[2].strip()).resolve()
        if not dot.exists() or "GIT_DIR" in os.environ:  # GIT_DIR points elsewhere: ask git
            done = self._git("rev-parse", "--absolute-git-dir")
            if done.returncode == 0:
                return Path(done.stdout.rstrip("\n"))
        return dot

    def _log(self, *args: str) -> list[Commit]:
        done = self._git("log", "--no-show-signature", f"--format={_LOG_FORMAT}", *args)
        if done.returncode and (
            "does not have any commits yet" in done.stderr or "bad default revision" in done.stderr
        ):
            return []
        _check(done, "log")
        return [_parse_commit(r.lstrip("\n")) for r in done.stdout.split(_RECORD) if r.strip()]

    def _git(
        self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run git in the work tree, waiting (with backoff) while another git holds a lock."""
        deadline = time.monotonic() + self.busy_wait
        delay = 0.01
        while True:
            done = _run(args, self.root, env=env, input=input)
            if done.returncode == 0 or not _BUSY.search(done.stderr) or time.monotonic() > deadline:
                return done
            time.sleep(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, 0.3)

    def _git_raw(
        self, *args: str, input: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run git in the work tree with bytes in and out (contents, and paths as git has them)."""
        env = {**os.environ, "LC_ALL": "C"}
        return subprocess.run(["git", *args], cwd=self.root, env=env, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL,
                              capture_output=True)  # fmt: skip


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


def _run(
    args: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None, input: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "LC_ALL": "C", **(env or {})}  # English messages, to recognise failures
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=full, input=input,
        stdin=None if input is not None else subprocess.DEVNULL, capture_output=True,
    )  # fmt: skip
    out, err = _text(done.stdout), _text(done.stderr)
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def _text(data: bytes) -> str:
    """What `subprocess.run(text=True)` would give: UTF-8, universal newlines."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


_FOLLOW_JOURNAL = "specflux-index-follow.json"  # in the git dir, while a session commit is made


def _resets(now: Mapping[str, _Entry], ours: set[str]) -> list[tuple[str, str, str]] | None:
    """(mode, blob, path) that put back HEAD's entry for each path the user staged (other than
    `ours`), or None when one of them is not in HEAD or is unmerged."""
    resets = []
    for path, entry in now.items():
        if path in ours or entry.untracked or (entry.xy[0] == "." and entry.xy[1] != "A"):
            continue  # the session's, or the index entry is HEAD's
        if entry.xy[0] == "u" or entry.head_mode == "000000":
            return None  # unmerged, added, intent-to-add: not a HEAD entry to put back
        resets.append((entry.head_mode, entry.head_sha, path))
    return resets


def _nul_list(paths: Iterable[str]) -> bytes:
    """Paths for git's `-z --stdin` / `--pathspec-file-nul`: each one NUL-terminated."""
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


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


def _examine(path: Path, keep: int) -> tuple[str, bytes | None]:
    """`_fingerprint(path)`, and the bytes of a regular file of at most `keep` bytes (else None)."""
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
    return _fingerprint(path), None


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
