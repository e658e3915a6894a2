"""Backlog.md: a `backlog/` folder of task files -> task drafts.

Backlog.md (github.com/MrLesk/Backlog.md) keeps one Markdown file per task: YAML front matter for the
facts (`id`, `title`, `status`, `labels`, `dependencies`, `parent_task_id`, ...) and a body whose
sections it writes between HTML-comment markers (`<!-- SECTION:DESCRIPTION:BEGIN -->`,
`<!-- AC:BEGIN -->`). People also edit these files by hand, so every marker has a plain-Markdown
fallback (`## Description`, `## Acceptance Criteria`) and nothing odd raises: it becomes a located
warning.

Pure: `parse_folder` takes the folder's files as a mapping of relative path -> text; the caller reads
the disk. Files under `tasks/` are open work, files under `completed/` are done; other folders
(`drafts/`, `archive/`, `docs/`, `decisions/`) are not tasks and are skipped.
"""

from __future__ import annotations

import datetime
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import frontmatter
import yaml

from specflux.importers.backlog_body import HEADING as _HEADING
from specflux.importers.backlog_body import Line as _Line
from specflux.importers.backlog_body import read_body
from specflux.importers.backlog_body import scan as _scan
from specflux.importers.drafts import ImportResult, ImportWarning, TaskDraft, to_task_id, verbatim

FORMAT = "backlog"
TASK_FOLDERS = ("tasks", "completed")  # in this order: a duplicate id keeps the open task's file
STATUSES = {"to do": "pending", "in progress": "in_progress", "done": "complete",
            "review": "review", "in review": "review", "blocked": "blocked"}
CONFIG = "config.yml"  # the project's settings, beside tasks/: its `statuses` are the board's columns
PRIORITIES = {"high": 1, "medium": 3, "low": 5}
# Front-matter keys this module turns into draft fields; every other key is kept under metadata["backlog"].
CONSUMED = ("id", "title", "status", "labels", "priority", "dependencies", "parent_task_id", "parent", "assignee")

_FM_DELIMITER = re.compile(r"-{3,}\s*")  # python-frontmatter's boundary, so both agree on where the body starts
_FILENAME_ID = re.compile(r"([A-Za-z][A-Za-z0-9_]*-\d+(?:\.\d+)*)(?:\s+-\s+(.*))?\.md", re.IGNORECASE)


@dataclass
class _Task:
    """One file read, before ids across the folder are known (dependencies are still as written)."""

    draft: TaskDraft
    path: str
    id_line: int | None
    dependencies: list[tuple[str, int | None]] = field(default_factory=list)
    parent: str | None = None


def parse_folder(files: Mapping[str, str], base: str = "") -> ImportResult:
    """Drafts for every task file of a `backlog/` folder.

    `files` maps paths relative to the folder (`tasks/back-200 - Title.md`, `completed/task-3 - x.md`)
    to their texts. `base` (e.g. `backlog`) is put in front of those paths in warnings and in
    `metadata["source"]`, so they read as paths of the project. Files are read in a natural order
    of their paths, `tasks/` before `completed/`, so the result does not depend on the mapping's order.
    """
    chosen = sorted((p for p in files if _folder(p) is not None), key=lambda p: (_folder(p), _natural(p)))
    warnings: list[ImportWarning] = []
    declared = _declared_statuses(files.get(CONFIG), _join(base, CONFIG), warnings)
    result = _parse([(_join(base, p), files[p], _folder(p) == 1) for p in chosen], declared)
    result.warnings[:0] = warnings
    return result


def _declared_statuses(text: str | None, path: str, warnings: list[ImportWarning]) -> list[str] | None:
    """The `statuses` a project's `config.yml` declares (`[To Do, In Progress, Done, Wontfix]`), or
    None without one."""
    if text is None:
        return None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        warnings.append(ImportWarning(path, mark.line + 1 if mark is not None else None,
                                      f"not valid YAML ({_first_line(error)}); its statuses are not read"))
        return None
    statuses = config.get("statuses") if isinstance(config, dict) else None
    return _string_list(statuses) if statuses is not None else None


def parse_file(text: str, path: str) -> ImportResult:
    """Drafts for one Backlog.md task file (its dependencies can only resolve to itself, so they are
    reported as unknown: import the folder to keep them). A file under `completed/` is complete."""
    return _parse([(path, text, "completed" in path.replace("\\", "/").split("/")[:-1])])


