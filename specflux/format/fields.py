"""The small conventions inside a section's text: `**Label:**` fields, list items, and a session's
token usage line (`1200 input, 340 output, 900 cache-read, 0 cache-write tokens`).
"""

from __future__ import annotations

import re

from specflux.format.regions import LINE_BREAK

_LABEL = re.compile(r"^[ \t]*\*\*([A-Za-z][A-Za-z ]*?)\s*:?\s*\*\*\s*:?[ \t]*(.*)$")
_BULLET = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(.*)$")
_USAGE_PART = re.compile(r"([\d,]+)\s*(input|output|cache-read|cache-write)")
_USAGE_MODEL = re.compile(r";\s*model\s+(\S+?);?(?:\s|$)")
_USAGE_COST = re.compile(r";\s*\$([\d,]+(?:\.\d+)?)")
USAGE_UNKNOWN = "unknown"  # a session whose agent printed nothing its usage could be read from
_USAGE_KEYS = {"input": "input_tokens", "output": "output_tokens",
               "cache-read": "cache_read_input_tokens", "cache-write": "cache_creation_input_tokens"}


def labelled_fields(body: str) -> dict[str, list[str]]:
    """Lines under `**Label:**` markers, by lower-case label; an inline value is the first line."""
    fields: dict[str, list[str]] = {}
    current = None
    for line in LINE_BREAK.split(body):
        m = _LABEL.match(line)
        if m:
            current = m.group(1).strip().lower()
            fields[current] = [m.group(2)] if m.group(2).strip() else []
        elif current is not None:
            fields[current].append(line)
    return fields


def bullet_items(lines: list[str]) -> list[str]:
    """List items (and a leading inline text) as strings; continuation lines join their item."""
    items: list[str] = []
    for line in lines:
        m = _BULLET.match(line)
        if m:
            items.append(m.group(2).strip())
        elif line.strip():
            if items and line[:1] in " \t":
                items[-1] = f"{items[-1]} {line.strip()}"
            else:
                items.append(line.strip())
    return items


def parse_usage(text: str) -> dict[str, object] | None:
    """`**Usage:** 1200 input, 340 output, 900 cache-read, 0 cache-write tokens; model M; $0.0123`
    as numbers (with `model` and `cost_usd` where given); `unknown` as {"unknown": True}."""
    if text.strip().lower().startswith(USAGE_UNKNOWN):
        return {"unknown": True}
    found: dict[str, object] = {_USAGE_KEYS[k]: int(v.replace(",", "")) for v, k in _USAGE_PART.findall(text)}
    if not found:
        return None
    model, cost = _USAGE_MODEL.search(text), _USAGE_COST.search(text)
    if model:
        found["model"] = model.group(1)
    if cost:
        found["cost_usd"] = float(cost.group(1).replace(",", ""))
    return found


def format_usage(input_tokens: int, output_tokens: int, cache_read: int, cache_write: int = 0,
                 model: str | None = None, cost_usd: float | None = None) -> str:
    """The session's token counts for its progress-log entry (wall-clock time goes in the commit),
    with the model and what it cost where known."""
    line = f"{input_tokens} input, {output_tokens} output, {cache_read} cache-read, {cache_write} cache-write tokens"
    if model:
        line += f"; model {model}"
    if cost_usd is not None:
        line += f"; ${cost_usd:.6f}"
    return line


def plain(lines: list[str]) -> str:
    """Lines as one text: trailing spaces and the blank lines around it dropped."""
    return "\n".join(line.rstrip() for line in lines).strip()
