"""spec-kit `tasks.md` -> task drafts, as the files are written in the wild, not only as the template
has them.

What is a task, in order of preference (the first kind the file has wins):
1. a checkbox item or a heading whose text starts with an id: `- [ ] T001 [P] [US1] ...`,
   `1. [x] T023a ...`, `### T005.1 ...`;
2. else a paragraph or list item that starts with an id: `T1 (tests-first): ...`;
3. else every checkbox item, with ids `T1`, `T2`, ... in the order they appear (said in a warning).
The id and its markers may be written in many ways (`T002: [P]`, `**T002**`, `t002`...: see
speckit_head). Nothing in front matter, HTML comments or code fences is a task; an id-less checkbox
in a file that has ids (a validation checklist) is not a task either, but one in a section of tasks
is said in a warning, as is a `- T013: ...` item in a file whose tasks are checkboxes, and any other
line whose head looks like an id. An id listed again with the same text is the same task (a file
whose checklist repeats its task list); with other text it is a warning, never a second task.

Dependencies are the source's where it states them: inline (`(depends on T006)`, `after T003`,
`needs T020`), a task's own `Dependencies:` line, and statements in dependency sections
(`T014 blocks T019`, `T001 → T002 → (T003, T004)`, `After T010: T011, T012`, ranges `T006-T012`);
never what a task quotes (`change "- [ ] T027:" to ...`) nor its own id. A task that states none
waits on file order (see `_file_order`). Unknown ids, placeholders (`TXXX`) and dependencies that
would close a cycle are dropped with `path:line` warnings, each said once.

The file is read in one pass in `speckit_scan`, and each task turned into its draft in
`speckit_drafts`; here: which candidates are the tasks, and what each one waits on.
"""

from __future__ import annotations

import re

from specflux.importers.drafts import ImportResult, ImportWarning
from specflux.importers.speckit_drafts import draft
from specflux.importers.speckit_phrases import RANGE, flat, ids, inline, normal, resolve
from specflux.importers.speckit_scan import DEPENDENCY_FIELDS, FIELD, Scan, Task, scan_file

FORMAT = "spec-kit"

_QUOTED = re.compile(r'"[^"\n]*"|“[^”\n]*”|`[^`\n]+`')
_QUOTED_BOX = re.compile(r"\[[ xX]\]")


def parse(text: str, path: str) -> ImportResult:
    """The drafts of a spec-kit `tasks.md` (no disk access); what cannot be read is a warning,
    located `path:line`, and the rest is imported."""
    warnings: list[ImportWarning] = []

    def warn(line: int | None, message: str) -> None:
        warnings.append(ImportWarning(path, line, message))

    scan = scan_file(text)
    tasks = _unique(_choose_tasks(scan, warn), warn)
    for line, token in scan.placeholders:
        warn(line, f"{token} is a placeholder, not a task id; this line is not imported")
    for line in scan.idless_in_task_sections:
        warn(line, "this checkbox looks like a task but has no task id (such as T001); not imported")
    _unread(scan, tasks, warnings, warn)
    dependencies = _file_order(tasks, _explicit(tasks, scan, warn), scan, warn)
    drafts = [draft(task, dependencies[task.raw_id], path, scan.file_status_done) for task in tasks]
    unique = dict.fromkeys(sorted(warnings, key=lambda w: w.line or 0))  # each said once
    return ImportResult(FORMAT, drafts, list(unique))


def _unique(tasks: list[Task], warn) -> list[Task]:
    """Every task once. An id listed again with the same text (a file whose checklist repeats its
    task list) is the same task; with other text (or `t001` beside `T001`) it is a warning, and
    the first one is the task. A task without a description is titled by its id."""
    known: dict[str, Task] = {}
    for task in tasks:
        written = task.written or task.raw_id
        first = known.get(task.raw_id)
        if first is not None:
            if _text(first) != _text(task):
                warn(task.line, f"{written} is listed again with other text (first on line {first.line}); "
                                f"not imported: {first.raw_id} is line {first.line}'s task")
            elif _done(first) != _done(task):
                warn(task.line, f"{written} is listed again (first on line {first.line}) "
                                f"{'ticked' if _done(task) else 'not ticked'}; imported as line {first.line} has it")
            continue
        if not _text(task):
            warn(task.line, f"{written} has no description; imported with its id as its title")
            task.text = [written]
        known[task.raw_id] = task
        if task.box not in (None, " ", "x", "X"):
            warn(task.line, f"{task.raw_id}: unknown checkbox [{task.box}]; imported as not done")
        if written != task.raw_id:
            task.written = written
    return list(known.values())


