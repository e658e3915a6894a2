"""spec-kit: one pass over a `tasks.md`, finding what may be a task and what states an order.

The file's lines first, with what is not content marked (YAML front matter, HTML comments, code
fences); then the candidates of every kind the module `speckit` chooses from (checkbox items and
task headings, id-first paragraphs), each with its nested lines and the markers of its head (see
`speckit_head`), the statements of dependency sections, `Dependencies:` lines outside tasks,
placeholders (`TXXX`) and a file-wide `Status:` line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specflux.importers.speckit_head import PLACEHOLDER, read_head, starts_with_id
from specflux.importers.speckit_phrases import Statement, statements

_BREAK = re.compile(r"\r\n|\r|\n")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])(?:\s+|$)(.*)$")
_CHECKBOX = re.compile(r"^\[(.)\](?:\s+|$)(.*)$")
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|>|\||`{3}|~{3}|(?:[-*_]\s*){3,}$)")
_DEPENDENCY_HEADING = re.compile(r"depend|\border(?:ing)?\b|sequen|serial|parallel|critical path", re.I)
FIELD = re.compile(r"^\s*(?:[-*+]\s+)?(?:\*\*|__)?([A-Za-z][A-Za-z ]{1,24}?)(?:\*\*|__)?\s*:(?:\*\*|__)?\s*(.*)$")
DEPENDENCY_FIELDS = {"dependencies", "dependency", "depends on", "blocked by", "requires", "prerequisites"}
_DONE_WORDS = re.compile(r"^\W*(?:done|complete|completed|implemented|closed|shipped|finished|merged)\b", re.I)
_DONE_HEADING = re.compile(r"✅|✔|☑|\((?:done|complete|completed)\)", re.I)


@dataclass
class Line:
    number: int  # 1-based
    text: str  # without its line ending and without HTML comments
    indent: int  # of the line, or of the fence a fenced line belongs to
    hidden: str | None = None  # "front matter", "comment", "fence"


@dataclass
class Heading:
    level: int
    text: str
    line: int


@dataclass
class Task:
    """A task as the file writes it (or a candidate for one): its id, text, markers and where it stands."""

    raw_id: str | None  # None for an id-less checkbox item; `T005` for `t005`, `T001-2` for a second T001
    line: int
    text: list[str]  # the task's own paragraph, markers and id removed
    details: list[str] = field(default_factory=list)  # what is nested under it, dedented
    box: str | None = None  # the checkbox's character, None where there is none
    parallel: bool = False
    story: str | None = None
    priority: int | None = None
    labels: list[str] = field(default_factory=list)
    headings: tuple[Heading, ...] = ()
    heading_level: int = 0  # a `### T001` task: its heading's level
    done: bool | None = None  # from a `Status:` line, where there is one
    kind: str = "item"  # "item" (checkbox), "heading", "paragraph"
    written: str | None = None  # the id as the file writes it, where that is not raw_id


@dataclass
class Scan:
    """What one pass over the file found."""

    tasks: list[Task] = field(default_factory=list)  # checkbox items and task headings
    paragraphs: list[Task] = field(default_factory=list)  # id-first paragraphs (kind 2)
    statements: list[Statement] = field(default_factory=list)
    section_needs: list[tuple[int, str]] = field(default_factory=list)  # (line, raw text of the ids)
    placeholders: list[tuple[int, str]] = field(default_factory=list)
    idless_in_task_sections: list[int] = field(default_factory=list)
    file_status_done: bool = False
    lines: list[Line] = field(default_factory=list)  # every line, what is not content marked


def scan_file(text: str) -> Scan:
    """The candidates, statements and fields of a `tasks.md` (no disk access)."""
    lines = _lines(text)
    scan = _scan(lines)
    scan.lines = lines
    return scan


# ----------------------------------------------------------------------------------- lines


def _lines(text: str) -> list[Line]:
    """The file's lines with what is not content marked: YAML front matter, HTML comments (the
    template's sample tasks may sit in one) and code fences. CRLF and lone CR count as one line
    break each, so line numbers match what an editor shows."""
    raw = _BREAK.split(text.removeprefix("\ufeff"))
    if raw and raw[-1] == "":
        raw.pop()
    out = [Line(i + 1, line, _indent(line)) for i, line in enumerate(raw)]
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


def _scan(lines: list[Line]) -> Scan:
    """One pass over the lines: task candidates of every kind, dependency statements and fields."""
    scan = Scan()
    stack: list[Heading] = []
    heading_task: Task | None = None
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
            stack = [h for h in stack if h.level < level] + [Heading(level, title, line.number)]
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
            field_match = FIELD.match(line.text)
            name = field_match.group(1).strip().lower() if field_match else ""
            if name in DEPENDENCY_FIELDS:
                scan.section_needs.append((line.number, field_match.group(2)))
            elif name == "status" and not (scan.tasks or scan.paragraphs):  # `Status: Implemented` atop
                scan.file_status_done = bool(_DONE_WORDS.match(field_match.group(2)))
            elif line.indent < 4 and starts_with_id(item.group(3) if item else line.text):
                task, i = _paragraph_task(lines, i, tuple(stack))
                scan.paragraphs.append(task)
                continue
        i += 1
    return scan


def _heading_task(title: str, level: int, number: int, stack: tuple[Heading, ...]) -> Task | None:
    """A `### T001 Title` heading is a task (`### [x] T001`, a ✅ or `(done)` marks it done)."""
    box = None
    m = _CHECKBOX.match(title)
    if m:
        box, title = m.group(1), m.group(2)
    title = title.lstrip("✅✔☑ ")
    if not starts_with_id(title):
        return None
    task = Task(None, number, [], box=box, headings=stack[:-1], heading_level=level, kind="heading")
    _read_head(task, title)
    if _DONE_HEADING.search(title):
        task.done = True
    task.text = [_DONE_HEADING.sub("", task.text[0]).strip()] if task.text else []
    return task


def _item_task(lines: list[Line], i: int, indent: int, box: re.Match,
               stack: tuple[Heading, ...]) -> tuple[Task, int]:
    """A checkbox item and what belongs to it: lazy continuation lines, nested lines."""
    task = Task(None, lines[i].number, [], box=box.group(1), headings=stack)
    _read_head(task, box.group(2))
    end, more, details = _block(lines, i, indent)
    task.text += more
    task.details += details
    for detail in details:
        _task_field(task, detail)
    return task, end


def _paragraph_task(lines: list[Line], i: int, stack: tuple[Heading, ...]) -> tuple[Task, int]:
    """`T1 (tests-first): ...` as a paragraph of its own (or a plain list item), with no checkbox."""
    item = _ITEM.match(lines[i].text)
    task = Task(None, lines[i].number, [], headings=stack, kind="paragraph")
    _read_head(task, item.group(3) if item else lines[i].text)
    end, more, details = _block(lines, i, lines[i].indent)
    task.text += more
    task.details += details
    return task, end


def _read_head(task: Task, text: str) -> None:
    """The task's id, markers and description from the head of its line (see speckit_head)."""
    head = read_head(text)
    task.raw_id, task.text = head.raw_id, [head.text]
    task.written = head.written if head.written != head.raw_id else None
    task.parallel, task.story, task.priority = head.parallel, head.story, head.priority
    task.labels += head.labels


def _block(lines: list[Line], i: int, indent: int) -> tuple[int, list[str], list[str]]:
    """Lines after line `i` that belong to the item starting there: returns the index after them,
    the continuation lines of its paragraph (indented or lazy) and the nested lines, dedented."""
    more: list[str] = []
    nested: list[Line] = []
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


def _task_field(task: Task, text: str) -> None:
    """A task's own `Status: Done` line marks it done (for tasks without a checkbox)."""
    m = FIELD.match(text)
    if m and m.group(1).strip().lower() == "status":
        task.done = bool(_DONE_WORDS.match(m.group(2)))
