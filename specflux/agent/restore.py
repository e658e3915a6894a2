"""After a session, what it must not leave behind is put back: every task file it broke or
deleted (with what a person committed to it meanwhile), and whatever a reviewer's commands changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specflux.agent.session_report import SessionReport
from specflux.base.errors import SpecfluxError
from specflux.base.files import clock_passed, stat_key
from specflux.format.document import TaskDocument

if TYPE_CHECKING:
    from collections.abc import Callable


class TaskFiles(dict):
    """Every task file's bytes before a session ({path: bytes}), to put back any the session
    breaks, with what tells after it which of them may have changed without reading them all
    again (at 1,000 tasks, reading every file twice was half of a session's own time).

    Where git knows a file was clean before the session (`clean`: committed, as in HEAD and the
    index, by the session's baseline status) its bytes are not read: they are HEAD's, and are
    asked of git (`at_head`) only if the file changed and must be compared or put back, which a
    run's guarded session rarely meets. A file whose change could leave its stat as it was (the
    file system's clock not seen past its times, and changed within RACY_NS), or that `own` names
    (the session writes its own task file), is read now. A file whose bytes git could not give
    after all is in `unknown`: it was there, and is left as it is."""

    RACY_NS = 2_000_000_000  # a file changed this close to the snapshot is read again after it

    def __init__(self, folder: Path, clean: "Callable[[Path], bool] | None" = None,
                 at_head: "Callable[[Path], bytes | None] | None" = None, own: Path | None = None):
        super().__init__()
        import os
        import stat as kinds
        import time

        from specflux.store.workspace import STATE_FILE

        self.folder = folder
        self.stats: dict[Path, tuple[int, int, int, int]] = {}
        self.unsure: set[Path] = set()  # files the file system's clock was not seen past (clock_passed)
        self._at_head = at_head
        self._later: set[Path] = set()  # clean files whose bytes are HEAD's, asked of git when needed
        self.unknown: set[Path] = set()  # files that were there, whose bytes git could not give
        self.taken_ns = time.time_ns()
        try:
            entries = [e for e in os.scandir(folder) if STATE_FILE.fullmatch(e.name)]
        except OSError:
            entries = []
        for entry in entries:
            path = Path(entry.path)
            if clean is not None and at_head is not None and path != own:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if kinds.S_ISREG(st.st_mode) and not self._racy(path, st) and clean(path):
                    self._later.add(path)
                    dict.__setitem__(self, path, b"")
                    self.stats[path] = stat_key(st)
                    continue
            try:
                with open(entry.path, "rb") as f:
                    st = os.fstat(f.fileno())
                    self[path] = f.read()
            except OSError:
                continue  # unreadable (a folder, no permission): nothing to put back
            self.stats[path] = stat_key(st)
            self._racy(path, st)

    def _racy(self, path: Path, st) -> bool:
        """Whether a change to `path` could leave its stat as `st` is (noting it in `unsure`): not
        where a write of this process has shown the file system's clock past its times
        (`clock_passed`: a run's session writes its baseline just before), nor where its change
        time is RACY_NS old."""
        if clock_passed(st):
            return False
        self.unsure.add(path)
        return st.st_ctime_ns >= self.taken_ns - self.RACY_NS

    def get(self, path, default=None):
        if path in self._later:
            self._later.discard(path)
            found = self._at_head(path)
            if found is None:  # git could not give them: the file was there, its bytes are not known
                self.unknown.add(path)
                return default
            dict.__setitem__(self, path, found)
        if path in self.unknown:
            return default
        return dict.get(self, path, default)

    def __getitem__(self, path):
        found = self.get(path, _MISSING)
        if found is _MISSING:
            raise KeyError(path)
        return found

    def items(self):  # (each value read as `get` reads it: none is left b"")
        return [(path, self[path]) for path in list(self)]

    def values(self):
        return [self[path] for path in list(self)]

    def changed(self) -> set[Path]:
        """The task files that may differ from their bytes before: new, gone, or whose inode,
        size or times moved; also those changed within RACY_NS of the snapshot and not known to be
        behind the file system's clock then (`unsure`), whose same-size rewrite in the file
        system's same clock tick would leave every time as it was."""
        import os

        from specflux.store.workspace import STATE_FILE

        now: dict[str, tuple[int, int, int, int] | None] = {}  # by name: a Path only for what moved
        try:
            for entry in os.scandir(self.folder):
                if STATE_FILE.fullmatch(entry.name):
                    try:
                        st = entry.stat(follow_symlinks=False)
                        now[entry.name] = stat_key(st)
                    except OSError:
                        now[entry.name] = None
        except OSError:
            return set(self) | {self.folder / name for name in now}
        before = {path.name: path for path in self}
        moved = {before.get(name) or self.folder / name for name, key in now.items()
                 if name not in before or key != self.stats.get(before[name])}
        moved |= {path for name, path in before.items() if name not in now}
        return moved | {path for path in self.unsure
                        if path in self.stats and self.stats[path][3] >= self.taken_ns - self.RACY_NS}


_MISSING = object()


def task_file_bytes(manager, baseline=None, own: str | None = None) -> TaskFiles:
    """Every task file's bytes before a session (`TaskFiles`); with the session's `baseline`
    (`Git.capture`), those it shows clean are HEAD's, read from git only where needed, and the
    task `own` (its file, which the session writes) is read now."""
    git = manager.git
    folder = git.inside(manager.ws.states_dir) if git is not None else None
    if baseline is None or folder is None or not baseline.head:
        return TaskFiles(manager.ws.states_dir)
    dirty, prefix = baseline.dirty, f"{folder}/" if folder else ""

    def clean(path: Path) -> bool:
        return prefix + path.name not in dirty

    return TaskFiles(manager.ws.states_dir, clean, lambda path: git.committed_bytes(path, baseline.head),
                     manager.ws.task_path(own) if own is not None else None)


def restore_broken(manager, before: dict[Path, bytes], report: "SessionReport", baseline=None,
                   held: frozenset[str] = frozenset()) -> list[Path]:
    """Put back every task file deleted or left unreadable during the session (and remove any new
    one that cannot be read), saying so; returns the paths put back. A file someone committed while
    the session ran (a person's `specflux session`) is put back with that commit in it. A deleted
    file the agent's sandbox `held` read-only was deleted by someone else: said as theirs."""
    from specflux.base.files import atomic_write
    from specflux.store.lint import lint_document
    from specflux.store.workspace import STATE_FILE

    if isinstance(before, TaskFiles):
        paths = before.changed()
    else:
        paths = set(before) | {manager.ws.task_path(t) for t in manager.ws.task_ids()}
    restored = []
    for path in sorted(paths):
        rel = manager.ws.relative(path)
        old = before.get(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = None
        except OSError:
            continue
        if data == old:
            continue
        problems = ["deleted during the session"] if data is None else _problems(manager, path, data, lint_document)
        if not problems:
            continue
        if path in getattr(before, "unknown", ()):
            report.notices.append(f"{rel}: {problems[0]}; its bytes from before the session could not be read "
                                  "from git, so it is left as it is: check it (`git diff`, `git checkout`)")
            continue
        if old is None:
            path.unlink(missing_ok=True)
            report.notices.append(f"{rel}: the session left a new task file that cannot be read; removed it: {problems[0]}")
        else:
            good = good_version(manager, path, old.decode("utf-8"), baseline, lint_document)
            atomic_write(path, good)
            meanwhile = " (with what was committed to it meanwhile)" if good != old.decode("utf-8") else ""
            report.notices.append(_deleted(rel, path, held, meanwhile) if data is None else
                                  f"{rel}: the session broke this task file ({problems[0]}); put it back as it "
                                  f"was before the session{meanwhile}, and left it out of the commit")
        m = STATE_FILE.fullmatch(path.name)
        if m and m.group(1) == report.task_id:
            report.restored = True
        restored.append(path)
    return restored


def restore_after_crash(manager, baseline) -> list[str]:
    """The engine died during a session, and the session's agent with it, perhaps in the middle of
    writing a task file: every task file left unreadable since the session's `baseline` is put back
    as it was then (HEAD's bytes then, or the bytes the baseline kept of a file the user had
    changed), so that the crashed attempt's entry and commit can be written; what was done, said."""
    from specflux.base.files import atomic_write
    from specflux.store.lint import lint_document
    from specflux.store.workspace import STATE_FILE

    git = manager.git
    folder = git.inside(manager.ws.states_dir) if git is not None else None
    if folder is None or not baseline.head:
        return []
    prefix = f"{folder}/" if folder else ""
    said = []
    for rel in sorted(p for p in git.status()[1] if p.startswith(prefix) and STATE_FILE.fullmatch(p[len(prefix):])):
        path = manager.ws.states_dir / rel[len(prefix):]
        try:
            data = path.read_bytes()
        except OSError:
            continue  # deleted: the session's commit records that as any deletion
        if not _problems(manager, path, data, lint_document):
            continue
        dirty = baseline.dirty.get(rel)
        old = git.committed_bytes(path, baseline.head) if dirty is None else dirty.content
        if old is None or _problems(manager, path, old, lint_document):
            said.append(f"{manager.ws.relative(path)}: left unreadable by the session the engine's stop cut short, "
                        "and its bytes from before that session are not known: left as it is")
            continue
        atomic_write(path, old.decode("utf-8"))  # (it parsed: UTF-8)
        said.append(f"{manager.ws.relative(path)}: left unreadable by the session the engine's stop cut short "
                    "(its agent stopped in the middle of writing it); put back as it was before that session")
    return said


def _deleted(rel: str, path: Path, held: frozenset[str], meanwhile: str) -> str:
    """What is said of a task file deleted during the session: whose change it was, where that is known."""
    import os

    from specflux.agent.confine import HELD_AT_MOST

    back = f"put back as it was before the session{meanwhile}, so that the session's commit does not carry it"
    if os.path.realpath(path) in held:
        return (f"{rel}: deleted during the session by a person (or another program), not by the agent, whose "
                f"sandbox held this file read-only; {back} (to delete the task, run `specflux delete` after the run)")
    return (f"{rel}: deleted during the session, by the agent or by a person (only under bubblewrap, which holds "
            f"other tasks' files read-only where there are at most {HELD_AT_MOST} of them, can specflux tell which); {back}")


def _problems(manager, path: Path, data: bytes, lint_document) -> list[str]:
    """Why a task file cannot be used (the errors lint finds in it), or []."""
    from specflux.base.files import decode
    from specflux.store.workspace import STATE_FILE

    rel = manager.ws.relative(path)
    try:
        doc = TaskDocument(decode(data, rel), rel)
    except SpecfluxError as e:
        return [str(e)]
    m = STATE_FILE.fullmatch(path.name)
    return [str(p) for p in lint_document(doc, m.group(1) if m else None, manager.ws.config.archive)
            if p.severity == "error" and "total_sessions" not in p.message]


def good_version(manager, path: Path, before: str, baseline, lint_document) -> str:
    """What a task file the session broke is put back to: as it was before the session, plus what
    was committed to it while the session ran (a person's `specflux session`), merged by parts;
    HEAD's version where that merge is not clean."""
    git = manager.git
    if baseline is None or git is None:
        return before
    try:
        base, head = git.committed_text(path, baseline.head) if baseline.head else "", git.committed_text(path)
    except SpecfluxError:
        return before
    if head is None or head == base:
        return before  # nothing committed meanwhile
    from specflux.format.merge import merge_task

    merged, clean = merge_task(base or "", before, head)
    for text in ((merged,) if clean else ()) + (head,):
        if not _problems(manager, path, text.encode("utf-8"), lint_document):
            return text
    return before


def undo_changes(manager, git, baseline, report: "SessionReport", status: "tuple[str, dict] | None" = None) -> int:
    """A reviewer's tools are read-only (CONTRACT section 4), but its commands run in a sandbox
    that may write in the repository: whatever it changed is put back and never committed.
    `status`: `git.status()` as it is now, where the caller has it. Returns how many paths were
    put back."""
    from specflux.vcs.process import run_git
    from specflux.vcs.status import changed_paths

    states = manager.ws.relative(manager.ws.states_dir)
    undone = 0
    for rel in changed_paths(baseline.fingerprints, git.status_snapshot(status)):
        path = git.root / rel
        if manager.ws.relative(path).startswith(states + "/"):
            continue  # task files: linted and put back by restore_broken
        before = baseline.dirty.get(rel)
        if before is not None and before.content is None:
            report.notices.append(f"{rel}: the reviewer changed it and it could not be put back (it was "
                                  "already changed before the review); check it")
            continue
        from specflux.agent.protected import keep_copy

        kept = keep_copy(manager, path) if path.is_file() else ""  # a person's edit meanwhile is never lost
        if before is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(before.content)
        elif run_git(("cat-file", "-e", f"HEAD:{rel}"), git.root).returncode == 0:
            run_git(("checkout", "-q", "HEAD", "--", rel), git.root)
        else:
            path.unlink(missing_ok=True)
        undone += 1
        report.notices.append(f"{rel}: changed during the review; put back as it was (a review changes no file){kept}")
    return undone