def _text(task: Task) -> str:
    return " ".join(" ".join(task.text).split())


def _done(task: Task) -> bool:
    return (task.box or " ") in "xX"


# a line whose head is id-shaped, as a reader would take for a task (wider than what is read as an id)
_LOOKS_LIKE_A_TASK = re.compile(
    r"^\s*(?:(?:[-*+]|\d+[.)])\s+)?(?:\[.\]\s+)?(?:\[[^\]]{1,12}\]\s*)*(?:\*\*|__)?"
    r"([Tt]-?[A-Z]{0,4}-?\d[\w.-]*?)[.:]?(?:\*\*|__)?(?:[:.)]?\s|\s*[-–—]\s|$)")


def _unread(scan: Scan, tasks: list[Task], warnings: list[ImportWarning], warn) -> None:
    """A `path:line` warning for each line that looks like a task (its head an id, whatever the
    section) but is neither a task nor said about already, nor a mention of a task that is."""
    said = {t.line for t in tasks} | {w.line for w in warnings}
    known = {t.raw_id for t in tasks} | {normal(t.written) for t in tasks if t.written}
    for line in scan.lines:
        m = _LOOKS_LIKE_A_TASK.match(line.text) if line.hidden is None else None
        if m and line.number not in said and normal(m.group(1)) not in known and not RANGE.match(line.text, m.start(1)):
            warn(line.number, f"{m.group(1)} looks like a task but is not read as one; not imported")


def _choose_tasks(scan: Scan, warn) -> list[Task]:
    """Tasks of the first kind the file has (see the module's docstring)."""
    with_ids = [t for t in scan.tasks if t.raw_id]
    if with_ids:
        sections = {t.headings[-1].line if t.headings else 0 for t in with_ids}
        scan.idless_in_task_sections = [t.line for t in scan.tasks if not t.raw_id and
                                        (t.headings[-1].line if t.headings else 0) in sections]
        known = {t.raw_id for t in with_ids}
        for para in scan.paragraphs:  # `- T13: ...` where the tasks are `- [x] T11 ...`: said, not guessed
            if para.raw_id not in known:
                warn(para.line, f"{para.written or para.raw_id} looks like a task but is not a checkbox item "
                                "as this file's tasks are; not imported")
        return with_ids
    if scan.paragraphs:
        return scan.paragraphs
    items = scan.tasks
    for n, task in enumerate(items, 1):
        task.raw_id = f"T{n}"
    if len(items) == 1:
        warn(items[0].line, "no task ids (such as T001) in this file: its one checkbox item is imported as T1")
    elif items:
        warn(items[0].line, f"no task ids (such as T001) in this file: its {len(items)} checkbox items are "
                            f"imported as T1..T{len(items)} in the order they appear")
    return items


# ---------------------------------------------------------------------------- dependencies


def _explicit(tasks: list[Task], scan: Scan, warn) -> dict[str, list[tuple[str, int]]]:
    """What each task is stated to wait on, as (id, line where it is stated); unknown ids dropped.
    In a task's own text, a quoted line (`change "- [ ] T027:" to "- [X] T027:"`) states nothing
    and a mention of the task's own id is no dependency; an id in lower case that names no task
    (`t2.micro`) is not taken for one."""
    known = {t.raw_id: t for t in tasks}
    out: dict[str, list[tuple[str, int]]] = {t.raw_id: [] for t in tasks}

    def add(task_id: str, raw: str, line: int) -> None:
        found = resolve(raw, known)
        if found is None:
            if raw[:1] != "t":
                shown = raw.replace("..", "-")
                warn(line, f"{task_id} depends on {shown}, which is not a task in this file; dependency dropped")
            return
        for dep in found:
            if dep == task_id:
                if ".." not in raw:
                    warn(line, f"{task_id} cannot depend on itself; dependency dropped")
            elif dep not in (d for d, _ in out[task_id]):
                out[task_id].append((dep, line))

    for task in tasks:
        own = {task.raw_id, normal(task.written or task.raw_id)}
        stated = [raw for raw in inline(_unquoted(" ".join(task.text))) if normal(raw) not in own]
        for detail in map(_unquoted, task.details):
            m = FIELD.match(detail)
            if m and m.group(1).strip().lower() in DEPENDENCY_FIELDS:
                stated += flat(ids(m.group(2)))  # `Dependencies: T002` under T002 is said, in a warning
            else:
                stated += [raw for raw in inline(detail) if normal(raw) not in own]
        for raw in stated:
            add(task.raw_id, raw, task.line)
    for statement in scan.statements:
        named = {t for raw in statement.prerequisites for t in resolve(raw, known) or []}
        for dependent in statement.dependents:
            for task_id in resolve(dependent, known) or []:
                if ".." in dependent and task_id in named:  # a range's member that the sentence
                    continue  # makes a prerequisite is not one that waits
                for raw in statement.prerequisites:
                    add(task_id, raw, statement.line)
    return out


