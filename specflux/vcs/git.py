"""git: commit chosen paths with trailers, read a task's history, spot what a session changed.

Everything runs the git CLI, so importing this module costs nothing and the user's git config
(hooks, signing, identity) is honoured exactly as `git commit` would honour it.

Nothing is committed while a merge, rebase, am, cherry-pick, revert or bisect is in progress (a
commit on a rebase's HEAD vanishes on `--abort`). An agent session's commit (`capture` before the
session, `commit_session` after it: session_commit.py) holds the session's changes and never the
user's own uncommitted edits, and leaves the user's index as it was.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from specflux.base.errors import GitError
from specflux.base.records import record
from specflux.vcs.index_journal import index_follows_head
from specflux.vcs.messages import LOG_FORMAT, RECORD, commit_message, parse_commit
from specflux.vcs.process import FULL_SHA, NO_MAINTENANCE, check, committed_sha, literal_pathspec, run_git, run_git_waiting
from specflux.vcs.values import Baseline, Commit, SessionCommit


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


@record(frozen=True)
class Git:
    """The git work tree at `root`; relative paths given to its methods are relative to `root`.

    `busy_wait` is how many seconds to keep retrying while another git process holds a lock.
    """

    root: Path
    busy_wait: float = 10.0

    @classmethod
    def find(cls, path: str | Path) -> Git | None:
        """The work tree containing `path`, or None outside one (or without git installed)."""
        start = Path(path).absolute()
        while not start.is_dir():
            start = start.parent
        try:
            done = run_git(("rev-parse", "--show-toplevel"), start)
        except FileNotFoundError:
            return None
        if done.returncode == 0:
            return cls(Path(done.stdout.rstrip("\n")))
        if "dubious ownership" in done.stderr:
            raise GitError(done.stderr.strip(), path=start)
        return None

    def commit(
        self, paths: Sequence[str | Path], subject: str, trailers: Mapping[str, str], body: str = "",
        maintain: bool = False, new: bool = False,
    ) -> str:
        """Commit exactly `paths` (changed, new or deleted) and return the sha; "" if none changed.

        Whatever else the user has staged or modified stays as it was. Raises GitError during a
        merge, rebase, etc. (see `check_can_commit`). `maintain`: let git run its automatic
        maintenance after the commit, as `git commit` does (process.NO_MAINTENANCE says when).
        `new`: the caller knows the paths are new to git (a run's first history commit): they are
        added first, one process fewer than a commit that fails on them.
        """
        if not paths:
            raise ValueError("commit needs at least one path")
        specs = list(dict.fromkeys(literal_pathspec(self._relative(p)) for p in paths))
        options = FULL_SHA if maintain else (*FULL_SHA, *NO_MAINTENANCE)
        args = (*options, "commit", "-m", commit_message(subject, trailers, body), "--", *specs)
        self._refuse_during_operation()
        with _exclusive(self._git_dir() / "specflux-commit.flock"):
            index_follows_head(self._git_dir(), self._git)
            unknown = specs
            if not new:
                done = self._git(*args)
                unknown = [s for s in specs if f"pathspec '{s}' did not match" in done.stderr]
                if done.returncode == 0 or not unknown:
                    return committed_sha(done)
            try:  # new files: git commit only takes paths it knows, so add those and commit
                check(self._git("add", "--", *unknown), "add")
                return committed_sha(self._git(*args))
            except GitError:
                self._git("rm", "--cached", "-q", "--ignore-unmatch", "--", *unknown)
                raise

    def head(self) -> str:
        """HEAD's sha ("" before a first commit): read from the git dir's files where they are
        plain (vcs/refs.py), else asked of git."""
        from specflux.vcs.refs import head_at

        found = head_at(self.root)
        if found is not None:
            return found[1]
        return self._git("rev-parse", "-q", "--verify", "HEAD").stdout.strip()

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

    def capture(self, known: tuple[str, dict] | None = None) -> Baseline:
        """The work tree before an agent session, for `commit_session` after it.

        Every path `git status` shows (untracked files included) is fingerprinted; each tracked
        regular file the user had changed also keeps its bytes (up to KEEP_FILE_BYTES each and
        KEEP_TOTAL_BYTES in all: session_commit.py), so that a later change by the session can be
        told apart. `known`: the status as the caller knows it (HEAD, entries: the status right
        after the session commit just before, where nothing ran since), taken while HEAD is still
        the one it names; else git is asked.
        """
        from specflux.vcs.index_journal import FOLLOW_JOURNAL
        from specflux.vcs.session_commit import capture

        git_dir = self._git_dir()
        if (git_dir / FOLLOW_JOURNAL).exists():  # a kill left index entries that would read as the user's work
            with _exclusive(git_dir / "specflux-commit.flock"):
                index_follows_head(git_dir, self._git)
            known = None
        if known is not None and (not known[0] or known[0] != self.head()):
            known = None  # a commit since (a person's, an acceptance's): read it again
        return capture(self.root, self._git_raw, known)

    def status(self) -> tuple[str, dict]:
        """HEAD's sha and `git status` of every path it shows (path -> `vcs.status.StatusEntry`),
        renames split: what `commit_session` reads, and may be given."""
        from specflux.vcs.status import read_status

        return read_status(self._git_raw)

    def status_soon(self) -> Callable[[], tuple[str, dict]]:
        """`status()` with its git process started now, read when the function returned is called:
        the caller works meanwhile (a session's bookkeeping, on the other core). What the caller
        writes meanwhile may or may not be in it: the caller adds it (base/files.watching_writes)."""
        from specflux.vcs.status import STATUS_ARGS, read_status

        proc = subprocess.Popen(["git", *STATUS_ARGS], cwd=self.root, env={**os.environ, "LC_ALL": "C"},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        read: list[tuple[str, dict]] = []

        def result() -> tuple[str, dict]:  # (the same answer each time it is asked)
            if not read:
                out, err = proc.communicate()
                read.append(read_status(lambda *args: subprocess.CompletedProcess(args, proc.returncode, out, err)))
            return read[0]

        return result

    def inside(self, path: str | Path) -> str | None:
        """`path` relative to the work tree, posix ("" for the work tree itself), or None when it
        is outside."""
        try:
            rel = self._relative(path)
        except GitError:
            return None
        return "" if rel == "." else rel

    def commit_session(
        self,
        baseline: Baseline,
        paths: Iterable[str | Path] | None,
        subject: str,
        trailers: Mapping[str, str],
        body: str = "",
        status: tuple[str, dict] | None = None,
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
        Raises GitError during a merge, rebase, etc. (see `check_can_commit`). `status`: the work
        tree's `status()` as the caller knows it is now, to spare reading it again; used only while
        HEAD is still the one it names.
        """
        from specflux.vcs.session_commit import SessionCommitter

        message = commit_message(subject, trailers, body)  # a bad subject is refused before git runs
        given = None if paths is None else list(dict.fromkeys(self._relative(p) for p in paths))
        self._refuse_during_operation()
        git_dir = self._git_dir()
        with _exclusive(git_dir / "specflux-commit.flock"):
            known = status if status is not None and status[0] == self.head() else None
            return SessionCommitter(self.root, git_dir, self._git, self._git_raw).commit(baseline, given, message,
                                                                                         known)

    def history(self, paths: Sequence[str | Path], revs: Sequence[str] = ()) -> list[Commit]:
        """Commits touching any of `paths`, newest first (reachable from HEAD, or from `revs`)."""
        if not paths:
            return []
        return self._log(*revs, "--", *(literal_pathspec(self._relative(p)) for p in paths))

    def commits_since(self, base: str, paths: Sequence[str | Path]) -> list[Commit]:
        """Commits after `base` (all of them when "") up to HEAD touching any of `paths`, newest
        first: what others committed while a session ran."""
        if not paths:
            return []
        return self._log(f"{base}..HEAD" if base else "HEAD", "--",
                         *(literal_pathspec(self._relative(p)) for p in paths))

    def committed_text(self, path: str | Path, rev: str = "HEAD") -> str | None:
        """The text of `path` in `rev` as it would be checked out, or None where it is not."""
        data = self.committed_bytes(path, rev)
        return None if data is None else data.decode("utf-8", "replace")

    def committed_bytes(self, path: str | Path, rev: str = "HEAD") -> bytes | None:
        """The bytes of `path` in `rev` as it would be checked out, or None where it is not."""
        done = self._git_raw("cat-file", "--filters", f"{rev}:{self._relative(path)}")
        return None if done.returncode else done.stdout

    def find_commits(self, trailers: Mapping[str, str]) -> list[Commit]:
        """Commits whose trailers hold every given key/value, newest first."""
        greps = [f"--grep={key}: {value}" for key, value in trailers.items()]
        found = self._log("--fixed-strings", "--all-match", *greps)  # a cheap prefilter
        return [c for c in found if all(c.trailers.get(k) == v for k, v in trailers.items())]

    def status_snapshot(self, status: tuple[str, dict] | None = None) -> dict[str, str]:
        """Fingerprint of every modified, untracked or deleted path (root-relative, posix): the
        paths of `status` (a `status()` the caller has), or of the status read now. The same
        paths, read the same way, as a `Baseline`'s (`capture`)."""
        from specflux.vcs.status import fingerprint

        entries = (status or self.status())[1]
        return {path: fingerprint(self.root / path) for path in entries}

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
        if os.sep == "/":  # the common case in plain strings (a step asks ~30 times)
            root = os.fspath(self.root)
            full = os.path.abspath(os.path.join(root, path))
            if full.startswith(root + "/"):
                return full[len(root) + 1:]
            if full == root:
                return "."
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
        done = self._git("log", "--no-show-signature", f"--format={LOG_FORMAT}", *args)
        if done.returncode and (
            "does not have any commits yet" in done.stderr or "bad default revision" in done.stderr
        ):
            return []
        check(done, "log")
        return [parse_commit(r.lstrip("\n")) for r in done.stdout.split(RECORD) if r.strip()]

    def _git(
        self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run git in the work tree, waiting (with backoff) while another git holds a lock."""
        return run_git_waiting(args, self.root, self.busy_wait, env=env, input=input)

    def _git_raw(
        self, *args: str, input: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run git in the work tree with bytes in and out (contents, and paths as git has them)."""
        env = {**os.environ, "LC_ALL": "C"}
        return subprocess.run(["git", *args], cwd=self.root, env=env, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL,
                              capture_output=True)  # fmt: skip


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
        from specflux.base.lock_wait import wait_for

        with lock.open("a") as handle:
            wait_for(handle.fileno(), str(lock), "specflux's commit lock")  # never for ever: it names its holder
            yield

