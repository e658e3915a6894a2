"""Long-running harness: a `feature_list.json` (and its `claude-progress.txt`) -> task drafts.

The harness (Anthropic's "effective harnesses for long-running agents") keeps the features to build in
`feature_list.json`, each with `passes` flipped to true once verified, and a free-text handoff log in
`claude-progress.txt`. Two shapes are in use: a top-level array of
`{category, description, steps[], passes}`, and an object `{version, features: [...], ...}` whose
features carry an `id` and whatever keys the agent found useful (`verified_via`, `status_code`...).

Ids: a feature's own `id` where it is a valid task id, else `F1`, `F2`... by its place in the list
(1-based), so the same file always gives the same ids. Steps are the criteria ("Step 3:" prefixes
dropped); a feature without steps gets its description as its one criterion. A passing feature is
complete with every criterion checked. Keys the harness does not define are kept under
`metadata["harness"]`. The progress log is prose for humans and agents, not tasks: drafts only point
at it (`metadata["progress"]`), nothing is copied from it.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from specflux.importers.drafts import ImportResult, ImportWarning, TaskDraft, to_task_id
from specflux.importers.taskmaster import LocatedJSON, read_json

FORMAT = "harness"
PROGRESS_FILE = "claude-progress.txt"
KNOWN_KEYS = ("id", "category", "description", "steps", "passes", "title", "name")
TITLE_LENGTH = 100  # a longer description is cut at a word for the title; requirements keep all of it

# a feature list without `passes` may say `"state": "passing"` (or `"status"`) instead
STATE_KEYS = ("state", "status")
PASSING = ("passing", "passed", "pass", "done", "complete", "completed", "verified", "implemented")
STATES = {**{w: "complete" for w in PASSING},
          **{w: "pending" for w in ("failing", "failed", "fail", "pending", "todo", "to do", "not started", "open", "new")},
          "in progress": "in_progress", "wip": "in_progress", "blocked": "blocked", "review": "review"}

_STEP_PREFIX = re.compile(r"^\s*step\s*\d+\s*[:.)\-–]\s*", re.IGNORECASE)  # at the start only


def parse(text: str, path: str, progress_text: str | None = None) -> ImportResult:
    """Drafts for every feature of a harness `feature_list.json`. Pass `progress_text` when a
    `claude-progress.txt` sits beside it: the drafts then name it in `metadata["progress"]`."""
    result = ImportResult(FORMAT)
    doc = read_json(text, path, result.warnings)
    if doc is None:
        return result
    features = _features(doc, path, result.warnings)
    progress = None
    if progress_text is not None:
        progress = posixpath.join(posixpath.dirname(path.replace("\\", "/")), PROGRESS_FILE)
    taken: set[str] = set()
    for index, feature in enumerate(features):
        draft = _draft(doc, feature, index, path, result.warnings)
        if draft is None:
            continue
        if draft.task_id.casefold() in taken:
            result.warnings.append(
                ImportWarning(path, draft.line, f"feature id {draft.task_id} appears twice; kept the first"))
            continue
        taken.add(draft.task_id.casefold())
        if progress is not None:
            draft.metadata["progress"] = progress
        result.drafts.append(draft)
    return result


def _features(doc: LocatedJSON, path: str, warnings: list[ImportWarning]) -> list[Any]:
    """The feature list of either shape: the top-level array, or the object's `features`."""
    data = doc.data
    features = data if isinstance(data, list) else data.get("features") if isinstance(data, dict) else None
    if features == []:
        where = re.search(r'"features"\s*:', doc.text) if isinstance(data, dict) else None
        line = doc.text.count("\n", 0, where.start()) + 1 if where else 1
        warnings.append(ImportWarning(path, line, "the feature list is empty: no tasks to import"))
    if isinstance(features, list):
        return features
    warnings.append(ImportWarning(path, 1, 'no features: expected a JSON array or an object with a "features" array'))
    return []


def _draft(doc: LocatedJSON, feature: Any, index: int, path: str, warnings: list[ImportWarning]) -> TaskDraft | None:
    line = doc.line_of(feature)
    if not isinstance(feature, dict):
        warnings.append(ImportWarning(path, line, f"feature {index + 1} is not an object; skipped"))
        return None
    own_id = _text(feature.get("id"))
    task_id = to_task_id(own_id) if own_id else None
    if own_id and task_id is None:
        warnings.append(ImportWarning(path, line, f"feature id {own_id!r} is not a task id; imported as F{index + 1}"))
    task_id = task_id or f"F{index + 1}"

    description = _text(feature.get("description"))
    title = _text(feature.get("title")) or _text(feature.get("name")) or _short(description) or task_id
    criteria = _steps(feature.get("steps")) or [description or title]
    metadata: dict[str, Any] = {"source": {"path": path, "id": own_id if task_id == own_id else index}}
    dialect = next((k for k in STATE_KEYS if "passes" not in feature and isinstance(feature.get(k), str)), None)
    if dialect is None:
        passes = _passes(feature.get("passes"), task_id, line, path, warnings)
        status = "complete" if passes else "pending"
    else:  # `"state": "passing"`: write-back sets this key
        status = _state(feature[dialect], dialect, task_id, line, path, warnings)
        passes = status == "complete"
        metadata["source"]["field"] = dialect
    if _text(feature.get("category")):
        metadata["category"] = _text(feature.get("category"))
    extra = {str(k): v for k, v in feature.items() if k not in KNOWN_KEYS and k != dialect}
    if extra:
        metadata["harness"] = extra
    return TaskDraft(
        task_id=task_id,
        title=title,
        requirements=description,
        criteria=criteria,
        checked=[passes] * len(criteria),
        status=status,
        metadata=metadata,
        line=line,
    )


def _steps(raw: Any) -> list[str]:
    """The steps as criteria, without their "Step N:" prefixes (the order says it already)."""
    items = raw if isinstance(raw, list) else [raw] if raw else []
    steps = [_STEP_PREFIX.sub("", _text(item), count=1).strip() for item in items]
    return [step for step in steps if step]


def _state(raw: str, key: str, task_id: str, line: int | None, path: str, warnings: list[ImportWarning]) -> str:
    """A feature's `state` (or `status`) in the dialects seen in the wild; one with no equivalent is
    blocked, never ready work, with a warning naming it."""
    written = " ".join(raw.replace("_", " ").replace("-", " ").split()).casefold()
    if written in STATES:
        return STATES[written]
    warnings.append(ImportWarning(
        path, line, f"feature {task_id}: {key} {raw!r} has no equivalent; imported as blocked"))
    return "blocked"


def _passes(raw: Any, task_id: str, line: int | None, path: str, warnings: list[ImportWarning]) -> bool:
    """`passes` is a JSON boolean; a string "true"/"false" is read, anything else is not passing."""
    if isinstance(raw, bool):
        return raw
    if raw is None:
        return False
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    warnings.append(ImportWarning(
        path, line, f"feature {task_id}: passes {raw!r} is not true or false; imported as not passing"))
    return False


def _short(description: str) -> str:
    """A title from the description: its first line, cut at a word when it is long."""
    first = description.split("\n", 1)[0].strip()
    if len(first) <= TITLE_LENGTH:
        return first
    cut = first[:TITLE_LENGTH].rsplit(" ", 1)[0].rstrip(" ,;:")
    return cut + "..."


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()
