"""Write-back: when a task imported from a spec-kit `tasks.md` or a harness `feature_list.json`
completes, tick it in the source too, changing that one line and nothing else, in the file's own
line endings; the change rides in the same commit as the completion.

Pure functions from the source's text to its new text (or None when the task's line cannot be
found as it was imported: the source was edited since, and a wrong tick would be worse than none),
and the two writers the store finds through the entry-point group `specflux.source_writers`
(pyproject.toml): `tick_spec_kit` and `pass_harness`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping

from specflux.base.crashpoint import crash_point
from specflux.importers.harness import PASSING

_BOX = re.compile(r"\[ \]")


def tick_tasks_md(text: str, line: int, task_id: str) -> str | None:
    """`text` with the checkbox on 1-based `line` ticked, if that line is still the task's."""
    lines = re.split(r"(\r\n|\n|\r)", text)  # lines at even indices, their endings after them
    index = (line - 1) * 2
    if line < 1 or index >= len(lines):
        return None
    current = lines[index]
    if not re.search(rf"(?<![A-Za-z0-9]){re.escape(task_id)}(?![A-Za-z0-9])", current) and task_id not in current:
        return None
    if "[x]" in current or "[X]" in current:
        return text  # already ticked
    m = _BOX.search(current)
    if m is None:
        return None
    lines[index] = current[: m.start()] + "[x]" + current[m.end():]
    return "".join(lines)


def pass_feature(text: str, feature: Any, field: str | None = None) -> str | None:
    """`text` with `"passes": false` of the feature set to true (or, where the list says
    `"state": "failing"` instead, `field` "state", that value set to the word the file uses for
    passing, else "passing"). `feature` is its index in the features list, or its `id`; only the
    characters of that one value change."""
    data = json.loads(text)
    features = data if isinstance(data, list) else data.get("features") if isinstance(data, dict) else None
    if not isinstance(features, list):
        return None
    index = feature if isinstance(feature, int) else next(
        (i for i, f in enumerate(features) if isinstance(f, dict) and str(f.get("id")) == str(feature)), None)
    if index is None or not 0 <= index < len(features):
        return None
    if field:
        return _set_state(text, data, features, index, field)
    if features[index].get("passes") is True:
        return text
    start, end = _span_of_element(text, data, index)
    m = re.search(r'("passes"\s*:\s*)false\b', text[start:end])
    if m is None:
        return None
    at = start + m.start() + len(m.group(1))
    return text[:at] + "true" + text[at + len("false"):]


def _set_state(text: str, data: Any, features: list, index: int, field: str) -> str | None:
    value = features[index].get(field)
    if not isinstance(value, str):
        return None
    if value.strip().casefold() in PASSING:
        return text
    used = [f.get(field) for f in features if isinstance(f, dict) and isinstance(f.get(field), str)]
    word = next((u for u in used if u.strip().casefold() in PASSING), "passing")
    start, end = _span_of_element(text, data, index)
    m = re.search(rf'("{re.escape(field)}"\s*:\s*)("(?:[^"\\]|\\.)*")', text[start:end])
    if m is None or json.loads(m.group(2)) != value:
        return None
    at = start + m.start(2)
    return text[:at] + json.dumps(word, ensure_ascii=False) + text[at + len(m.group(2)):]


def _span_of_element(text: str, data: Any, index: int) -> tuple[int, int]:
    """Character span of element `index` of the features array in `text`."""
    decoder = json.JSONDecoder()
    pos = 0
    if isinstance(data, dict):
        key = re.search(r'"features"\s*:\s*\[', text)
        pos = key.end() if key else 0
    else:
        pos = text.index("[") + 1
    for i in range(index + 1):
        while text[pos] in " \t\r\n,":
            pos += 1
        _, end = decoder.raw_decode(text, pos)
        if i == index:
            return pos, end
        pos = end
    raise ValueError("feature not found")


def tick_spec_kit(source: Mapping[str, Any], task_id: str, read: Callable[[str], str],
                  write: Callable[[str, str], None]) -> str | None:
    """The writer of source format "spec-kit" (a `SourceWriter`, specflux/store/sources.py): tick
    the task's checkbox on its line (metadata `source.line`) of the spec-kit `tasks.md`."""
    line = source.get("line")

    def ticked(text: str) -> str | None:
        return tick_tasks_md(text, line, str(source.get("id") or task_id)) if isinstance(line, int) else None

    return _write_back(source, read, write, ticked)


def pass_harness(source: Mapping[str, Any], task_id: str, read: Callable[[str], str],
                 write: Callable[[str, str], None]) -> str | None:
    """The writer of source format "harness" (a `SourceWriter`, specflux/store/sources.py): set
    `"passes"` of the task's feature (metadata `source.index` or `source.id`) in feature_list.json."""

    def passed(text: str) -> str | None:
        try:
            return pass_feature(text, source.get("index", source.get("id")), source.get("field"))
        except (ValueError, KeyError, IndexError):
            return None

    return _write_back(source, read, write, passed)


def _write_back(source: Mapping[str, Any], read: Callable[[str], str], write: Callable[[str, str], None],
                tick: Callable[[str], str | None]) -> str | None:
    """Tick the task in its source (metadata `source`) through `read(path) -> text` and
    `write(path, text)`; returns the source's path when it changed.

    Idempotent: a source already ticked is written as it is (no byte changes; the caller's
    commit takes it along), which is what a completion resumed after a kill between its write
    and its commit needs: the tick on disk, uncommitted, lands in the completion's commit."""
    path = source.get("path")
    if not path:
        return None
    try:
        text = read(path)
    except (OSError, ValueError):
        return None
    new = tick(text)
    if new is None:
        return None
    if new == text:  # ticked already: by this completion before a kill cut it short of its commit
        write(path, text)  # (or by hand): handed on unchanged, so that the completion's commit has it
        return None
    crash_point("writeback:before-write")
    write(path, new)
    return path