def _parse(files: list[tuple[str, str, bool]], declared: list[str] | None = None) -> ImportResult:
    result = ImportResult(FORMAT)
    tasks = [task for path, text, completed in files
             if (task := _read(text, path, completed, result.warnings, declared)) is not None]
    _unique(tasks, result.warnings)
    order = {path: n for n, (path, _, _) in enumerate(files)}
    result.warnings.sort(key=lambda w: order[w.path])  # file by file, as they were read
    _resolve(tasks, result.warnings)
    result.drafts = [task.draft for task in tasks]
    return result


def _unique(tasks: list[_Task], warnings: list[ImportWarning]) -> None:
    """A second file with a taken id (it happens after merges: `task-56 - A.md` and `task-56 -
    B.md`) is imported as `task-56-2`, never dropped; ids match case-insensitively, as Backlog's
    do. The files are in a fixed order, so importing again gives the same ids."""
    taken = {task.draft.task_id.casefold() for task in tasks}
    first: dict[str, _Task] = {}
    for task in tasks:
        written = task.draft.task_id
        if written.casefold() not in first:
            first[written.casefold()] = task
            continue
        kept = first[written.casefold()]
        base = kept.draft.task_id  # `TASK-7` beside `task-7` is `task-7-2`
        new = next(f"{base}-{n}" for n in range(2, len(tasks) + 2) if f"{base}-{n}".casefold() not in taken)
        taken.add(new.casefold())
        task.draft.task_id = new
        warnings.append(ImportWarning(
            task.path, task.id_line, f"id {written} is also the id of {kept.path}; this file is imported as {new}"))


# --- one file ---------------------------------------------------------------------------------------

