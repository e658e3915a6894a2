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
is said in a warning, as is a `- T013: ...` item in a file whose tasks are checkboxes. A second
task with a taken id is imported as `T001-2`.

Dependencies are the source's where it states them: inline (`(depends on T006)`, `after T003`,
`needs T020`), a task's own `Dependencies:` line, and statements in dependency sections
(`T014 blocks T019`, `T001 → T002 → (T003, T004)`, `After T010: T011, T012`, ranges `T006-T012`);
never what a task quotes (`change "- [ ] T027:" to ...`) nor its own id. A task that states none
waits on file order (see `_file_order`). Unknown ids, placeholders (`TXXX`) and dependencies that
would close a cycle are dropped with `path:line` warnings, each said once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specflux.format.render import one_line
from specflux.importers.drafts import ImportResult, ImportWarning, TaskDraft
from specflux.importers.speckit_head import PLACEHOLDER, read_head, starts_with_id
from specflux.importers.speckit_phrases import (
    ID_ANYWHERE,
    Statement,
    flat,
    ids,
    inline,
    normal,
    resolve,
    statements,
)

FORMAT = "spec-kit"
TITLE_MAX = 120

_BREAK = re.compile(r"\r\n|\r|\n")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])(?:\s+|$)(.*)$")
_CHECKBOX = re.compile(r"^\[(.)\](?:\s+|$)(.*)$")
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|>|\||`{3}|~{3}|(?:[-*_]\s*){3,}$)")
_PHASE = re.compile(r"^\W*(?:final\s+)?(?:phase|fase|wave|stage|etapa|milestone|sprint)\b", re.I)
_DEPENDENCY_HEADING = re.compile(r"depend|\border(?:ing)?\b|sequen|serial|parallel|critical path", re.I)
_QUOTED = re.compile(r'"[^"\n]*"|“[^”\n]*”|`[^`\n]+`')
_QUOTED_BOX = re.compile(r"\[[ xX]\]")
_STORY = re.compile(r"\b(?:user\s+story|story|US)[\s-]?(\d+)\b", re.I)
_PRIORITY = re.compile(r"\((?:priority:\s*)?P(\d)\)", re.I)
_FIELD = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?([A-Za-z][A-Za-z ]{1,24}?)(?:\*\*|__)?\s*:(?:\*\*|__)?\s*(.*)$")
_DEPENDENCY_FIELDS = {"dependencies", "dependency", "depends on", "blocked by", "requires", "prerequisites"}
_CHECK_FIELDS = {"expected", "verify", "verification", "validation", "validate", "acceptance",
                 "acceptance criteria", "done when", "test", "independent test", "check"}
_DONE_WORDS = re.compile(r"^\W*(?:done|complete|completed|implemented|closed|shipped|finished|merged)\b", re.I)
_DONE_HEADING = re.compile(r"✅|✔|☑|\((?:done|complete|completed)\)", re.I)
_FILE_EXT = ("py|pyi|rs|ts|tsx|js|jsx|mjs|cjs|json|jsonl|toml|yaml|yml|md|mdx|txt|sh|bash|zsh|ps1|go|java|kt|"
             "swift|rb|php|cs|cpp|cc|c|h|hpp|css|scss|sass|less|html|htm|xml|sql|nix|lock|cfg|ini|conf|astro|"
             "vue|svelte|proto|graphql|gql|csv|svg|png|jpg|jpeg|gif|ico|webp|dart|ex|exs|lua|scala|gradle|tf|"
             "hcl|mk|ipynb|wasm|zip|bin|db|sqlite|tmpl|j2|rst|adoc|pdf|snap|kts|mod|sum")
_SEGMENT = r"[\w.@~*+\[\]-]+(?: [\w.@~*+\[\]-]+)*"  # a path's part, spaces allowed between words
_PATH = re.compile(rf"^(?:~?/|\.\.?/)?(?:{_SEGMENT}/)*{_SEGMENT}/?$")
_HAS_EXT = re.compile(rf"(?:^|/)(?:\.[\w.-]+|[\w.*\[\]-]*[\w\]]\.(?:{_FILE_EXT}))$", re.I)
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_BARE = re.compile(r"(?<![\w`/])([\w.@~*\[\]-]*[/.][\w.@~*/\[\]-]+)")


@dataclass
class _Line:
    number: int  # 1-based
    text: str  # without its line ending and without HTML comments
    indent: int  # of the line, or of the fence a fenced line belongs to
    hidden: str | None = None  # "front matter", "comment", "fence"


@dataclass
class _Heading:
    level: int
    text: str
    line: int


@dataclass
class _Task:
    raw_id: str | None  # None for an id-less checkbox item; `T005` for `t005`, `T001-2` for a second T001
    line: int
    text: list[str]  # the task's own paragraph, markers and id removed
    details: list[str] = field(default_factory=list)  # what is nested under it, dedented
    box: str | None = None  # the checkbox's character, None where there is none
    parallel: bool = False
    story: str | None = None
    priority: int | None = None
    labels: list[str] = field(default_factory=list)
    headings: tuple[_Heading, ...] = ()
    heading_level: int = 0  # a `### T001` task: its heading's level
    done: bool | None = None  # from a `Status:` line, where there is one
    kind: str = "item"  # "item" (checkbox), "heading", "paragraph"
    written: str | None = None  # the id as the file writes it, where that is not raw_id


@dataclass
class _Scan:
    tasks: list[_Task] = field(default_factory=list)  # checkbox items and task headings
    paragraphs: list[_Task] = field(default_factory=list)  # id-first paragraphs (kind 2)
    statements: list[Statement] = field(default_factory=list)
    section_needs: list[tuple[int, str]] = field(default_factory=list)  # (line, raw text of the ids)
    placeholders: list[tuple[int, str]] = field(default_factory=list)
    idless_in_task_sections: list[int] = field(default_factory=list)
    file_status_done: bool = False


def parse(text: str, path: str) -> ImportResult:
    """The drafts of a spec-kit `tasks.md` (no disk access); what cannot be read is a warning,
    located `path:line`, and the rest is imported."""
    warnings: list[ImportWarning] = []

    def warn(line: int | None, message: str) -> None:
        warnings.append(ImportWarning(path, line, message))

    scan = _scan(_lines(text))
    tasks = _unique(_choose_tasks(scan, warn), warn)
    for line, token in scan.placeholders:
        warn(line, f"{token} is a placeholder, not a task id; this line is not imported")
    for line in scan.idless_in_task_sections:
        warn(line, "this checkbox looks like a task but has no task id (such as T001); not imported")
    dependencies = _file_order(tasks, _explicit(tasks, scan, warn), scan, warn)
    drafts = [_draft(task, dependencies[task.raw_id], path, scan.file_status_done) for task in tasks]
    unique = dict.fromkeys(sorted(warnings, key=lambda w: w.line or 0))  # each said once
    return ImportResult(FORMAT, drafts, list(unique))


def _unique(tasks: list[_Task], warn) -> list[_Task]:
    """Every task under an id of its own: a second task with a taken id (`T001` again, or `t001`
    beside `T001`) is `T001-2`, said in a warning; no task is dropped. A task without a description
    is titled by its id."""
    known: dict[str, _Task] = {}
    for task in tasks:
        written = task.written or task.raw_id
        if task.raw_id in known:
            first = known[task.raw_id]
            task.raw_id = next(f"{task.raw_id}-{n}" for n in range(2, len(tasks) + 2)
                               if f"{task.raw_id}-{n}" not in known)
            warn(task.line, f"{written} is listed twice (first on line {first.line}); imported as {task.raw_id}")
        if not " ".join(task.text).strip():
            warn(task.line, f"{written} has no description; imported with its id as its title")
            task.text = [written]
        known[task.raw_id] = task
        if task.box not in (None, " ", "x", "X"):
            warn(task.line, f"{task.raw_id}: unknown checkbox [{task.box}]; imported as not done")
        if written != task.raw_id:
            task.written = written
    return list(known.values())


# ----------------------------------------------------------------------------------- lines


def _lines(text: str) -> list[_Line]:
    """The file's lines with what is not content marked: YAML front matter, HTML comments (the
    template's sample tasks may sit in one) and code fences. CRLF and lone CR count as one line
    break each, so line numbers match what an editor shows."""
    raw = _BREAK.split(text.removeprefix("\ufeff"))
    if raw and raw[-1] == "":
        raw.pop()
    out = [_Line(i + 1, line, _indent(line)) for i, line in enumerate(raw)]
    start = 0
    if raw and raw[0].strip() == "---":
        end = next((i for i in range(1, len(raw)) if raw[i].strip() in ("---", "...")), None)
        if end is not None:
            for line in out[: end + 1]:
                line.hidden = "front matter"
            start = end + 1
    in_comment = False
    fence: tuple[str, int, int] | None = None  # marker character, length, indent
    for line in out[start:]:
        if fence is not None:
            line.hidden, line.indent = "fence", fence[2]
            m = _FENCE.match(line.text)
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= fence[1] and not m.group(3).strip():
                fence = None
            continue
        visible, in_comment, touched = _without_comments(line.text, in_comment)
        if touched and not visible.strip():
            line.hidden = "comment"
            continue
        line.text = visible
        m = _FENCE.match(visible)
        if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            fence = (m.group(2)[0], len(m.group(2)), len(m.group(1)))
            line.hidden = "fence"
    return out


def _without_comments(text: str, in_comment: bool) -> tuple[str, bool, bool]:
    """`text` without HTML comments, as CommonMark reads them: a line starting with `<!--` opens a
    comment block that runs to the first `-->`; elsewhere only a comment closed on the same line is
    one (an unclosed `<!--` mid-line is text). Returns the text, whether a comment block is still
    open, and whether any comment touched the line."""
    touched = in_comment or "<!--" in text
    if in_comment:
        end = text.find("-->")
        if end < 0:
            return "", True, True
        text = text[end + 3:]
    elif text.lstrip(" ").startswith("<!--") and "-->" not in text.lstrip(" ")[4:]:
        return "", True, True
    return re.sub(r"<!--.*?-->", "", text), False, touched


def _indent(line: str) -> int:
    spaces = len(line) - len(line.lstrip(" \t"))
    return len(line[:spaces].expandtabs(4))


# ------------------------------------------------------------------------------------ scan


def _scan(lines: list[_Line]) -> _Scan:
    """One pass over the lines: task candidates of every kind, dependency statements and fields."""
    scan = _Scan()
    stack: list[_Heading] = []
    heading_task: _Task | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        in_dependencies = any(_DEPENDENCY_HEADING.search(h.text) for h in stack)
        if line.hidden == "fence" and in_dependencies:
            scan.statements += statements(line.text, line.number)
        if line.hidden:
            i += 1
            continue
        heading = _HEADING.match(line.text)
        if heading:
            level, title = len(heading.group(1)), (heading.group(2) or "").strip()
            if heading_task is not None and level <= heading_task.heading_level:
                heading_task = None
            stack = [h for h in stack if h.level < level] + [_Heading(level, title, line.number)]
            task = _heading_task(title, level, line.number, tuple(stack))
            if task is not None:
                scan.tasks.append(task)
                heading_task = task
            i += 1
            continue
        item = _ITEM.match(line.text)
        box = _CHECKBOX.match(item.group(3)) if item else None
        if box and (box.group(1) in " xX" or starts_with_id(box.group(2))):
            task, i = _item_task(lines, i, len(item.group(1)), box, tuple(stack))
            if task.raw_id is None and heading_task is not None:  # a step of a `### T001` task
                heading_task.details.append(("[x] " if task.box in "xX" else "[ ] ") + " ".join(task.text))
            elif task.raw_id is None and PLACEHOLDER.match(box.group(2)):
                scan.placeholders.append((task.line, PLACEHOLDER.match(box.group(2)).group(1)))
            else:
                scan.tasks.append(task)
            continue
        if heading_task is not None:
            _task_field(heading_task, line.text.strip())
            heading_task.details.append(line.text.strip())
        elif in_dependencies:
            scan.statements += statements(line.text, line.number)
        else:
            field_match = _FIELD.match(line.text)
            name = field_match.group(1).strip().lower() if field_match else ""
            if name in _DEPENDENCY_FIELDS:
                scan.section_needs.append((line.number, field_match.group(2)))
            elif name == "status" and not (scan.tasks or scan.paragraphs):  # `Status: Implemented` atop
                scan.file_status_done = bool(_DONE_WORDS.match(field_match.group(2)))
            elif line.indent < 4 and starts_with_id(item.group(3) if item else line.text):
                task, i = _paragraph_task(lines, i, tuple(stack))
                scan.paragraphs.append(task)
                continue
        i += 1
    return scan


def _heading_task(title: str, level: int, number: int, stack: tuple[_Heading, ...]) -> _Task | None:
    """A `### T001 Title` heading is a task (`### [x] T001`, a ✅ or `(done)` marks it done)."""
    box = None
    m = _CHECKBOX.match(title)
    if m:
        box, title = m.group(1), m.group(2)
    title = title.lstrip("✅✔☑ ")
    if not starts_with_id(title):
        return None
    task = _Task(None, number, [], box=box, headings=stack[:-1], heading_level=level, kind="heading")
    _read_head(task, title)
    if _DONE_HEADING.search(title):
        task.done = True
    task.text = [_DONE_HEADING.sub("", task.text[0]).strip()] if task.text else []
    return task


def _item_task(lines: list[_Line], i: int, indent: int, box: re.Match,
               stack: tuple[_Heading, ...]) -> tuple[_Task, int]:
    """A checkbox item and what belongs to it: lazy continuation lines, nested lines."""
    task = _Task(None, lines[i].number, [], box=box.group(1), headings=stack)
    _read_head(task, box.group(2))
    end, more, details = _block(lines, i, indent)
    task.text += more
    task.details += details
    for detail in details:
        _task_field(task, detail)
    return task, end


def _paragraph_task(lines: list[_Line], i: int, stack: tuple[_Heading, ...]) -> tuple[_Task, int]:
    """`T1 (tests-first): ...` as a paragraph of its own (or a plain list item), with no checkbox."""
    item = _ITEM.match(lines[i].text)
    task = _Task(None, lines[i].number, [], headings=stack, kind="paragraph")
    _read_head(task, item.group(3) if item else lines[i].text)
    end, more, details = _block(lines, i, lines[i].indent)
    task.text += more
    task.details += details
    return task, end


def _read_head(task: _Task, text: str) -> None:
    """The task's id, markers and description from the head of its line (see speckit_head)."""
    head = read_head(text)
    task.raw_id, task.text = head.raw_id, [head.text]
    task.written = head.written if head.written != head.raw_id else None
    task.parallel, task.story, task.priority = head.parallel, head.story, head.priority
    task.labels += head.labels


def _block(lines: list[_Line], i: int, indent: int) -> tuple[int, list[str], list[str]]:
    """Lines after line `i` that belong to the item starting there: returns the index after them,
    the continuation lines of its paragraph (indented or lazy) and the nested lines, dedented."""
    more: list[str] = []
    nested: list[_Line] = []
    in_paragraph = True
    j = i + 1
    while j < len(lines):
        line = lines[j]
        if line.hidden == "front matter":
            break
        if line.hidden == "comment":
            j += 1
            continue
        if not line.text.strip() and line.hidden is None:
            following = next((x for x in lines[j + 1:] if x.hidden != "comment" and x.text.strip()), None)
            if following is None or following.indent <= indent:
                break
            nested.append(line)
            in_paragraph = False
            j += 1
            continue
        deeper = line.indent > indent
        item = _ITEM.match(line.text) if line.hidden is None else None
        if item and deeper:
            box = _CHECKBOX.match(item.group(3))
            if box and starts_with_id(box.group(2)):  # a nested task with an id of its own
                break
        if in_paragraph and line.hidden is None and not item and (deeper or not _BLOCK_START.match(line.text)):
            more.append(line.text.strip())
        elif deeper:
            nested.append(line)
            in_paragraph = False
        else:
            break
        j += 1
    while nested and not nested[-1].text.strip():
        nested.pop()
    cut = min((x.indent for x in nested if x.text.strip() and x.hidden != "fence"), default=0)
    return j, more, [x.text[cut:] if x.text[:cut].strip() == "" else x.text.strip() for x in nested]


def _task_field(task: _Task, text: str) -> None:
    """A task's own `Status: Done` line marks it done (for tasks without a checkbox)."""
    m = _FIELD.match(text)
    if m and m.group(1).strip().lower() == "status":
        task.done = bool(_DONE_WORDS.match(m.group(2)))


def _choose_tasks(scan: _Scan, warn) -> list[_Task]:
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


def _explicit(tasks: list[_Task], scan: _Scan, warn) -> dict[str, list[tuple[str, int]]]:
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
            m = _FIELD.match(detail)
            if m and m.group(1).strip().lower() in _DEPENDENCY_FIELDS:
                stated += flat(ids(m.group(2)))  # `Dependencies: T002` under T002 is said, in a warning
            else:
                stated += [raw for raw in inline(detail) if normal(raw) not in own]
        for raw in stated:
            add(task.raw_id, raw, task.line)
    for statement in scan.statements:
        for dependent in statement.dependents:
            for task_id in resolve(dependent, known) or []:
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

    def __init__(self, tasks: list[_Task]) -> None:
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


def _file_order(tasks: list[_Task], explicit: dict[str, list[tuple[str, int]]], scan: _Scan,
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


# ---------------------------------------------------------------------------------- drafts


def _draft(task: _Task, dependencies: list[str], path: str, file_done: bool) -> TaskDraft:
    """The task as specflux writes it: a one-line title, the whole text as requirements, the
    source's facts in the metadata."""
    description = " ".join(task.text).strip()
    criteria, checked = _criteria(task, description)
    if task.box is not None:
        done = task.box in "xX" or (task.kind == "heading" and bool(task.done))
    else:  # a paragraph or heading task: its own `Status:` line, else the file's
        done = task.done if task.done is not None else file_done
    return TaskDraft(
        task_id=task.raw_id,
        title=_title(description),
        requirements="\n".join([description, *task.details]).strip(),
        criteria=criteria,
        checked=checked if checked else [done] * len(criteria),
        status="complete" if done else "pending",
        dependencies=dependencies,
        metadata=_metadata(task, path, description),
        line=task.line,
    )


def _metadata(task: _Task, path: str, description: str) -> dict:
    """`source`, and where the file says so `phase`, `user_story`, `files`, `priority`, `labels`;
    `parallel` always (true for a `[P]` task)."""
    metadata: dict = {"source": {"path": path, "line": task.line}}
    if task.written:  # `t005` imported as T005, a second T001 as T001-2: write-back finds the line by it
        metadata["source"]["id"] = task.written
    phase = _phase(task.headings)
    story = task.story or next((f"US{m.group(1)}" for h in reversed(task.headings)
                                for m in [_STORY.search(h.text)] if m), None)
    priority = task.priority or next((int(m.group(1)) for h in reversed(task.headings)
                                      for m in [_PRIORITY.search(h.text)] if m), None)
    found = _files("\n".join([description, *task.details]))
    for key, value in (("phase", phase), ("user_story", story), ("parallel", task.parallel), ("files", found),
                       ("priority", priority), ("labels", list(dict.fromkeys(task.labels)))):
        if value or key == "parallel":
            metadata[key] = value
    return metadata


def _criteria(task: _Task, description: str) -> tuple[list[str], list[bool]]:
    """The task's own checklist where it has one; else its validation line ("Expected: ...",
    "Verify: ..."); else the task's text: one criterion, never none."""
    steps = [(m.group(2), m.group(1) in "xX") for d in task.details
             for m in [re.match(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?\[(.)\]\s+(.+)$", d)] if m]
    if steps:
        return [_safe(one_line(s)) for s, _ in steps], [c for _, c in steps]
    for detail in task.details:
        m = _FIELD.match(detail)
        if m and m.group(1).strip().lower() in _CHECK_FIELDS and m.group(2).strip():
            return [_safe(one_line(m.group(2).replace("**", "")))], []
    return [_safe(one_line(description.replace("**", "")))], []


def _title(description: str) -> str:
    """One readable line: the text up to its first clause break when it is long."""
    text = _safe(one_line(description.replace("**", "").replace("__", ""))).rstrip(" :")
    text = text[:-1] if text.endswith(".") and not text.endswith("..") else text
    if len(text) <= TITLE_MAX:
        return text
    breaks = [m.start() for m in re.finditer(r"\.\s|\s[—–]\s|;\s|:\s", text) if 20 <= m.start() <= TITLE_MAX]
    if breaks:
        return text[: breaks[0]].rstrip(" .")
    return text[: TITLE_MAX - 1].rsplit(" ", 1)[0].rstrip(" ,;:-–—") + "…"


def _safe(text: str) -> str:
    """A single line that cannot open an HTML comment in the task file."""
    return text.replace("<!--", "&lt;!--") if text.count("<!--") > text.count("-->") else text


def _phase(headings: tuple[_Heading, ...]) -> str | None:
    """The nearest heading that names a phase (`## Phase 3: ...`, `## Fase 2 — ...`, `## Wave W2`),
    else the nearest `##` heading; without its priority and decorations."""
    chosen = next((h for h in reversed(headings) if _PHASE.match(h.text)), None)
    chosen = chosen or next((h for h in reversed(headings) if h.level == 2), None)
    if chosen is None:
        return None
    text = _PRIORITY.sub("", chosen.text.replace("**", ""))
    text = re.sub(r"[\U0001F300-\U0001FAFF\u2600-\u27BF\uFE0F]|\bMVP\b", "", text)
    return one_line(text).rstrip(" -–—:") or None


def _files(text: str) -> list[str]:
    """Paths the task names: in backticks, or bare with a `/` or a known extension."""
    found: list[str] = []
    for m in _BACKTICKED.finditer(text):
        candidate = m.group(1).strip()
        if _is_path(candidate) and ("/" in candidate or _HAS_EXT.search(candidate)):
            found.append(candidate)
    for m in _BARE.finditer(_BACKTICKED.sub(" ", text)):  # bare: `and/or`, `panel/seal/merge` are words
        candidate = m.group(1).rstrip(".,;:")
        if re.fullmatch(r"[A-Z][a-z]+\.js", candidate):  # Node.js, Next.js: names, not files
            continue
        if _is_path(candidate) and (_HAS_EXT.search(candidate) or candidate.endswith("/")):
            found.append(candidate)
    return list(dict.fromkeys(found))


def _is_path(candidate: str) -> bool:
    """Path-shaped: no URL, no command line (`npm run x`), no task id."""
    if "://" in candidate or not _PATH.match(candidate) or ID_ANYWHERE.fullmatch(candidate):
        return False
    words = candidate.split(" ")  # `Audio Trimmer/App/` is a path, `npm run db:migrate` is not
    beside_spaces = [w.rsplit("/", 1)[-1] for w in words[:-1]] + [w.split("/", 1)[0] for w in words[1:]]
    return not any(not w[:1].isupper() and not w[:1].isdigit() for w in beside_spaces)