def _unquoted(text: str) -> str:
    """`text` without what it quotes: "...", “...”, and code spans that hold a checkbox."""
    return _QUOTED.sub(lambda m: " " if m.group(0)[0] != "`" or _QUOTED_BOX.search(m.group(0)) else m.group(0),
                       text)


class _Graph:
    """Dependencies added one by one, refusing any that would close a cycle. Only an edge to a later
    task can close one, so the search runs only once such an edge exists."""

    def __init__(self, tasks: list[Task]) -> None:
        self.order = {t.raw_id: n for n, t in enumerate(tasks)}
        self.deps: dict[str, list[str]] = {t.raw_id: [] for t in tasks}
        self.forward = False

    def add(self, task_id: str, dep: str) -> bool:
        forward = self.order[dep] > self.order[task_id]
        if (forward or self.forward) and self.reaches(dep, task_id):
            return False
        self.deps[task_id].append(dep)
        self.forward = self.forward or forward
        return True

    def reaches(self, start: str, goal: str) -> bool:
        """Whether `start` waits on `goal`, directly or through others."""
        seen, todo = {start}, [start]
        while todo:
            for dep in self.deps[todo.pop()]:
                if dep == goal:
                    return True
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return start == goal


def _file_order(tasks: list[Task], explicit: dict[str, list[tuple[str, int]]], scan: Scan,
                warn) -> dict[str, list[str]]:
    """Every task's dependencies: the stated ones, or else file order.

    File order: tasks run in the order they are written, except that neighbouring `[P]` tasks run
    side by side. A task without stated dependencies waits on the tasks before it that nothing
    waits on yet (the "open ends"); a `[P]` task waits on the open ends as they were where its run
    of `[P]` tasks began; a heading ends such a run. So a phase's first task waits for all of the
    previous phase, and a `Dependencies:` line under a phase heading (not in a task) adds its ids to
    the open ends there. Stated dependencies win; one that would close a cycle is dropped (warning).
    """
    graph = _Graph(tasks)
    for task in tasks:
        for dep, line in explicit[task.raw_id]:
            if not graph.add(task.raw_id, dep):
                warn(line, f"{task.raw_id} depends on {dep}, but {dep} already waits on {task.raw_id}: "
                           "dependency dropped to avoid a cycle")
    ahead = {t: {d for d in deps if graph.order[d] > graph.order[t]} for t, deps in graph.deps.items()}
    section_needs = sorted(scan.section_needs)
    open_ends: list[str] = []
    run_start: list[str] | None = None
    previous_section = None
    for task in tasks:
        while section_needs and section_needs[0][0] < task.line:
            open_ends = _with_section_needs(open_ends, *section_needs.pop(0), graph, warn)
        section = task.headings[-1].line if task.headings else 0
        if not task.parallel or section != previous_section:
            run_start = None
        if task.parallel and run_start is None:
            run_start = list(open_ends)
        previous_section = section
        waits = graph.deps[task.raw_id]
        if not waits:
            for dep in run_start if task.parallel else list(open_ends):
                if not graph.add(task.raw_id, dep):
                    warn(task.line, f"{task.raw_id} would wait on {dep} (file order), but {dep} already waits "
                                    f"on {task.raw_id}: left out to avoid a cycle")
        open_ends = [t for t in open_ends if t not in waits] + ([] if ahead[task.raw_id] else [task.raw_id])
        for waiting, later in ahead.items():  # a task that waits on a later one is open from there on
            if task.raw_id in later:
                later.discard(task.raw_id)
                if not later:
                    open_ends = [t for t in open_ends if t not in graph.deps[waiting]] + [waiting]
    return graph.deps


def _with_section_needs(open_ends: list[str], line: int, raw: str, graph: _Graph, warn) -> list[str]:
    """The open ends plus the ids of a phase's own `Dependencies:` line that no open end waits on."""
    out = list(open_ends)
    for name in flat(ids(raw)):
        found = resolve(name, graph.deps)
        if not found and name[:1] != "t":
            warn(line, f"{name.replace('..', '-')} is not a task in this file; dependency dropped")
        out += [i for i in found or [] if not any(o == i or graph.reaches(o, i) for o in out)]
    return out