def _read(text: str, path: str, completed: bool, warnings: list[ImportWarning],
          declared: list[str] | None) -> _Task | None:
    text = text.lstrip("\ufeff")
    lines = _lines(text)
    fm_start, body_start = _front_matter_span(lines)
    try:
        meta, _ = frontmatter.parse(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = fm_start + 1 + mark.line if mark is not None and fm_start is not None else None
        warnings.append(ImportWarning(path, line, f"front matter is not valid YAML ({_first_line(error)}); file skipped"))
        return None
    fm_lines = [] if fm_start is None else [_Line(i + 1, lines[i], False) for i in range(fm_start + 1, body_start - 1)]
    body = _scan(lines[body_start:], first_number=body_start + 1)

    task_id, id_line = _task_id(meta, path, fm_lines)
    if task_id is None:
        warnings.append(ImportWarning(path, id_line, "no usable task id (front matter `id:` or file name); file skipped"))
        return None
    title = _text(meta.get("title")) or _title_from_filename(path) or task_id
    status = _status(meta.get("status"), completed, path, fm_lines, warnings, declared)
    read = read_body(body)
    criteria, checked = read.criteria, read.checked
    if not criteria:  # every task gets at least one criterion to check its work against
        criteria, checked = [title], [status == "complete"]
    _report_heading_subtasks(body, task_id, path, warnings)
    requirements = "\n\n".join(part for part in (read.description, verbatim(path, read.kept)) if part)
    draft = TaskDraft(task_id=task_id, title=title, requirements=requirements, criteria=criteria,
                      checked=checked, status=status, metadata=_metadata(meta, task_id, path, fm_lines, warnings),
                      line=1, kept=sum(1 for line in read.kept if line.text.strip()))
    deps = [(dep, _value_line(fm_lines, "dependencies", dep)) for dep in _string_list(meta.get("dependencies"))]
    parent = _text(meta.get("parent_task_id")) or _text(meta.get("parent")) or _implied_parent(task_id)
    return _Task(draft, path, id_line, deps, parent)


def _metadata(meta: dict[str, Any], task_id: str, path: str, fm_lines: list[_Line],
              warnings: list[ImportWarning]) -> dict[str, Any]:
    """source, labels, priority, assignee; the other front-matter keys (dates, custom keys, a custom
    status) under "backlog", so nothing the file said is lost."""
    metadata: dict[str, Any] = {"source": {"path": path, "id": _text(meta.get("id")) or task_id}}
    labels = _string_list(meta.get("labels"))
    if labels:
        metadata["labels"] = labels
    priority = _priority(meta.get("priority"), path, fm_lines, warnings)
    if priority is not None:
        metadata["priority"] = priority
    assignee = _string_list(meta.get("assignee"))
    if assignee:
        metadata["assignee"] = assignee
    extra = {str(k): _plain(v) for k, v in meta.items() if k not in CONSUMED}
    if _text(meta.get("status")) and _status_of(meta.get("status")) is None:
        extra["status"] = _text(meta.get("status"))
    if extra:
        metadata["backlog"] = extra
    return metadata


def _task_id(meta: dict[str, Any], path: str, fm_lines: list[_Line]) -> tuple[str | None, int | None]:
    """The id as written in `id:` (`BACK-200`, `task-196.1`), else the one that starts the file name."""
    line = _key_line(fm_lines, "id")
    written = _text(meta.get("id"))
    if written:
        return to_task_id(written), line
    match = _FILENAME_ID.fullmatch(posixpath.basename(path.replace("\\", "/")))
    return (match.group(1) if match else None), line


def _status(raw: Any, completed: bool, path: str, fm_lines: list[_Line], warnings: list[ImportWarning],
            declared: list[str] | None = None) -> str:
    """Backlog's default statuses (and Review, Blocked) map; a file in `completed/` is complete
    whatever it says. Any other status (`Wontfix`, `QA`, declared in config.yml or not) has no
    equivalent: it is blocked, never ready work, and the warning names it."""
    if completed:
        return "complete"
    written = _text(raw)
    if not written:
        return "pending"  # Backlog.md's own default status
    mapped = _status_of(raw)
    if mapped is None:
        said = ""
        if declared is not None:
            known = {" ".join(d.split()).casefold() for d in declared}
            said = (f" (declared in {CONFIG})" if " ".join(written.split()).casefold() in known
                    else f" (not one of the statuses {CONFIG} declares)")
        warnings.append(ImportWarning(path, _key_line(fm_lines, "status"),
                                      f"status {written!r}{said} has no equivalent; imported as blocked"))
        return "blocked"
    return mapped


def _status_of(raw: Any) -> str | None:
    return STATUSES.get(" ".join(_text(raw).split()).casefold())


def _priority(raw: Any, path: str, fm_lines: list[_Line], warnings: list[ImportWarning]) -> int | None:
    """high/medium/low -> 1/3/5 (specflux: 1 is the highest); a number 1-5 is kept as written."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= 5:
        return raw
    written = _text(raw).casefold()
    if written in PRIORITIES:
        return PRIORITIES[written]
    if written.isdigit() and 1 <= int(written) <= 5:
        return int(written)
    warnings.append(ImportWarning(
        path, _key_line(fm_lines, "priority"), f"priority {_text(raw)!r} not understood; left out"))
    return None


def _report_heading_subtasks(body: list[_Line], task_id: str, path: str, warnings: list[ImportWarning]) -> None:
    """Backlog.md keeps a sub-task in its own file; a hand-edited file may list them as headings
    (`### task-152.1: ...`). Those are not imported, and the user should know."""
    own = re.compile(rf"(?<![\w.-]){re.escape(task_id)}\.\d+", re.IGNORECASE)
    found = [(line.number, own.search(line.text).group(0)) for line in body
             if not line.fenced and _HEADING.fullmatch(line.text) and own.search(line.text)]
    if found:
        names = found[0][1] if len(found) == 1 else f"{found[0][1]} ... {found[-1][1]}"
        warnings.append(ImportWarning(
            path, found[0][0],
            f"{len(found)} sub-task(s) written as headings ({names}) not imported; "
            "Backlog.md keeps each sub-task in its own file"))


# --- across the folder ------------------------------------------------------------------------------

def _resolve(tasks: list[_Task], warnings: list[ImportWarning]) -> None:
    """Dependencies and parents as the imported ids, matched case-insensitively (Backlog writes
    `id: BACK-200` but `dependencies: [back-200]`). A project whose prefix changed (`task-355.01`
    for `BACK-355.01`) still resolves when exactly one imported id has the same number."""
    exact = {task.draft.task_id.casefold(): task.draft.task_id for task in tasks}
    by_number: dict[str, list[str]] = {}
    for task in tasks:
        by_number.setdefault(_number(task.draft.task_id), []).append(task.draft.task_id)

    def find(raw: str) -> str | None:
        candidate = to_task_id(raw)
        if candidate is None:
            return None
        if candidate.casefold() in exact:
            return exact[candidate.casefold()]
        same_number = by_number.get(_number(candidate), [])
        return same_number[0] if len(same_number) == 1 and "-" in candidate else None

    for task in tasks:
        draft = task.draft
        for raw, line in task.dependencies:
            found = find(raw)
            if found is None:
                warnings.append(ImportWarning(task.path, line, f"dependency {raw!r} is not an imported task; left out"))
            elif found == draft.task_id:
                warnings.append(ImportWarning(task.path, line, f"task depends on itself ({raw!r}); left out"))
            elif found not in draft.dependencies:
                draft.dependencies.append(found)
        if task.parent:
            draft.metadata["parent"] = find(task.parent) or to_task_id(task.parent) or task.parent


def _number(task_id: str) -> str:
    """`BACK-355.01` -> `355.01`: the part after the prefix, which a prefix change leaves alone."""
    return task_id.split("-", 1)[1].casefold() if "-" in task_id else task_id.casefold()


def _implied_parent(task_id: str) -> str | None:
    """`task-196.1` is a sub-task of `task-196` even where `parent_task_id` is not written."""
    return task_id.rsplit(".", 1)[0] if "." in _number(task_id) else None


# --- lines, sections, markers -----------------------------------------------------------------------

def _lines(text: str) -> list[str]:
    """Lines without their endings; split on \\n only (str.splitlines also splits on U+2028 etc.)."""
    return [line.rstrip("\r") for line in text.split("\n")]


def _front_matter_span(lines: list[str]) -> tuple[int | None, int]:
    """(index of the opening `---`, index of the first body line); (None, 0) without front matter.
    Leading blank lines are allowed, as python-frontmatter strips them too."""
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None or not _FM_DELIMITER.fullmatch(lines[start]):
        return None, 0
    end = next((i for i in range(start + 1, len(lines)) if _FM_DELIMITER.fullmatch(lines[i])), None)
    return (start, end + 1) if end is not None else (None, 0)


def _key_line(fm_lines: list[_Line], key: str) -> int | None:
    for line in fm_lines:
        if re.match(rf"{re.escape(key)}\s*:", line.text):
            return line.number
    return None


def _value_line(fm_lines: list[_Line], key: str, value: str) -> int | None:
    """The line of one item of a front-matter list (`  - task-208` or `[task-24.1, task-208]`)."""
    start = _key_line(fm_lines, key)
    if start is None:
        return None
    for line in fm_lines:
        if line.number < start:
            continue
        if line.number > start and re.match(r"\S", line.text):  # the next key: the list is over
            break
        if re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w.-])", line.text):
            return line.number
    return start


# --- values -----------------------------------------------------------------------------------------

def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return str(value).strip()


def _string_list(value: Any) -> list[str]:
    """A YAML list (block or flow style), a single value, or a comma-separated string, as strings."""
    if value is None or value == "":
        return []
    items = value if isinstance(value, list) else str(value).split(",") if isinstance(value, str) else [value]
    return [text for text in (_text(item) for item in items) if text]


def _plain(value: Any) -> Any:
    """A front-matter value that JSON and YAML writers both take (dates become ISO strings)."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _title_from_filename(path: str) -> str:
    match = _FILENAME_ID.fullmatch(posixpath.basename(path.replace("\\", "/")))
    return match.group(2).replace("-", " ").strip() if match and match.group(2) else ""


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _folder(path: str) -> int | None:
    """0 for `tasks/...`, 1 for `completed/...`, None for anything that is not a task file."""
    parts = path.replace("\\", "/").split("/")
    if len(parts) < 2 or not parts[-1].lower().endswith(".md"):
        return None
    return TASK_FOLDERS.index(parts[0]) if parts[0] in TASK_FOLDERS else None


def _natural(path: str) -> list[tuple[int, Any]]:
    """`task-2` before `task-10`."""
    return [(0, int(part)) if part.isdigit() else (1, part.casefold()) for part in re.split(r"(\d+)", path)]


def _join(base: str, path: str) -> str:
    return posixpath.join(base, path) if base else path
