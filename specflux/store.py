"""TaskStateManager: the operations on task-state files, each locked, atomic and all-or-nothing.

The manager reads and writes files and asks `vcs` to commit; what a change does to the text is the
business of `document`, `archive` and `chain`.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from .document import STATUSES, Edit, TaskDocument, apply_edits
from .errors import NotFoundError, SpecfluxError, UsageError
from .files import ChangeSet, decode, locked, read_text
from .render import now_stamp, render_chain_output, render_session, render_task
from .workspace import Workspace, check_id, natural_key

if TYPE_CHECKING:
    from .chain import Upstream
    from .model import ChainOutput, SessionInput, TaskState
    from .vcs import Git


@dataclass
class TaskSummary:
    """One row of `list`: cheap to compute, never raises. `error` is set for a broken file."""

    id: str
    path: str  # as the user sees it: relative to the workspace root
    size: int
    title: str = ""
    status: str = ""
    done: int = 0
    total: int = 0
    sessions: int = 0
    dependencies: list[str] = field(default_factory=list)
    error: SpecfluxError | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    """What a write operation did: files changed, the commit (if any), the session number."""

    task_id: str
    changed: list[Path] = field(default_factory=list)
    commit: str = ""
    session: int | None = None
    status: str | None = None
    wired: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CommitRequest:
    subject: str
    trailers: dict[str, str]
    extra_paths: tuple[Path, ...] = ()  # files beyond the task files (an agent's work)


@dataclass
class Pending:
    files: ChangeSet
    commit: CommitRequest | None = None


class TaskStateManager:
    def __init__(self, workspace: Workspace, git: "Git | None | bool" = True):
        """`git=True` finds the repository around the workspace; `False`/`None` never commits."""
        self.ws = workspace
        self._git = git

    # ----------------------------------------------------------------- reading

    @property
    def git(self) -> "Git | None":
        if self._git is True:
            from .vcs import Git

            self._git = Git.find(self.ws.root)
        return self._git or None

    def path(self, task_id: str) -> Path:
        return self.ws.task_path(check_id(task_id))

    def load(self, task_id: str) -> TaskDocument:
        """The task's document, checked enough that every command can rely on it."""
        path = self.path(task_id)
        if not path.is_file():
            raise NotFoundError(f"no task {task_id} (expected {self.ws.relative(path)})")
        doc = TaskDocument(read_text(path, self.ws.relative(path)), self.ws.relative(path))
        doc.title  # noqa: B018 - raise now for a broken title
        doc.metadata  # noqa: B018
        return doc

    def read(self, task_id: str) -> "TaskState":
        return self.load(task_id).to_state(check_id(task_id))

    def extract_chain_output(self, task_id: str) -> "ChainOutput | None":
        return self.load(task_id).chain_output()

    def summaries(self, status: str | None = None) -> list[TaskSummary]:
        """Every task's `list` row (unchanged files come from the summary cache)."""
        from . import summary_cache

        ids = self.ws.task_ids()
        if summary_cache.enabled():
            rows = summary_cache.cached_rows(self.ws, ids, self.summary, TaskSummary)
            cfg = self.ws.config.archive
            for row in rows:
                if row.error is None:
                    row.warnings = cfg.warnings(row.size, row.sessions)
        else:
            rows = [self.summary(task_id) for task_id in ids]
        return [r for r in rows if status is None or r.status == status or r.error is not None and status == "broken"]

    def summary(self, task_id: str) -> TaskSummary:
        """The row of `list` for one task; a broken file gives a row with its error."""
        rel = self.ws.task_rel(task_id)
        try:
            with open(os.path.join(self.ws.root, rel), "rb") as f:
                data = f.read()
        except OSError as e:  # unreadable, or removed while listing
            return TaskSummary(task_id, rel, 0, error=SpecfluxError(f"cannot read: {e.strerror}", rel))
        row = TaskSummary(task_id, rel, len(data))
        try:
            doc = TaskDocument(decode(data, rel), rel)
            row.title = doc.title[1]
            row.status = doc.status
            row.dependencies = doc.dependencies
            items = doc.criteria_lines
            row.total, row.done = len(items), sum(1 for item in items if item[2])
            row.sessions = doc.session_count
        except SpecfluxError as e:
            row.error = e
            return row
        row.warnings = self.ws.config.archive.warnings(row.size, row.sessions)
        return row

    # ----------------------------------------------------------------- writing

    @contextmanager
    def changing(self, task_ids: Iterable[str], outcome: Outcome) -> Iterator["Pending"]:
        """Lock the tasks, gather writes, apply them together, commit; undo the writes on failure.

        The caller fills `pending.files` and, to commit, `pending.commit` inside the block (so
        that what it commits, such as the session number, is decided under the lock).
        """
        ids = sorted({check_id(t) for t in task_ids}, key=natural_key)
        pending = Pending(ChangeSet())
        with locked(self.ws.lock_path(t) for t in ids):
            self._ensure_gitignore()
            yield pending
            outcome.changed = pending.files.apply()
            request = pending.commit
            if request is None:
                return
            git = self.git
            if git is None:
                outcome.notices.append("not a git repository: specflux works, but does not commit")
                return
            try:
                paths = [*pending.files.paths, *request.extra_paths]
                outcome.commit = git.commit(paths, request.subject, request.trailers)
            except BaseException:
                pending.files.rollback()
                outcome.changed = []
                raise

    def _ensure_gitignore(self) -> None:
        ignore = self.ws.dir / ".gitignore"
        if not ignore.exists():
            from .workspace import GITIGNORE

            ignore.write_text(GITIGNORE, encoding="utf-8")

    def create(
        self,
        title: str,
        *,
        task_id: str | None = None,
        epic_id: str | None = None,
        epic_title: str | None = None,
        repository: str | None = None,
        dependencies: Iterable[str] = (),
        requirements: str = "",
        criteria: Iterable[str] = (),
        status: str = "pending",
    ) -> Outcome:
        """Write a new task file from the template, wiring in upstream outputs that already exist."""
        if not title.strip():
            raise UsageError("a task needs a title")
        deps = [check_id(d) for d in dependencies]
        self.ws.states_dir.mkdir(parents=True, exist_ok=True)
        with locked([self.ws.dir / "locks" / "new.lock"]):
            task_id = check_id(task_id) if task_id else self._next_id()
            if self.path(task_id).exists():
                raise UsageError(f"task {task_id} already exists ({self.ws.relative(self.path(task_id))})")
            metadata: dict = {"task_id": json_id(task_id)}
            if epic_id is not None:
                metadata["epic_id"] = json_id(epic_id)
            metadata["status"] = status
            if deps:
                metadata["dependencies"] = [json_id(d) for d in deps]
            metadata["total_sessions"] = 0
            epic = None
            if epic_title or epic_id:
                epic = f"{epic_title or 'Epic'} (#{epic_id})" if epic_id else epic_title
            text = render_task(
                self.ws.template(),
                task_id=task_id,
                title=title.strip(),
                metadata=metadata,
                epic=epic,
                repository=repository,
                requirements=requirements,
                criteria=criteria,
                dependencies=deps,
            )
            outcome = Outcome(task_id)
            with self.changing([task_id], outcome) as pending:
                doc = TaskDocument(text, self.ws.relative(self.path(task_id)))
                doc.metadata  # noqa: B018 - a broken override template fails here, before writing
                from .chain import wire_into

                text = wire_into(doc, self._upstream_outputs(deps))
                pending.files.write(self.path(task_id), text)
        return outcome

    def _next_id(self) -> str:
        numbers = [int(t) for t in self.ws.task_ids() if t.isdigit()]
        return str(max(numbers, default=0) + 1)

    def set_checked(self, task_id: str, indices: Iterable[int], checked: bool) -> Outcome:
        outcome = Outcome(check_id(task_id))
        with self.changing([task_id], outcome) as pending:
            doc = self.load(task_id)
            for index in indices:
                doc = TaskDocument(doc.check(index, checked), doc.path)
            pending.files.write(self.path(task_id), doc.text)
        return outcome

    def set_status(self, task_id: str, status: str) -> Outcome:
        if status not in STATUSES:
            raise UsageError(f"unknown status {status!r} (expected one of: {', '.join(STATUSES)})")
        outcome = Outcome(check_id(task_id), status=status)
        with self.changing([task_id], outcome) as pending:
            doc = self.load(task_id)
            pending.files.write(self.path(task_id), doc.set_metadata({"status": status}))
        return outcome

    def append_session(
        self,
        task_id: str,
        entry: "SessionInput",
        *,
        checks: Iterable[int] = (),
        status: str | None = None,
        commit: bool = True,
        extra_paths: Iterable[Path] = (),
        trailers: dict[str, str] | None = None,
        usage_line: str | None = None,
    ) -> Outcome:
        """Tick `checks`, append the session, move pending to in_progress, archive if too big, commit."""
        from .archive import fit

        task_id = check_id(task_id)
        outcome = Outcome(task_id)
        with self.changing([task_id], outcome) as pending:
            doc = self.load(task_id)
            number = doc.last_session_number + 1
            new_status = status or ("in_progress" if doc.status == "pending" else doc.status)
            for index in checks:
                doc = TaskDocument(doc.check(index, True), doc.path)
            block = render_session(number, entry.timestamp or now_stamp(), entry.did, entry.issues, entry.next, usage_line)
            edits: list[Edit] = [doc.append_to_section("progress", block)]
            edits += doc.metadata_edits({"status": new_status, "total_sessions": doc.session_count + 1})
            text = apply_edits(doc.text, edits)
            text = fit(task_id, TaskDocument(text, doc.path), self, pending.files, outcome)
            pending.files.write(self.path(task_id), text)
            outcome.session, outcome.status = number, new_status
            if commit:
                first = next((d.strip() for d in entry.did if d.strip()), "session")
                pending.commit = CommitRequest(
                    subject=commit_subject(task_id, number, first),
                    trailers={
                        "Specflux-Task": task_id,
                        "Specflux-Session": str(number),
                        "Specflux-Status": new_status,
                        **(trailers or {}),
                    },
                    extra_paths=tuple(extra_paths),
                )
        return outcome

    def complete(self, task_id: str, summary: str, downstream: str = "", *, commit: bool = True, extra_paths: Iterable[Path] = ()) -> Outcome:
        """Write the chain output, set status complete, and wire it into every dependent task."""
        from .archive import fit
        task_id = check_id(task_id)
        if not summary.strip():
            raise UsageError("a chain output needs a summary (--summary)")
        from .chain import dependents as find_dependents, upstream_from, wire_dependents

        dependents = find_dependents(self, task_id)
        outcome = Outcome(task_id, status="complete")
        with self.changing([task_id, *dependents], outcome) as pending:
            doc = self.load(task_id)
            block = render_chain_output(summary, downstream)
            region = doc.sections.get("chain_output")
            edit = doc.replace_content(region, block) if region else doc.append_to_section("chain_output", block)
            text = apply_edits(doc.text, [edit, *doc.metadata_edits({"status": "complete"})])
            text = fit(task_id, TaskDocument(text, doc.path), self, pending.files, outcome)
            pending.files.write(self.path(task_id), text)
            upstream = upstream_from(task_id, TaskDocument(text, doc.path))
            outcome.wired = wire_dependents(self, upstream, dependents, pending.files, outcome)
            if commit:
                pending.commit = CommitRequest(
                    subject=f"task {task_id}: complete — {first_line(summary)}",
                    trailers={"Specflux-Task": task_id, "Specflux-Session": str(doc.last_session_number), "Specflux-Status": "complete"},
                    extra_paths=tuple(extra_paths),
                )
        return outcome

    def _upstream_outputs(self, deps: Iterable[str]) -> list["Upstream"]:
        from .chain import upstream_of

        found = []
        for dep in deps:
            if self.path(dep).is_file():
                up = upstream_of(self, dep)
                if up is not None:
                    found.append(up)
        return found


def json_id(task_id: str) -> int | str:
    """`101` is written as the number 101, `T001` and `007` stay strings."""
    return int(task_id) if re.fullmatch(r"[1-9][0-9]*|0", task_id) else task_id


def first_line(text: str, width: int = 60) -> str:
    line = re.split(r"\r\n|\n|\r", text.strip(), maxsplit=1)[0]
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def commit_subject(task_id: str, number: int, did: str) -> str:
    return f"task {task_id}: session {number} — {first_line(did)}"
