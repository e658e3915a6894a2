"""Taskmaster (task-master-ai): a `tasks.json` -> task drafts.

Two layouts exist. Legacy: `{"tasks": [...], "metadata": {...}}`. Tagged (since 0.17, written by
every current version): `{"master": {"tasks": [...], "metadata": {...}}, "feature-x": {"tasks": [...]}}`,
one context per tag. A task has `id` (an int, sometimes a string), `title`, `description`, `details`,
`testStrategy`, `status`, `priority`, `dependencies` and `subtasks`; a subtask's `id` is local to its
parent (`1`, `2`...) and its `dependencies` are sibling ids (`1`) or dotted full ids (`"3.1"`).

Ids: a master task keeps its id (`3`), a subtask is `parent.sub` (`3.1`), as Taskmaster writes
them. Tags other than master are separate id spaces in Taskmaster (each may have its own task 1), so
their tasks are prefixed with the tag: `feature-x.3`, `feature-x.3.1`. A legacy file is the master tag.
Dependencies resolve within their own tag, as in Taskmaster.

Criteria come from `acceptanceCriteria` (older generators wrote one) or `testStrategy`, one per line
(or per sentence when it is one paragraph), else the title. Taskmaster has no per-criterion ticks:
all are checked when the task is done.
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
import re
from dataclasses import dataclass, field
from typing import Any

from specflux.importers.drafts import ImportResult, ImportWarning, TaskDraft, to_task_id

FORMAT = "taskmaster"
MASTER = "master"
STATUSES = {
    "pending": "pending",
    "todo": "pending",
    "in-progress": "in_progress",
    "in_progress": "in_progress",
    "review": "review",
    "done": "complete",
    "completed": "complete",
    "blocked": "blocked",
}
# Taskmaster statuses with no equivalent: not ready work (Taskmaster's `next` skips them), not done.
# They import as blocked, each with a warning that names it; so does a status Taskmaster does not know.
NO_EQUIVALENT = ("cancelled", "canceled", "deferred")
# keys a draft's fields take; every other key of a task is kept under metadata["taskmaster"]
_MAPPED = ("id", "title", "description", "details", "status", "priority", "dependencies", "subtasks", "assignee",
           "acceptanceCriteria", "testStrategy")
EXACT_STATUSES = ("pending", "in-progress", "review", "done", "blocked")
PRIORITIES = {"high": 1, "medium": 3, "low": 5}

_ID_KEY = re.compile(r'(?<!\\)"id"\s*:')
_MARKER = re.compile(r"\s*(?:(?:[-*+•]|\d+[.)])\s+(?:\[[ xX]\]\s+)?|\[[ xX]\]\s+)")  # a line's own, at its start
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(\[])")
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|vs|cf|etc)\.$", re.IGNORECASE)


# --- JSON with positions (also used by the harness importer) ---------------------------------------

class LocatedJSON:
    """A parsed JSON document that can say on which line each of its objects is.

    The json module gives no positions, so the decoder is built on json's own pure-Python scanner
    with `parse_object` wrapped to record where every object starts and ends (9 MB in ~0.15 s).
    `line_of(obj)` is the line of the object's own `"id"` key, else of its `{`.
    """

    def __init__(self, text: str) -> None:
        """Raises json.JSONDecodeError (and RecursionError on absurd nesting)."""
        self.text = text
        self.spans: dict[int, tuple[int, int]] = {}
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        decoder = json.JSONDecoder()

        def parse_object(s_and_end: tuple[str, int], *args: Any) -> tuple[Any, int]:
            obj, end = json.decoder.JSONObject(s_and_end, *args)
            self.spans[id(obj)] = (s_and_end[1] - 1, end)
            return obj, end

        decoder.parse_object = parse_object  # type: ignore[assignment]
        decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
        self.data: Any = decoder.decode(text)

    def line_of(self, obj: Any) -> int | None:
        span = self.spans.get(id(obj))
        if span is None:
            return None
        start, end = span
        nested = [self.spans[id(v)] for v in _children(obj) if id(v) in self.spans]
        for match in _ID_KEY.finditer(self.text, start, end):
            if not any(a <= match.start() < b for a, b in nested):
                return self._line(match.start())
        return self._line(start)

    def _line(self, offset: int) -> int:
        return bisect.bisect_right(self._line_starts, offset)


def _children(obj: Any) -> list[Any]:
    """The objects directly inside `obj` (in its values, or in lists among them)."""
    found: list[Any] = []
    for value in obj.values() if isinstance(obj, dict) else []:
        if isinstance(value, dict):
            found.append(value)
        elif isinstance(value, list):
            found.extend(item for item in value if isinstance(item, dict))
    return found


def read_json(text: str, path: str, warnings: list[ImportWarning]) -> "LocatedJSON | None":
    """The located JSON of a source file (a BOM skipped), or None with a warning at the line where
    the parser stopped."""
    try:
        return LocatedJSON(text.lstrip("\ufeff"))
    except json.JSONDecodeError as error:
        warnings.append(ImportWarning(path, error.lineno, f"not valid JSON: {error.msg}"))
    except RecursionError:
        warnings.append(ImportWarning(path, None, "not readable as JSON (nested too deeply)"))
    return None


# --- the importer -----------------------------------------------------------------------------------

@dataclass
class _Entry:
    """One task or subtask of one tag, before dependencies are resolved."""

    local: str  # Taskmaster's own full id in its tag: "3", "3.1"
    task_id: str
    obj: dict[str, Any]
    line: int | None
    parent: _Entry | None = None
    children: dict[str, str] = field(default_factory=dict)  # a task's subtasks: sub id ("1") -> local id ("3.1")
    written: str = ""  # Taskmaster's id as the file has it ("3.1" for a second 3.1 imported as "3.1-2")


def parse(text: str, path: str) -> ImportResult:
    """Drafts for every task and subtask of every tag of a Taskmaster `tasks.json`."""
    result = ImportResult(FORMAT)
    doc = read_json(text, path, result.warnings)
    if doc is None:
        return result
    taken: set[str] = set()
    for tag, tasks in _tags(doc, path, result.warnings):
        entries = _entries(doc, tag, tasks, path, result.warnings, taken)
        result.drafts.extend(_draft(entry, tag, entries, path, result.warnings) for entry in entries.values())
    return result


def _tags(doc: LocatedJSON, path: str, warnings: list[ImportWarning]) -> list[tuple[str, list[Any]]]:
    """(tag, its task list) in file order; a legacy file is one context, master."""
    data = doc.data
    if isinstance(data, dict) and "tasks" in data:
        contexts = [(MASTER, data)]
    elif isinstance(data, dict):
        contexts = [(str(k), v) for k, v in data.items() if isinstance(v, dict) and "tasks" in v]
    else:
        contexts = []
    if not contexts:
        warnings.append(ImportWarning(path, 1, 'no tasks: expected {"tasks": [...]} or {"<tag>": {"tasks": [...]}}'))
    found = []
    for tag, context in contexts:
        if not isinstance(context["tasks"], list):
            warnings.append(ImportWarning(path, doc.line_of(context), f'tag {tag!r}: "tasks" is not a list; skipped'))
        elif tag != MASTER and to_task_id(tag) != tag:
            warnings.append(ImportWarning(path, doc.line_of(context), f"tag {tag!r} cannot prefix task ids; skipped"))
        else:
            found.append((tag, context["tasks"]))
    return found


def _entries(doc: LocatedJSON, tag: str, tasks: list[Any], path: str, warnings: list[ImportWarning],
             taken: set[str]) -> dict[str, _Entry]:
    """Every task and subtask of one tag by its local id, in file order. A second one with a taken
    id is imported as `3-2` (`3.1-2` for a subtask), never dropped; the first keeps the id, so
    dependencies name it. What cannot be a task is skipped with a located warning."""
    entries: dict[str, _Entry] = {}
    prefix = "" if tag == MASTER else f"{tag}."
    tag_line = doc.line_of(next((c for c in _children(doc.data) if c.get("tasks") is tasks), None)) or 1

    def add(obj: Any, parent: _Entry | None) -> _Entry | None:
        line = doc.line_of(obj) or (parent.line if parent else tag_line)
        kind = "subtask" if parent else "task"
        subtasks = obj.get("subtasks") if isinstance(obj, dict) else None
        also = f" with its {len(subtasks)} subtask(s)" if isinstance(subtasks, list) and subtasks else ""
        if not isinstance(obj, dict):
            warnings.append(ImportWarning(path, line, f"a {kind} that is not an object; skipped"))
            return None
        written = _local_id(obj.get("id"))
        if written is None:
            warnings.append(ImportWarning(path, line, f"{kind} id {obj.get('id')!r} is not a task id; skipped{also}"))
            return None
        own = written
        if parent is not None:
            own = (parent.local + own[len(parent.written):] if own.startswith(f"{parent.written}.")
                   else f"{parent.local}.{own}")
            written = parent.written + own[len(parent.local):]
        local = own
        for n in range(2, len(entries) + 3):
            if local not in entries and prefix + local not in taken:
                break
            local = f"{own}-{n}"
        entry = _Entry(local, prefix + local, obj, line, parent, written=written)
        if local != own:
            first = entries.get(own)
            where = f" (first on line {first.line})" if first is not None and first.line else ""
            warnings.append(ImportWarning(path, line, f"{kind} {prefix + own} appears twice{where}; "
                                                      f"imported this one as {entry.task_id}"))
        entries[local] = entry
        taken.add(entry.task_id)
        if parent is not None and local == own:
            parent.children[own[len(parent.local) + 1:]] = own
        return entry

    for task in tasks:
        entry = add(task, None)
        if entry is None:
            continue
        subtasks = entry.obj.get("subtasks") or []
        if not isinstance(subtasks, list):
            warnings.append(ImportWarning(path, entry.line, f"task {entry.task_id}: subtasks is not a list; skipped"))
            continue
        for sub in subtasks:
            add(sub, entry)
    return entries


def _draft(entry: _Entry, tag: str, entries: dict[str, _Entry], path: str, warnings: list[ImportWarning]) -> TaskDraft:
    obj = entry.obj
    title = _text(obj.get("title")) or _text(obj.get("description")) or entry.task_id
    status = _status(obj.get("status"), entry, path, warnings)
    criteria = _criteria(obj) or [title]
    metadata: dict[str, Any] = {"source": {"path": path, "id": entry.written or entry.local}, "tag": tag}
    priority = _priority(obj.get("priority"), entry, path, warnings)
    if priority is not None:
        metadata["priority"] = priority
    if entry.parent is not None:
        metadata["parent"] = entry.parent.task_id
    if _text(obj.get("assignee")):
        metadata["assignee"] = [_text(obj.get("assignee"))]
    extra = {str(k): v for k, v in obj.items() if k not in _MAPPED}  # what no field took, as written
    if "acceptanceCriteria" in obj and _criteria({"acceptanceCriteria": obj["acceptanceCriteria"]}):
        extra.pop("acceptanceCriteria", None)
    elif "testStrategy" in obj:
        extra.pop("testStrategy", None)
    if _text(obj.get("status")) and _text(obj.get("status")).casefold() not in EXACT_STATUSES:
        extra["status"] = _text(obj.get("status"))  # the mapping lost something: keep the fact
    if extra:
        metadata["taskmaster"] = extra
    return TaskDraft(
        task_id=entry.task_id,
        title=title,
        requirements=_requirements(obj, title),
        criteria=criteria,
        checked=[status == "complete"] * len(criteria),
        status=status,
        dependencies=_dependencies(entry, entries, path, warnings),
        metadata=metadata,
        line=entry.line,
    )


def _dependencies(entry: _Entry, entries: dict[str, _Entry], path: str, warnings: list[ImportWarning]) -> list[str]:
    """Taskmaster ids (ints, strings, dotted `"3.1"`) as task ids of the same tag. In a subtask a plain
    id means a sibling (`1` in task 4's subtask is `4.1`), else a top-level task."""
    raw = entry.obj.get("dependencies") or []
    if not isinstance(raw, list):
        raw = [raw]
    found: list[str] = []
    for dep in raw:
        local = _local_id(dep)
        target = None
        if local is not None and entry.parent is not None and local in entry.parent.children:
            target = entries.get(entry.parent.children[local])
        if target is None and local is not None:
            target = entries.get(local)
        if target is None:
            warnings.append(ImportWarning(
                path, entry.line, f"task {entry.task_id}: dependency {dep!r} is not a task of this tag; left out"))
        elif target is entry:
            warnings.append(ImportWarning(path, entry.line, f"task {entry.task_id} depends on itself; left out"))
        elif target.task_id not in found:
            found.append(target.task_id)
    return found


def _status(raw: Any, entry: _Entry, path: str, warnings: list[ImportWarning]) -> str:
    written = _text(raw)
    if not written:
        return "pending"  # Taskmaster's default
    mapped = STATUSES.get(written.casefold())
    if mapped is None:
        known = "" if written.casefold() in NO_EQUIVALENT else " not known to Taskmaster and"
        warnings.append(ImportWarning(
            path, entry.line, f"task {entry.task_id}: status {written!r}{known} has no equivalent; imported as blocked"))
        return "blocked"
    return mapped


def _priority(raw: Any, entry: _Entry, path: str, warnings: list[ImportWarning]) -> int | None:
    """high/medium/low -> 1/3/5 (specflux: 1 is the highest); a number 1-5 is kept."""
    if raw is None or raw == "":
        return None
    written = _text(raw).casefold()
    if written in PRIORITIES:
        return PRIORITIES[written]
    if written.isdigit() and 1 <= int(written) <= 5 and not isinstance(raw, bool):
        return int(written)
    warnings.append(ImportWarning(path, entry.line, f"task {entry.task_id}: priority {raw!r} not understood; left out"))
    return None


def _criteria(obj: dict[str, Any]) -> list[str]:
    for key in ("acceptanceCriteria", "testStrategy"):
        value = obj.get(key)
        items = [c for c in (_text(v) for v in value) if c] if isinstance(value, list) else split_criteria(_text(value))
        if items:
            return items
    return []


def split_criteria(text: str) -> list[str]:
    """One criterion per line (list markers dropped), or per sentence when the text is one paragraph."""
    lines = [_unmarked(line) for line in text.split("\n")]
    lines = [line for line in lines if line]
    if len(lines) != 1:
        return lines
    sentences: list[str] = []
    for part in _SENTENCE_END.split(lines[0]):
        if sentences and _ABBREVIATION.search(sentences[-1]):
            sentences[-1] += " " + part
        else:
            sentences.append(part)
    return [s.strip() for s in sentences if s.strip()]


def _unmarked(line: str) -> str:
    """`line` without its own list marker (`- `, `1. `, `• `, `[x] `) at its start; nothing in its
    middle changes (`Python 3.12+ is active`, `cargo run -- --help` stay as written)."""
    m = _MARKER.match(line)
    return (line[m.end():] if m else line).strip()


def _requirements(obj: dict[str, Any], title: str) -> str:
    """The description, then the implementation details, as Taskmaster shows them."""
    parts = [_text(obj.get("description")), _text(obj.get("details"))]
    return "\n\n".join(part for part in parts if part and part != title)


def _local_id(raw: Any) -> str | None:
    """`3`, `"3"`, `"3.1"`, `3.1` (a JSON number), `"rust-core"` -> a local id; bools and nulls are not ids."""
    if raw is None or isinstance(raw, bool) or isinstance(raw, (dict, list)):
        return None
    if isinstance(raw, float):
        raw = int(raw) if raw.is_integer() else repr(raw)
    return to_task_id(str(raw))


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()
