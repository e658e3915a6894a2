"""From a source on disk to task files: detect its format, read it, parse it (the importers are
pure), and create the tasks through the TaskStateManager.

Importing the same source again changes nothing: a task whose file exists is left as it is (and
counted as such). The source's facts go into each task's metadata (`source`, `phase`, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from specflux.base.errors import NotFoundError, UsageError
from specflux.base.files import read_text
from specflux.importers.drafts import ImportResult, ImportWarning, TaskDraft

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager

FORMATS = ("spec-kit", "backlog", "taskmaster", "harness")


@dataclass
class Imported:
    format: str
    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    warnings: list[ImportWarning] = field(default_factory=list)
    drafts: list[TaskDraft] = field(default_factory=list)
    kept: int = 0  # lines of the source no field took, kept verbatim in the tasks created

    def summary(self) -> str:
        """The import's last line: what it did, in numbers."""
        return (f"{len(self.created)} task(s) created, {len(self.existing)} already there, "
                f"{len(self.warnings)} warning(s), {self.kept} line(s) kept verbatim")


def detect(path: Path) -> str:
    """The format of `path`, from its name and (for JSON) its shape."""
    if path.is_dir():
        if (path / "tasks").is_dir() or (path / "completed").is_dir() or path.name == "backlog":
            return "backlog"
        if (path / "backlog").is_dir():
            return "backlog"
        raise UsageError(f"{path}: a folder, but not a Backlog.md folder (no tasks/ in it); give --format")
    name = path.name.lower()
    if name.endswith(".json"):
        if "feature" in name:
            return "harness"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise UsageError(f"{path}: cannot read it as JSON ({e}); give --format") from None
        if isinstance(data, list) or (isinstance(data, dict) and "features" in data):
            return "harness"
        return "taskmaster"
    if name.endswith(".md"):
        return "spec-kit"
    raise UsageError(f"{path}: cannot tell its format from its name; give --format ({', '.join(FORMATS)})")


def read_source(path: Path, fmt: str | None, shown_as: str) -> ImportResult:
    """Parse the source at `path` (shown to the user as `shown_as`)."""
    if not path.exists():
        raise NotFoundError(f"no such file or folder: {shown_as}")
    fmt = fmt or detect(path)
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r} (one of: {', '.join(FORMATS)})")
    if fmt == "backlog":
        from specflux.importers.backlog import parse_folder

        root = path / "backlog" if (path / "backlog").is_dir() and not (path / "tasks").is_dir() else path
        files = {p.relative_to(root).as_posix(): read_text(p, _join(shown_as, p.relative_to(root).as_posix()))
                 for p in sorted(root.rglob("*.md")) if p.is_file()}
        if (root / "config.yml").is_file():  # the statuses the project declares
            files["config.yml"] = read_text(root / "config.yml", _join(shown_as, "config.yml"))
        base = shown_as if root == path else _join(shown_as, "backlog")
        return parse_folder(files, base=base)
    text = read_text(path, shown_as)
    if fmt == "spec-kit":
        from specflux.importers.speckit import parse

        return parse(text, shown_as)
    if fmt == "taskmaster":
        from specflux.importers.taskmaster import parse

        return parse(text, shown_as)
    from specflux.importers.harness import parse

    progress = path.with_name("claude-progress.txt")
    return parse(text, shown_as, progress.read_text(encoding="utf-8", errors="replace") if progress.is_file() else None)


def _join(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def apply(manager: "TaskStateManager", result: ImportResult, dry_run: bool = False) -> Imported:
    """Create a task file per draft that does not exist yet (dependencies first)."""
    out = Imported(result.format, warnings=list(dict.fromkeys(result.warnings)), drafts=result.drafts)  # each once
    for draft in result.drafts:  # write-back needs to know what the source is
        source = draft.metadata.get("source")
        if isinstance(source, dict):
            source.setdefault("format", result.format)
    known = {d.task_id for d in result.drafts}
    for draft in _dependencies_first(result.drafts):
        if manager.path(draft.task_id).exists():
            out.existing.append(draft.task_id)
            continue
        out.kept += draft.kept
        if dry_run:
            out.created.append(draft.task_id)
            continue
        deps = [d for d in draft.dependencies if d in known or manager.path(d).is_file()]
        manager.create(
            draft.title,
            task_id=draft.task_id,
            dependencies=deps,
            requirements=draft.requirements,
            criteria=draft.criteria or [draft.title],
            status=draft.status,
            checked=draft.checked,
            extra=draft.metadata,
        )
        out.created.append(draft.task_id)
    return out


def _dependencies_first(drafts: list[TaskDraft]) -> list[TaskDraft]:
    """Drafts with each one's dependencies before it where possible, else in source order (a
    depth-first walk with its own stack: a source's chain may be thousands of tasks long)."""
    by_id = {d.task_id: d for d in drafts}
    done: set[str] = set()
    order: list[TaskDraft] = []
    for first in drafts:
        if first.task_id in done:
            continue
        on_path = {first.task_id}
        stack = [(first, iter(first.dependencies))]
        while stack:
            draft, deps = stack[-1]
            dep = next((d for d in deps if d in by_id and d not in done and d not in on_path), None)
            if dep is not None:
                on_path.add(dep)
                stack.append((by_id[dep], iter(by_id[dep].dependencies)))
                continue
            stack.pop()
            on_path.discard(draft.task_id)
            done.add(draft.task_id)
            order.append(draft)
    return order
