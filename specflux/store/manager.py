"""TaskStateManager: the operations on task-state files, each locked, atomic and all-or-nothing.

The manager reads and writes files and asks `vcs` to commit; what a change does to the text is the
business of `document`, `archive` and `chain`, and ticking an imported task's source that of `sources`.
The values it hands back (`Outcome`, `TaskSummary`, ...) live in `values`.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from specflux.format.document import Parses, TaskDocument
from specflux.format.edits import Edit, apply_edits
from specflux.format.list_quick import quick_list_fields
from specflux.format.metadata import STATUSES
from specflux.base.errors import NotFoundError, ParseError, Refused, SpecfluxError, UsageError
from specflux.base.files import (
    ChangeSet,
    decode,
    deferred_interrupts,
    locked,
    os_error,
    read_bytes,
    read_text,
)
from specflux.store.values import CommitRequest, Outcome, Pending, TaskSummary
from specflux.store.workspace import Workspace, check_id, natural_key

if TYPE_CHECKING:
    from specflux.format.model import ChainOutput, SessionInput, TaskState
    from specflux.vcs.git import Git


class TaskStateManager:
    def __init__(self, workspace: Workspace, git: "Git | None | bool" = True):
        """`git=True` finds the repository around the workspace; `False`/`None` never commits."""
        self.ws = workspace
        self._git = git
        self._parsed = Parses()  # the last parse of each file read: a run reads one ~10 times a step

    # ----------------------------------------------------------------- reading

    @property
    def git(self) -> "Git | None":
        if self._git is True:
            from specflux.vcs.git import Git

            self._git = Git.find(self.ws.root)
        return self._git or None

    def path(self, task_id: str) -> Path:
        return self.ws.task_path(check_id(task_id))

    def load(self, task_id: str, pending: ChangeSet | None = None) -> TaskDocument:
        """The task's document, checked enough that every command can rely on it. Inside a change,
        `pending` gives the text already queued for the file, so that two edits of one file in
        one change build on each other instead of the second undoing the first."""
        path = self.path(task_id)
        rel = self.ws.relative(path)
        queued = pending.text_of(path) if pending is not None else None
        if queued is not None:
            return TaskDocument(queued, rel)
        if path.is_dir():
            raise NotFoundError(f"is a folder, not a task file; move it away (task {task_id})", rel)
        if not path.is_file():
            raise NotFoundError(f"no task {task_id} (expected {rel})")
        try:
            text = read_text(path, rel)
        except OSError as e:
            raise os_error(e, rel, "read") from None
        known = self._parsed.of(path, text, rel)
        if known is not None:
            return known
        doc = TaskDocument(text, rel)
        doc.title  # noqa: B018 - raise now for a broken title
        doc.metadata  # noqa: B018
        return self._parsed.keep(path, doc)

    def read(self, task_id: str) -> "TaskState":
        return self.load(task_id).to_state(check_id(task_id))

    def extract_chain_output(self, task_id: str) -> "ChainOutput | None":
        return self.load(task_id).chain_output()

    def summaries(self, status: str | None = None, *, cached: bool = False) -> list[TaskSummary]:
        """Every task's `list` row, read from the task files; with `cached`, for display only (`list`),
        unchanged files' rows come from the summary cache (never for a decision: summary_cache.py)."""
        from specflux.store import summary_cache

        ids = self.ws.task_ids()
        if summary_cache.enabled():
            rows = summary_cache.cached_rows(self.ws, ids, self.summary, TaskSummary, disk=cached)
            cfg = self.ws.config.archive
            for row in rows:
                if row.error is None:
                    row.warnings = cfg.warnings(row.size, row.sessions)
        else:
            rows = [self.summary(task_id) for task_id in ids]
        return [r for r in rows if status is None or r.status == status or r.error is not None and status == "broken"]

    def summary(self, task_id: str, data: bytes | None = None) -> TaskSummary:
        """The row of `list` for one task (from `data`, its bytes, when given); a broken file
        gives a row with its error."""
        rel = self.ws.task_rel(task_id)
        try:
            data = read_bytes(os.path.join(self.ws.root, rel)) if data is None else data
        except IsADirectoryError:
            return TaskSummary(task_id, rel, 0, error=SpecfluxError("is a folder, not a task file; move it away", rel))
        except OSError as e:  # unreadable, or removed while listing
            return TaskSummary(task_id, rel, 0, error=SpecfluxError(f"cannot read: {e.strerror}", rel))
        row = TaskSummary(task_id, rel, len(data))
        try:
            text = decode(data, rel)
            quick = quick_list_fields(text)  # a plainly written file, in one pass (format/list_quick.py)
            if quick is not None:
                row.title, row.status, row.dependencies, row.done, row.total, row.sessions = quick
            else:
                doc = TaskDocument(text, rel)
                row.title = doc.title[1]  # shown for a file whose metadata is broken, too
                row.status, row.dependencies, row.done, row.total, row.sessions = doc.list_fields()
        except SpecfluxError as e:
            row.error = e
            return row
        row.warnings = self.ws.config.archive.warnings(row.size, row.sessions)
        return row

    # ----------------------------------------------------------------- writing

    @contextmanager
    def changing(self, task_ids: Iterable[str], outcome: Outcome) -> Iterator[Pending]:
        """Lock the tasks, gather writes, apply them together, commit; undo the writes on failure.

        The caller fills `pending.files` and, to commit, `pending.commit` inside the block (so
        that what it commits, such as the session number, is decided under the lock).
        """
        ids = sorted({check_id(t) for t in task_ids}, key=natural_key)
        pending = Pending(ChangeSet(self.ws.relative))
        with locked(self.ws.lock_path(t) for t in ids):
            yield pending
            request = pending.commit
            git = self.git if request is not None else None
            if git is not None:  # before any file is written: a rebase in progress changes nothing
                outcome.notices += git.check_can_commit()
            self._ensure_gitignore(pending.files)
            with deferred_interrupts():
                outcome.changed = pending.files.apply()
                if request is None:
                    return
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

    def _ensure_gitignore(self, files: ChangeSet) -> None:
        ignore = self.ws.dir / ".gitignore"
        if files.pending and not ignore.exists():
            from specflux.store.workspace import GITIGNORE

            files.write(ignore, GITIGNORE)

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
        checked: Iterable[bool] = (),
        extra: dict | None = None,
    ) -> Outcome:
        """Write a new task file from the template, wiring in upstream outputs that already exist.

        `checked` ticks criteria as they are created (an import of done work); `extra` adds metadata keys
        after the standard ones (where an imported task came from, its phase, ...)."""
        if not title.strip():
            raise UsageError("a task needs a title")
        deps = [check_id(d) for d in dependencies]
        self.ws.ensure_folder(self.ws.states_dir)
        with locked([self.ws.state_dir / "locks" / "new.lock"]):
            task_id = check_id(task_id) if task_id else self._next_id()
            if self.path(task_id).exists():
                raise Refused(f"task {task_id} already exists ({self.ws.relative(self.path(task_id))}); "
                              "leave out --id for the next free one")
            if task_id in deps:
                raise UsageError(f"task {task_id} cannot depend on itself")
            metadata: dict = {"task_id": json_id(task_id)}
            if epic_id is not None:
                metadata["epic_id"] = json_id(epic_id)
            metadata["status"] = status
            if deps:
                metadata["dependencies"] = [json_id(d) for d in deps]
            metadata["total_sessions"] = 0
            for key, value in dict(extra or {}).items():
                if key not in metadata:
                    metadata[key] = value
            epic = None
            if epic_title or epic_id:
                epic = f"{epic_title or 'Epic'} (#{epic_id})" if epic_id else epic_title
            from specflux.format.render import render_task

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
                from specflux.store.chain import upstream_outputs, wire_into

                text = wire_into(doc, upstream_outputs(self, deps))
                ticks = [i for i, on in enumerate(checked, 1) if on]
                if ticks:
                    text = TaskDocument(text, doc.path).check_many(ticks, True)[0]
                pending.files.write(self.path(task_id), text)
        return outcome

    def _next_id(self) -> str:
        numbers = [int(t) for t in self.ws.task_ids() if t.isdigit()]
        return str(max(numbers, default=0) + 1)

    def set_checked(self, task_id: str, indices: Iterable[int], checked: bool) -> Outcome:
        """Tick (or untick) criteria, all in one pass; `outcome.criteria` says what each one was."""
        outcome = Outcome(check_id(task_id))
        indices = list(indices)
        with self.changing([task_id], outcome) as pending:
            doc = self.load(task_id, pending.files)
            text, changed = doc.check_many(indices, checked)
            items = doc.criteria_lines
            done = set(changed)
            outcome.criteria = [(i, items[i - 1][3], i in done) for i in dict.fromkeys(indices)]
            if changed:
                after = TaskDocument(text, doc.path).criteria_lines
                if len(after) != len(items) or any(after[i - 1][2] != checked for i in changed):
                    raise ParseError("the criteria changed under the edit; nothing was written", doc.path)
                pending.files.write(self.path(task_id), text)
        return outcome

    def set_status(self, task_id: str, status: str, *, commit: bool = False, trailers: dict[str, str] | None = None,
                   reason: str | None = None) -> Outcome:
        """Set the status (one line). With `commit`, commit it (a run failing a task does)."""
        if status not in STATUSES:
            raise UsageError(f"unknown status {status!r} (expected one of: {', '.join(STATUSES)})")
        task_id = check_id(task_id)
        outcome = Outcome(task_id, status=status)
        with self.changing([task_id], outcome) as pending:
            doc = self.load(task_id)
            pending.files.write(self.path(task_id), doc.set_metadata({"status": status}))
            if commit:
                pending.commit = CommitRequest(
                    subject=f"task {task_id}: {status}" + (f" — {first_line(reason)}" if reason else ""),
                    trailers={"Specflux-Task": task_id, "Specflux-Session": str(doc.last_session_number),
                              "Specflux-Status": status, **(trailers or {})},
                )
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
        from specflux.store.archive import fit

        task_id = check_id(task_id)
        outcome = Outcome(task_id)
        with self.changing([task_id], outcome) as pending:
            doc = self.load(task_id)
            number = doc.last_session_number + 1
            new_status = status or ("in_progress" if doc.status == "pending" else doc.status)
            for index in checks:
                doc = TaskDocument(doc.check(index, True), doc.path)
            from specflux.format.render import now_stamp, render_session

            block = render_session(number, entry.timestamp or now_stamp(), entry.did, entry.issues, entry.next, usage_line)
            append = doc.append_to_section("progress", block)
            edits: list[Edit] = [append]
            edits += doc.metadata_edits({"status": new_status, "total_sessions": doc.session_count + 1})
            text = apply_edits(doc.text, edits)
            written = TaskDocument(text, doc.path)
            if number not in (n for n, _, _ in written.session_regions) or written.session_count != doc.session_count + 1:
                raise doc.hidden_by(append.start) or doc.error("the session would not be readable where it "
                                                               "would be written; nothing was written", append.start)
            text = fit(task_id, written, self, pending.files, outcome)
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

    def complete(self, task_id: str, summary: str, downstream: str | None = None, *, commit: bool = True,
                 extra_paths: Iterable[Path] = (), trailers: dict[str, str] | None = None) -> Outcome:
        """Write the chain output, set status complete, and wire it into every dependent task.

        Only `### Summary` and `### For Downstream Tasks` are written; `downstream=None` keeps the
        downstream text already there. Every other subsection of the Chain Output stays.
        """
        from specflux.store.archive import fit
        task_id = check_id(task_id)
        if not summary.strip():
            raise UsageError("a chain output needs a summary (--summary)")
        from specflux.store.chain import Graph, upstream_from, wire_dependents
        from specflux.store.sources import write_back

        graph = Graph.load(self)
        dependents = graph.dependents(task_id)
        outcome = Outcome(task_id, status="complete")
        for error in graph.broken:
            outcome.notices.append(f"{error.path}: could not be read, so it was not wired (if it depends on "
                                   f"task {task_id}, fix it and run `specflux wire {task_id}`): {error.message}")
        outcome.notices += _unfinished(self.load(task_id), task_id, graph)
        with self.changing([task_id, *dependents], outcome) as pending:
            doc = self.load(task_id)
            edits = doc.chain_output_edits(summary, downstream)
            text = apply_edits(doc.text, [*edits, *doc.metadata_edits({"status": "complete"})])
            written = TaskDocument(text, doc.path)
            out = written.chain_output()
            if out is None or written.status != "complete" or not out.summary:
                raise doc.hidden_by(min(e.start for e in edits)) or doc.error(
                    "the chain output would not be readable where it would be written; nothing was written",
                    min(e.start for e in edits))
            text = fit(task_id, written, self, pending.files, outcome)
            pending.files.write(self.path(task_id), text)
            write_back(self.ws.root, task_id, written.metadata.get("source"), pending.files, outcome)
            upstream = upstream_from(task_id, TaskDocument(text, doc.path))
            outcome.wired = wire_dependents(self, upstream, dependents, pending.files, outcome)
            if commit:
                pending.commit = CommitRequest(
                    subject=f"task {task_id}: complete — {first_line(summary)}",
                    trailers={"Specflux-Task": task_id, "Specflux-Session": str(doc.last_session_number),
                              "Specflux-Status": "complete", **(trailers or {})},
                    extra_paths=tuple(extra_paths),
                )
        return outcome

    def update(
        self,
        task_id: str,
        *,
        status: str | None = None,
        title: str | None = None,
        priority: int | None = None,
        add_deps: Iterable[str] = (),
        remove_deps: Iterable[str] = (),
    ) -> Outcome:
        """`specflux set`: change fields, each rewriting only its own line(s); one write for all.

        A dependency that does not exist, is the task itself or closes a cycle is refused with
        the cycle named. A new dependency that is already complete is wired in at once.
        """
        task_id = check_id(task_id)
        if status is not None and status not in STATUSES:
            raise UsageError(f"unknown status {status!r} (expected one of: {', '.join(STATUSES)})")
        if title is not None and not title.strip():
            raise UsageError("a task needs a title")
        if priority is not None and not 1 <= priority <= 5:
            raise UsageError(f"priority is 1 (highest) to 5 (lowest), not {priority}")
        from specflux.store.chain import check_new_dependencies, upstream_outputs, wire_into

        adding = list(dict.fromkeys(check_id(d) for d in add_deps))
        removing = list(dict.fromkeys(check_id(d) for d in remove_deps))
        outcome = Outcome(task_id)
        with self.changing([task_id], outcome) as pending:
            doc = self.load(task_id)
            written = list(doc.metadata.get("dependencies", []))
            current = [str(d) for d in written]
            missing = [d for d in removing if d not in current]
            if missing:
                raise Refused(f"task {task_id} does not depend on {', '.join(missing)} (it depends on "
                                 f"{', '.join(current) or 'nothing'})")
            new_deps = [d for d in adding if d not in current]
            check_new_dependencies(self, task_id, new_deps, current)
            updates: dict = {}
            if status is not None and status != doc.status:
                updates["status"] = status
                outcome.fields.append(f"status {doc.status} -> {status}")
            if priority is not None and doc.metadata.get("priority") != priority:
                updates["priority"] = priority
                outcome.fields.append(f"priority {priority}")
            if new_deps or removing:
                kept = [d for d in written if str(d) not in removing]
                updates["dependencies"] = kept + [json_id(d) for d in new_deps]
                outcome.fields += [f"depends on {d}" for d in new_deps] + [f"no longer depends on {d}" for d in removing]
            text = doc.set_metadata(updates) if updates else doc.text
            if title is not None and " ".join(title.split()) != doc.title[1]:
                from specflux.format.render import one_line

                text = TaskDocument(text, doc.path).set_title(one_line(title))
                outcome.fields.append(f"title {one_line(title)!r}")
            after = TaskDocument(text, doc.path)
            if any(after.metadata.get(k) != v for k, v in updates.items()) or (
                    title is not None and after.title[1] != " ".join(title.split())):
                raise doc.error("the change would not read back as written (duplicate metadata keys?); "
                                "nothing was written", doc.metadata_fence.start)
            if new_deps:
                text = wire_into(after, upstream_outputs(self, new_deps))
            if text != doc.text:
                pending.files.write(self.path(task_id), text)
            outcome.status = after.status
        return outcome

    def delete(self, task_id: str, *, force: bool = False) -> Outcome:
        """`specflux delete`: remove the task file and its archive. Refused while other tasks
        depend on it, unless `force`, which also removes it from their dependencies."""
        from specflux.store.chain import dependents as find_dependents

        task_id = check_id(task_id)
        self.load(task_id)  # an unknown task is an error
        dependents = find_dependents(self, task_id)
        if dependents and not force:
            who = f"task {dependents[0]} depends" if len(dependents) == 1 else f"tasks {', '.join(dependents)} depend"
            fix = "; ".join(f"specflux set {d} --remove-dep {task_id}" for d in dependents[:3])
            raise Refused(f"{who} on task {task_id}; remove the dependency first ({fix}"
                          f"{'; ...' if len(dependents) > 3 else ''}) or use `specflux delete {task_id} --force`")
        outcome = Outcome(task_id)
        with self.changing([task_id, *dependents], outcome) as pending:
            for other in dependents:
                doc = self.load(other)
                kept = [d for d in doc.metadata.get("dependencies", []) if str(d) != task_id]
                pending.files.write(self.path(other), doc.set_metadata({"dependencies": kept}))
                outcome.fields.append(f"task {other} no longer depends on {task_id}")
            self._remove(self.path(task_id), pending, outcome)
            self._remove(self.ws.archive_path(task_id), pending, outcome)
        return outcome

    def _remove(self, path: Path, pending: Pending, outcome: Outcome) -> None:
        """Delete `path` once the change set has been applied (a failed write keeps it)."""
        if not path.exists():
            return
        from specflux.base.files import check_writable

        check_writable(path, self.ws.relative(path))
        pending.files.remove(path)


