"""An agent session's commit: what the session changed since its Baseline, and none of the
user's own uncommitted work.

`capture` records the work tree before the session; `SessionCommitter.commit` (behind
`Git.commit_session`) builds the commit after it in a temporary index, taking the session's part
of a path the user had changed too by a 3-way merge, and leaves the user's index as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from specflux.base.errors import GitError
from specflux.base.files import stat_key
from specflux.base.leftovers import alive
from specflux.base.records import record
from specflux.vcs.index_journal import FOLLOW_JOURNAL, index_follows_head
from specflux.vcs.process import FULL_SHA, NO_MAINTENANCE, check, committed_sha, nul_list
from specflux.vcs.status import REGULAR, UNMERGED, StatusEntry, examine, fingerprint, read_status
from specflux.vcs.values import Baseline, Dirty, SessionCommit

# A session keeps the bytes of each file the user had modified, to commit only the session's part
# of a later change; larger files (or beyond the total) are only fingerprinted, and left out.
KEEP_FILE_BYTES = 8 << 20
KEEP_TOTAL_BYTES = 64 << 20
_LEFT_OUT = (
    "{path}: you had uncommitted changes there too; left out of the commit so that your work stays "
    "yours — review and commit it yourself"
)
_PARTLY = (
    "{path}: you had uncommitted changes there too; only the session's part of the change is "
    "committed, and your own edits are still uncommitted"
)


def capture(root: Path, run_bytes: Callable[..., subprocess.CompletedProcess[bytes]],
            known: "tuple[str, Mapping[str, StatusEntry]] | None" = None) -> Baseline:
    """The work tree at `root` before an agent session, as `Git.capture` says; `run_bytes(*args)`
    runs git there with bytes out (`Git._git_raw`); `known`: HEAD and the status, where the caller
    has them (`Git.capture`)."""
    head, entries = known if known is not None else read_status(run_bytes)
    dirty: dict[str, Dirty] = {}
    budget = KEEP_TOTAL_BYTES
    for path, entry in entries.items():
        tracked_file = not entry.untracked and entry.work_mode in REGULAR
        keep = min(KEEP_FILE_BYTES, budget) if tracked_file else 0
        state, content = examine(root / path, keep)
        too_large = tracked_file and content is None
        budget -= len(content or b"")
        dirty[path] = Dirty(entry.v1, state, entry.work_mode, content, too_large)
    return Baseline(head, dirty)


@record(frozen=True)
class SessionCommitter:
    """Makes one session commit in the work tree at `root`, whose own git dir is `git_dir`; git
    runs through `run` (text; waiting while another git holds a lock: `Git._git`) and `run_bytes`
    (bytes in and out: `Git._git_raw`). `Git.commit_session` makes one, holding the commit lock."""

    root: Path
    git_dir: Path
    run: Callable[..., subprocess.CompletedProcess[str]]
    run_bytes: Callable[..., subprocess.CompletedProcess[bytes]]

    def commit(self, baseline: Baseline, given: list[str] | None, message: str,
               known: tuple[str, Mapping[str, StatusEntry]] | None = None) -> SessionCommit:
        """Commit the session's changes among `given` (root-relative paths; None: every path whose
        state differs from the baseline's) with `message`, as `Git.commit_session` says; `known`:
        HEAD and the status as they are now, where the caller has them."""
        # first: a kill between a commit and its index update left entries that read as staged work
        repaired = index_follows_head(self.git_dir, self.run)
        head, now = known if known is not None and not repaired else read_status(self.run_bytes)
        session = sorted(now) if given is None else given
        take, merged, left_out = self._sort_out(baseline, now, session)
        partly = sorted(path for _, _, path in merged)
        notes = [_LEFT_OUT.format(path=p) if p in left_out else _PARTLY.format(path=p)
                 for p in sorted([*left_out, *partly])]  # fmt: skip
        sha = ""
        committed = sorted([*take, *partly])
        follow = [p for p in committed if now[p].index_is_head]
        journal = self.git_dir / FOLLOW_JOURNAL
        if follow and head:  # written first: a kill after the commit is repaired by the next one
            from specflux.base.files import atomic_write

            atomic_write(journal, json.dumps({"head": head, "paths": follow}), sync=False)  # (for a kill)
        followed = False  # the user's index follows the commit for every committed path
        if take or merged:
            try:  # where every committed path's entry was HEAD's, the index it was built in becomes the user's
                sha, followed = self._commit_in_temporary_index(head, now, take, merged, message,
                                                               may_swap=len(follow) == len(committed))
            except BaseException:  # refused (a hook), or interrupted before HEAD moved
                if self.run("rev-parse", "-q", "--verify", "HEAD").stdout.strip() == head:
                    journal.unlink(missing_ok=True)
                raise
        if not sha or followed:
            journal.unlink(missing_ok=True)
            if not sha:
                return SessionCommit("", [], notes, left_out, [], after=dict(now))
        elif follow:  # the user's index: committed paths that were HEAD's there follow the commit
            done = self.run("--literal-pathspecs", "reset", "-q", "--pathspec-from-file=-",
                            "--pathspec-file-nul", sha, input=nul_list(follow))  # fmt: skip
            if not done.returncode:
                journal.unlink(missing_ok=True)
                followed = True
            if done.returncode:
                notes.append(
                    f"committed {sha[:7]}, but could not bring your index up to it "
                    f"({(done.stderr or done.stdout).strip()}): `git reset -q -- <path>` does "
                    "it for a committed path that `git status` shows as staged"
                )
        return SessionCommit(sha, committed, notes, left_out, partly, after=_after(now, take, partly, follow, followed))

    def _sort_out(
        self, baseline: Baseline, now: Mapping[str, StatusEntry], paths: Iterable[str]
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
            elif before.fingerprint != fingerprint(self.root / path):  # else: the user's alone
                part = self._sessions_part(path, before, entry, baseline.head)
                if part is None:
                    left_out.append(path)
                elif part != (entry.head_mode, entry.head_sha):  # else: no change from HEAD
                    merged.append((*part, path))
        return take, merged, left_out

    def _sessions_part(self, path: str, before: Dirty, entry: StatusEntry, base_head: str = "") -> tuple[str, str] | None:
        """(mode, blob) of HEAD's version of `path` plus the session's change to it, or None when
        that cannot be had cleanly.

        When someone committed `path` while the session ran (HEAD moved from `base_head` and its
        version of the path changed: a person's `specflux session`), the user's version from before
        the session is first brought up to that commit (the committed change merged into it), so
        that what was committed meanwhile is not taken for the session's own change."""
        if before.content is None or before.mode not in REGULAR or entry.work_mode not in REGULAR:
            return None
        if entry.xy[0] == "u" or before.status in UNMERGED:
            return None
        if entry.head_mode not in REGULAR:  # not in HEAD (a file the user had added), or a link
            return None
        full = self.root / path
        try:
            if full.lstat().st_size > KEEP_FILE_BYTES:
                return None
            now = full.read_bytes()
        except OSError:
            return None
        shown = self.run_bytes("cat-file", "--filters", f"--path={path}", entry.head_sha)
        if shown.returncode:
            return None
        ours = shown.stdout  # HEAD's version as it would be checked out (filters, line endings)
        mode = entry.head_mode if entry.work_mode == before.mode else entry.work_mode
        user = before.content
        if base_head and self.run_bytes("rev-parse", "-q", "--verify", f"{base_head}:{path}").stdout.decode().strip() \
                not in ("", entry.head_sha):  # committed meanwhile: the user's version follows that commit
            old = self.run_bytes("cat-file", "--filters", f"--path={path}", f"{base_head}:{path}")
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
        hashed = self.run_bytes("hash-object", "-w", "--stdin", f"--path={path}", input=merged)
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
            done = self.run_bytes("merge-file", "-p", "--quiet", *names)
        return None if done.returncode else done.stdout

    def _commit_in_temporary_index(
        self,
        head: str,
        now: Mapping[str, StatusEntry],
        take: list[str],
        merged: list[tuple[str, str, str]],
        message: str,
        may_swap: bool = False,
    ) -> tuple[str, bool]:
        """Commit HEAD plus `take` (as in the work tree) plus `merged` entries, built in an index of
        our own so that the user's index plays no part; the sha ("" if that equals HEAD), and
        whether that index became the user's (`_swap_in`: only with `may_swap`, every committed
        path's entry having been HEAD's in the user's index)."""
        temporary = self.git_dir / f"specflux-index.{os.getpid()}"
        _remove_leftovers(self.git_dir)
        env = {"GIT_INDEX_FILE": str(temporary)}
        real = self._index_file()
        args = ["update-index", "--add", "--remove"]
        copied: os.stat_result | None = None
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
                    before = real.stat()
                    shutil.copy2(real, temporary)
                    copied = before if not resets else None  # nothing staged: the copy is the user's index
                    for mode, sha, path in resets:
                        args += ["--cacheinfo", f"{mode},{sha},{path}"]
                else:  # a staged path HEAD does not have (only read-tree takes an entry out)
                    check(self.run("read-tree", "--reset", "HEAD", env=env), "read-tree")
            commit = (*FULL_SHA, *NO_MAINTENANCE, "commit", "-m", message)
            if copied is not None and not merged and _in_index_as_head(now, take):
                # every path is HEAD's in the index copied: `commit --include` stages them from the
                # work tree and commits, one git process where update-index and commit are two
                # (it stages no untracked file, hence only these)
                sha = committed_sha(self.run("--literal-pathspecs", *commit, "--include", "--pathspec-from-file=-",
                                             "--pathspec-file-nul", env=env, input=nul_list(take)))
            else:
                for mode, sha, path in merged:
                    args += ["--cacheinfo", f"{mode},{sha},{path}"]
                if take:
                    args += ["-z", "--stdin"]
                check(self.run(*args, env=env, input=nul_list(take)), "update-index")
                sha = committed_sha(self.run(*commit, env=env))
            swapped = bool(sha) and may_swap and copied is not None and _swap_in(temporary, real, copied)
            return sha, swapped
        finally:
            for leftover in (temporary, temporary.with_name(temporary.name + ".lock")):
                try:
                    leftover.unlink()
                except FileNotFoundError:
                    pass

    def _index_file(self) -> Path:
        """The user's index file."""
        named = os.environ.get("GIT_INDEX_FILE")
        return self.root / named if named else self.git_dir / "index"


def _remove_leftovers(git_dir: Path) -> None:
    """The temporary indexes of session commits whose process was killed (each is named after its
    process; every other session commit waits on the commit lock held here)."""
    for leftover in git_dir.glob("specflux-index.*"):
        pid = leftover.name.split(".")[1]
        if pid.isdigit() and int(pid) != os.getpid() and not alive(int(pid)):
            leftover.unlink(missing_ok=True)


def _after(now: Mapping[str, StatusEntry], take: list[str], partly: list[str], follow: list[str],
           followed: bool) -> dict[str, StatusEntry] | None:
    """The work tree's status after a commit of `take` and `partly` whose index entries all
    `follow`ed it (`followed`: the index swapped in, or reset): taken paths are clean, partly
    taken ones differ from the new commit in the work tree alone (the user's own edits), the rest
    are as they were (the commit left their HEAD and index entries alone). None otherwise."""
    if not followed or len(follow) != len(take) + len(partly):
        return None
    after = {path: entry for path, entry in now.items() if path not in follow}
    for path in partly:
        after[path] = StatusEntry(".M", now[path].work_mode, now[path].work_mode, now[path].work_mode)
    return after


def _swap_in(built: Path, real: Path, copied: os.stat_result) -> bool:
    """Make the index a commit was `built` in the user's `real` index, the way git replaces an
    index: taking `index.lock` (a hard link, made only if no git holds that lock) and renaming it
    over the index. Only while the user's index is still the one copied (`copied`: its stat before
    the copy) and not split (a shared index is git's own to manage); False otherwise, and the
    caller moves the committed entries with `git reset` instead. This saves that `git reset`
    process on every session commit where nothing was staged (the usual case): the built index
    is the user's with the committed paths at the new commit, which is what `reset` makes.
    A kill inside the few microseconds the lock is held leaves an `index.lock` as a killed git
    would, and git names it."""
    if any(real.parent.glob("sharedindex.*")):
        return False
    lock = real.with_name(real.name + ".lock")
    try:
        os.link(built, lock)
    except OSError:  # another git holds the index (or links are not possible here)
        return False
    try:
        now = real.stat()
        if stat_key(now) == stat_key(copied):
            os.replace(lock, real)
            return True
    except OSError:
        pass
    lock.unlink(missing_ok=True)
    return False


def _in_index_as_head(now: Mapping[str, StatusEntry], paths: list[str]) -> bool:
    """Whether each of `paths` (there are some) is tracked with HEAD's entry in the index, changed
    in the work tree alone: what `git commit --include` stages as `update-index --add --remove` would."""
    return bool(paths) and all(not now[p].untracked and now[p].xy[0] == "." for p in paths)


def _resets(now: Mapping[str, StatusEntry], ours: set[str]) -> list[tuple[str, str, str]] | None:
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

