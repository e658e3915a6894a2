"""A task file's metadata: the ```json block under `## 0. Metadata`, found, read, checked, and
edited in place (a changed value is rewritten where it stands; new keys go last).

`error(message, pos=None, line=None)` is the document's: it makes a ParseError with the file's path.
"""

from __future__ import annotations

import json
import re
from specflux.base.records import record
from json.decoder import scanstring
from typing import Any, Callable

from specflux.base.errors import ParseError
from specflux.format.edits import Edit
from specflux.format.outline import Fence
from specflux.format.regions import Region

STATUSES = ("pending", "in_progress", "review", "complete", "failed", "blocked")
_WS = re.compile(r"[ \t\r\n]*")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # as in file names (CONTRACT section 1)

ErrorAt = Callable[..., ParseError]


@record(frozen=True)
class Member:
    """A top-level key of the metadata object, with the offsets of its key and value."""

    key: str
    value: Any
    key_start: int
    value_start: int
    value_end: int


def find_fence(region: Region | None, fences: list[Fence], error: ErrorAt) -> Fence:
    """The first code fence of the Metadata section (`region`), which must be closed."""
    if region is None:
        raise error("no `## 0. Metadata` section with a ```json block", line=1)
    fence = None
    for f in fences:  # the first one in the section (a loop: `list` reads thousands)
        if f.start >= region.body:
            fence = f if f.start < region.end else None
            break
    if fence is None:
        raise error("the Metadata section has no ```json block", region.start)
    if not fence.closed:
        raise error("the metadata ```json block is never closed", fence.start)
    return fence


def read_metadata(text: str, fence: Fence, error: ErrorAt) -> dict[str, Any]:
    """The JSON block, validated enough that every command can rely on it."""
    source = text[fence.body : fence.close]
    try:
        data = json.loads(source)
    except json.JSONDecodeError as e:
        at = fence.body + e.pos  # json counts only LF as a line end: place the error ourselves
        column = at - max(text.rfind("\n", 0, at), text.rfind("\r", 0, at))
        raise error(f"metadata is not valid JSON: {e.msg} (column {column})", at) from None
    except RecursionError:
        raise error("metadata nests too deeply to read (keep it to a few levels)", fence.body) from None
    except ValueError:  # an integer past Python's digit limit (4300 by default)
        long = re.search(r"\d{4000,}", source)
        at = fence.body + (long.start() if long else 0)
        digits = f"a number of {len(long.group())} digits" if long else "a number"
        raise error(f"metadata holds {digits}, too long to read; shorten it or write it as a string", at) from None
    if not isinstance(data, dict):
        raise error("metadata must be a JSON object", fence.body)
    _check(text, fence, data, error)
    return data


def _check(text: str, fence: Fence, data: dict[str, Any], error: ErrorAt) -> None:
    def at(key: str) -> int:
        m = next((m for m in read_members(text, fence) if m.key == key), None)
        return m.key_start if m else fence.start

    if "status" not in data:
        raise error("metadata has no \"status\"", fence.start)
    status = data["status"]
    if status not in STATUSES:
        raise error(f"unknown status {status!r} (expected one of: {', '.join(STATUSES)})", at("status"))
    task_id = data.get("task_id")
    if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, (int, str))):
        raise error("\"task_id\" must be a number or a string", at("task_id"))
    deps = data.get("dependencies", [])
    if not isinstance(deps, list) or any(isinstance(d, bool) or not isinstance(d, (int, str)) for d in deps):
        raise error("\"dependencies\" must be a list of task ids", at("dependencies"))
    bad = [d for d in deps if not _ID.fullmatch(str(d))]
    if bad:
        raise error(f"\"dependencies\" holds {bad[0]!r}, which is not a task id "
                    "(letters, digits, '.', '_' or '-')", at("dependencies"))
    if task_id is not None and str(task_id) in (str(d) for d in deps):
        raise error(f"task {task_id} depends on itself; remove {task_id} from \"dependencies\"", at("dependencies"))
    total = data.get("total_sessions", 0)
    if isinstance(total, bool) or not isinstance(total, int):
        raise error("\"total_sessions\" must be a whole number", at("total_sessions"))


def read_members(text: str, fence: Fence) -> list[Member]:
    """Top-level keys of the metadata object with their offsets in the file."""
    decoder, out = json.JSONDecoder(), []
    i = _WS.match(text, fence.body).end() + 1  # past "{"
    i = _WS.match(text, i).end()
    while i < fence.close and text[i] == '"':
        key, after = scanstring(text, i + 1)
        colon = _WS.match(text, after).end()
        value_start = _WS.match(text, colon + 1).end()
        value, value_end = decoder.raw_decode(text, value_start)
        out.append(Member(key, value, i, value_start, value_end))
        i = _WS.match(text, value_end).end()
        if text[i] == ",":
            i = _WS.match(text, i + 1).end()
    return out


def value_edits(text: str, fence: Fence, members: list[Member], newline: str, updates: dict[str, Any]) -> list[Edit]:
    """Edits that set top-level metadata keys, rewriting only their values; new keys go last."""
    edits = []
    by_key = {m.key: m for m in members}
    new = []
    for key, value in updates.items():
        encoded = json.dumps(value, ensure_ascii=False)
        if key in by_key:
            m = by_key[key]
            if m.value != value or type(m.value) is not type(value):
                edits.append(Edit(m.value_start, m.value_end, encoded))
        else:
            new.append(f"{json.dumps(key)}: {encoded}")
    if new:
        last = members[-1] if members else None
        if last is None:
            brace = text.index("{", fence.body)
            edits.append(Edit(brace + 1, brace + 1, " " + ", ".join(new) + " "))
        elif "\n" in text[fence.body : last.key_start] and text.count("\n", last.value_end, fence.close) > 1:
            line_start = text.rfind("\n", 0, last.key_start) + 1
            indent = text[line_start : last.key_start]
            sep = "," + newline + indent
            edits.append(Edit(last.value_end, last.value_end, sep + sep.join(new)))
        else:
            edits.append(Edit(last.value_end, last.value_end, ", " + ", ".join(new)))
    return edits