def _unfinished(doc: TaskDocument, task_id: str, graph) -> list[str]:
    """What `complete` warns of (and does anyway): criteria not ticked, dependencies not complete."""
    said = []
    open_ = [str(i) for i, (_, _, checked, _, _) in enumerate(doc.criteria_lines, 1) if not checked]
    if open_:
        said.append(f"warning: task {task_id} is completed with {len(open_)} of {len(doc.criteria_lines)} acceptance "
                    f"criteria not ticked ({', '.join(open_)}; `specflux check {task_id} {' '.join(open_)}` ticks them)")
    waiting = [f"{d} ({graph.status.get(d, 'unreadable')})" for d in graph.deps.get(task_id, [])
               if graph.status.get(d) != "complete"]
    if waiting:
        said.append(f"warning: task {task_id} is completed before its dependencies: {', '.join(waiting)}")
    return said


def json_id(task_id: str) -> int | str:
    """`101` is written as the number 101, `T001` and `007` stay strings."""
    return int(task_id) if re.fullmatch(r"[1-9][0-9]*|0", task_id) else task_id


def first_line(text: str, width: int = 60) -> str:
    line = re.split(r"\r\n|\n|\r", text.strip(), maxsplit=1)[0]
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def commit_subject(task_id: str, number: int, did: str) -> str:
    return f"task {task_id}: session {number} — {first_line(did)}"
