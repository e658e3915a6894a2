"""Acceptance criteria: the task-list items (`- [ ]`, `- [x]`) under `### Acceptance Criteria`, found
by the offset of their box character, so that ticking one rewrites that single character.
"""

from __future__ import annotations

import re

from specflux.format.outline import Outline
from specflux.format.regions import Region

# Matched from the line break before the line (see outline.py): search from region.body - 1.
_CHECKBOX_BODY = r"([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+\[([ xX])\](?=[ \t\r\n]|\Z)[ \t]*([^\r\n]*)"
_CHECKBOX = re.compile(r"[\n\r]" + _CHECKBOX_BODY)
_CHECKBOX_LF = re.compile(r"\n" + _CHECKBOX_BODY)  # the same for text without a CR: a literal first is 2x faster


def find_criteria(text: str, outline: Outline, region: Region | None) -> list[tuple[int, int, bool, str, int]]:
    """(index, offset of the box character, checked, text, depth) per task-list item of `region`
    (items inside a code fence or a comment are not criteria)."""
    if region is None:
        return []
    out, indents = [], []
    for m in _CHECKBOX.finditer(text, region.body - 1, region.end):
        if outline.in_opaque(m.start() + 1):
            continue
        indent = len(m.group(1).expandtabs(4))
        while indents and indents[-1] >= indent:
            indents.pop()
        out.append((len(out) + 1, m.start(2), m.group(2) != " ", m.group(3).rstrip(), len(indents)))
        indents.append(indent)
    return out


def count_ticked(text: str, outline: Outline, body: int, end: int) -> tuple[int, int]:
    """(ticked, total) of the items between `body` and `end`, the same items `find_criteria`
    finds, without their text or depth (what `list` needs of every file)."""
    done = total = 0
    hidden = any(a < end and b > body for a, b in outline.opaque)  # a fence or comment among them
    boxes = _CHECKBOX if "\r" in text else _CHECKBOX_LF
    for m in boxes.finditer(text, body - 1, end):
        if not (hidden and outline.in_opaque(m.start() + 1)):
            total += 1
            done += m.group(2) != " "
    return done, total


def count_ticked_plain(text: str, body: int, end: int) -> tuple[int, int]:
    """count_ticked for LF text with no code fence or comment between `body` and `end`."""
    done = total = 0
    for m in _CHECKBOX_LF.finditer(text, body - 1, end):
        total += 1
        done += m.group(2) != " "
    return done, total
