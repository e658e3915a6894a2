"""Validation of hand-edited task files: every problem with its file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from specflux.base.records import record
from specflux.store.chain import Graph
from specflux.store.config import ArchiveConfig
from specflux.format.document import BOM, TaskDocument
from specflux.base.errors import SpecfluxError
from specflux.base.files import read_text
from specflux.store.workspace import STATE_FILE, Workspace


@record(frozen=True)
class Problem:
    path: str
    line: int | None
    message: str
    severity: str = "error"  # "error" fails lint; "warning" is reported only

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        prefix = "warning: " if self.severity == "warning" else ""
        return f"{where}: {prefix}{self.message}"

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "message": self.message, "severity": self.severity}


def structure_problems(doc: TaskDocument) -> list[Problem]:
    """What makes a file read differently from how it looks: a byte-order mark, a code fence or
    comment never closed, a section written twice. Found even when the file cannot be parsed."""
    path = doc.path or "<text>"
    out = []
    if doc.text.startswith(BOM):
        out.append(Problem(path, 1, "the file starts with a UTF-8 byte-order mark; specflux reads it, but "
                                    "other tools may not: save the file without it"))
    for what, start in doc.unclosed():
        close = "```" if what == "code fence" else "-->"
        out.append(Problem(path, doc.outline.line_of(start), f"this {what} is never closed, so everything after it "
                                                             f"is hidden; close it with {close}"))
    from specflux.format.line_merge import conflict_lines

    for line in conflict_lines(doc.text):
        out.append(Problem(path, line, "a merge conflict is left here: keep one side and remove the markers"))
    for key, heading in doc.duplicate_sections:
        first = doc.sections[key].heading
        out.append(Problem(path, doc.outline.line_of(heading.start),
                           f"a second `{'#' * heading.level} {heading.text}` section: specflux reads only the first "
                           f"(line {doc.outline.line_of(first.start)}); merge the two"))
    return out


def front_matter_problems(doc: TaskDocument) -> list[Problem]:
    """YAML front matter opening the file, which specflux does not read (`lint` only: a session
    leaving the front matter it found is no session breaking the file)."""
    front = front_matter(doc.text)
    if not front:
        return []
    end, keys = front
    said = f" (its {', '.join(f'`{k}`' for k in keys[:4])} {'is' if len(keys) == 1 else 'are'} ignored)" if keys else ""
    return [Problem(doc.path or "<text>", 1, f"YAML front matter (lines 1-{end}) is not read by specflux{said}: a "
                    "task's fields live in the JSON block under `## 0. Metadata`; move them there and delete lines "
                    f"1-{end}")]


def front_matter(text: str) -> tuple[int, list[str]] | None:
    """A YAML front matter block opening the file (`---` ... `---`): its last line and its keys."""
    lines = text.removeprefix(BOM).splitlines()
    if not lines or lines[0].rstrip() != "---":
        return None
    for n, line in enumerate(lines[1:], 2):
        if line.rstrip() in ("---", "..."):
            keys = [k.split(":", 1)[0].strip() for k in lines[1:n - 1] if ":" in k and not k[:1].isspace()]
            return n, keys
    return None


def lint_document(doc: TaskDocument, file_id: str | None, cfg: ArchiveConfig) -> list[Problem]:
    """Problems inside one file. A file that cannot be parsed gives its parse error (and the
    structure problems that may explain it)."""
    path = doc.path or "<text>"
    problems: list[Problem] = structure_problems(doc)
    try:
        doc.title  # noqa: B018
        meta = doc.metadata
    except SpecfluxError as e:
        return [Problem(e.path or path, e.line, e.message), *(p for p in problems if p.line != e.line)]

    for key, start in doc.duplicate_keys():
        problems.append(Problem(path, doc.outline.line_of(start), f'metadata key "{key}" is written twice: JSON '
                                                                  "keeps the last one; remove the other"))

    def key_line(key: str) -> int:
        m = next((m for m in doc.members if m.key == key), None)
        return doc.outline.line_of(m.key_start if m else doc.metadata_fence.start)

    written = meta.get("task_id")
    if written is None:
        problems.append(Problem(path, doc.outline.line_of(doc.metadata_fence.start), 'metadata has no "task_id"'))
    elif file_id is not None and str(written) != file_id:
        problems.append(Problem(path, key_line("task_id"), f"task_id {written!r} does not match the file name (task {file_id})"))

    previous = doc.archived_region[1] if doc.archived_region else 0
    seen: set[int] = set(range(doc.archived_region[0], previous + 1)) if doc.archived_region else set()
    for number, _, region in doc.session_regions:
        line = doc.outline.line_of(region.start)
        if number in seen:
            problems.append(Problem(path, line, f"session {number} appears more than once"))
        elif number < previous:
            problems.append(Problem(path, line, f"session {number} comes after session {previous}: numbers go backwards"))
        seen.add(number)
        previous = max(previous, number)

    total = meta.get("total_sessions")
    if total is not None and total != doc.session_count:
        problems.append(Problem(path, key_line("total_sessions"), f"total_sessions is {total} but the progress log has {doc.session_count} session(s)"))

    size = len(doc.text.encode("utf-8"))
    for message in cfg.warnings(size, doc.session_count):
        problems.append(Problem(path, None, message, "warning"))
    return problems


def lint_workspace(ws: Workspace, paths: Iterable[Path] = ()) -> list[Problem]:
    """Lint the given files (or every task file), plus dependencies and cycles across the workspace."""
    cfg = ws.config.archive
    chosen = list(paths) or [ws.task_path(t) for t in ws.task_ids()]
    problems: list[Problem] = []
    docs: dict[str, TaskDocument] = {}
    for path in chosen:
        rel = ws.relative(path.resolve())
        m = STATE_FILE.fullmatch(path.name)
        try:
            doc = TaskDocument(read_text(path, rel), rel)
        except FileNotFoundError:
            problems.append(Problem(rel, None, "no such file"))
            continue
        except SpecfluxError as e:
            problems.append(Problem(rel, e.line, e.message))
            continue
        problems += front_matter_problems(doc) + lint_document(doc, m.group(1) if m else None, cfg)
        if m and _parses(doc):
            docs[m.group(1)] = doc
    problems += _graph_problems(ws, docs)
    return problems


def _stale_inputs(ws: Workspace, docs: dict[str, TaskDocument], graph: Graph) -> list[Problem]:
    """Chain inputs that do not match their upstream's chain output: missing after an interrupted
    `complete`, or out of date after the upstream changed (only where wiring wrote them, with its
    `[Full chain output]` link: a chain input a person wrote by hand is theirs). `specflux wire
    ID` repairs them."""
    from specflux.store.chain import _is_from, upstream_from, wire_into

    upstream_docs: dict[str, TaskDocument | None] = {}

    def upstream(dep: str):
        if dep not in upstream_docs:
            try:
                doc = docs.get(dep) or TaskDocument(read_text(ws.task_path(dep)), ws.relative(ws.task_path(dep)))
                upstream_docs[dep] = doc if _parses(doc) else None
            except (SpecfluxError, OSError):
                upstream_docs[dep] = None
        doc = upstream_docs[dep]
        return upstream_from(dep, doc) if doc is not None else None

    out = []
    for task_id, doc in docs.items():
        for dep in dict.fromkeys(graph.deps.get(task_id, [])):
            if dep not in graph.deps or dep == task_id:
                continue
            up = upstream(dep)
            if up is None or wire_into(doc, [up]) == doc.text:
                continue
            region = next((r for r in doc.subsections(doc.sections.get("chain_inputs")) if _is_from(r, dep)), None)
            if region is None:
                line = doc.outline.line_of(doc.sections["chain_inputs"].start) if "chain_inputs" in doc.sections else None
                m = next((m for m in doc.members if m.key == "dependencies"), None)
                line = line or (doc.outline.line_of(m.key_start) if m else None)
                message = f"task {dep} is complete but its chain output is missing here"
            elif "[Full chain output](" not in doc.text[region.body : region.end]:
                continue
            else:
                line = doc.outline.line_of(region.start)
                message = f"the chain input from task {dep} differs from its chain output"
            out.append(Problem(doc.path or "", line, f"{message}; run `specflux wire {dep}` to refresh it"))
    return out


def _parses(doc: TaskDocument) -> bool:
    try:
        doc.title  # noqa: B018
        doc.metadata  # noqa: B018
    except SpecfluxError:
        return False
    return True


def _graph_problems(ws: Workspace, docs: dict[str, TaskDocument]) -> list[Problem]:
    """Unknown dependencies and cycles, reported at each task's "dependencies" line."""
    known = set(ws.task_ids())
    deps: dict[str, list[str]] = {}
    for task_id in known:
        doc = docs.get(task_id)
        try:
            if doc is None:
                doc = TaskDocument(read_text(ws.task_path(task_id)))
            deps[task_id] = doc.dependencies
        except SpecfluxError:
            deps[task_id] = []  # its own parse error is reported where it is linted
    graph = Graph(deps, {}, {})
    out: list[Problem] = []

    def where(task_id: str) -> tuple[str, int | None]:
        doc = docs[task_id]
        m = next((m for m in doc.members if m.key == "dependencies"), None)
        return doc.path or "", doc.outline.line_of(m.key_start) if m else None

    for task_id, dep in graph.unknown():
        if task_id in docs:
            out.append(Problem(*where(task_id), f"depends on task {dep}, which does not exist"))
    out += _stale_inputs(ws, docs, graph)
    for cycle in graph.cycles():
        loop = " -> ".join(cycle + [cycle[0]])
        for task_id in cycle:
            if task_id in docs:
                out.append(Problem(*where(task_id), f"dependency cycle: {loop}"))
    return out
