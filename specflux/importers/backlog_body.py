"""Backlog.md: a task file's body, read into the description and the acceptance criteria, with
every other line kept as written.

Backlog.md writes its sections between HTML-comment markers (`<!-- SECTION:DESCRIPTION:BEGIN -->`,
`<!-- AC:BEGIN -->`, `<!-- SECTION:PLAN:BEGIN -->`, `<!-- SECTION:NOTES:BEGIN -->`,
`<!-- DOD:BEGIN -->`...); a hand-edited file may have only headings (`## Description`,
`## Acceptance Criteria`), or no heading at all. The description and the criteria are mapped to
their fields; every line no field took (Implementation Plan, Implementation Notes, Definition of
Done, comments, custom sections, text around the criteria) is returned in `Body.kept`, in file
order, for the importer to keep verbatim. A body without headings or markers is all description.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r" {0,3}(#{1,6})\s+(.*?)\s*#*\s*")
_CHECKBOX = re.compile(r"\s{0,3}[-*+]\s+\[([ xX])\]\s+(?:#\d+\s+)?(.*\S)")
_BULLET = re.compile(r"(?:[-*+]|\d+[.)])\s+(.*\S)")  # top-level only: nested items are details of their parent
_FM_DELIMITER = re.compile(r"-{3,}\s*")
_DESCRIPTION = ("<!-- SECTION:DESCRIPTION:BEGIN -->", "<!-- SECTION:DESCRIPTION:END -->")
_AC = ("<!-- AC:BEGIN -->", "<!-- AC:END -->")


@dataclass
class Line:
    number: int  # 1-based, in the file
    text: str
    fenced: bool  # inside a ``` or ~~~ code block, where nothing is a heading, marker or list item


@dataclass
class Body:
    description: str
    criteria: list[str] = field(default_factory=list)
    checked: list[bool] = field(default_factory=list)
    kept: list[Line] = field(default_factory=list)  # the lines no field took, as written


def read_body(body: list[Line]) -> Body:
    """The description, the criteria and what is left of `body` (see the module's docstring)."""
    used: set[int] = set()  # line numbers a field took, with the markers and headings that frame them
    description = _description(body, used)
    criteria, checked = _criteria(body, used)
    return Body(description, criteria, checked, _rest(body, used))


def scan(lines: list[str], first_number: int) -> list[Line]:
    """Number the body's lines and mark those inside code fences (closed by the same character,
    at least as long)."""
    scanned: list[Line] = []
    fence: str | None = None
    for offset, text in enumerate(lines):
        opener = _FENCE.match(text)
        if fence is None and opener:
            fence = opener.group(1)
            scanned.append(Line(first_number + offset, text, True))
        elif fence is not None:
            closes = opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence) \
                and not text[opener.end():].strip()
            scanned.append(Line(first_number + offset, text, True))
            if closes:
                fence = None
        else:
            scanned.append(Line(first_number + offset, text, False))
    return scanned


def _criteria(body: list[Line], used: set[int]) -> tuple[list[str], list[bool]]:
    """Between `<!-- AC:BEGIN -->` and `<!-- AC:END -->` (the `#N` numbers dropped); in a hand-written
    file, the list under `## Acceptance Criteria`. Other lines there are not criteria (kept)."""
    lines = _framed(body, _AC, "acceptance criteria", used)
    criteria: list[str] = []
    checked: list[bool] = []
    for line in lines or []:
        if line.fenced:
            continue
        box = _CHECKBOX.fullmatch(line.text)
        bullet = None if box else _BULLET.fullmatch(line.text)
        if box:
            criteria.append(box.group(2).strip())
            checked.append(box.group(1) != " ")
        elif bullet:
            criteria.append(bullet.group(1).strip())
            checked.append(False)
        else:
            continue
        used.add(line.number)
    return criteria, checked


def _description(body: list[Line], used: set[int]) -> str:
    """Between the description markers, else under `## Description`, else (a body without a
    heading) the whole body, else the text before the first heading."""
    lines = _framed(body, _DESCRIPTION, "description", used)
    if lines is None:
        first = next((i for i, line in enumerate(body) if not line.fenced and HEADING.fullmatch(line.text)), len(body))
        lines = body[:first]
    lines = list(lines)
    while lines and (not lines[-1].text.strip() or _FM_DELIMITER.fullmatch(lines[-1].text)):  # trailing blanks, ---
        lines.pop()
    used.update(line.number for line in lines)
    return "\n".join(line.text for line in lines).strip()


def _framed(body: list[Line], markers: tuple[str, str], name: str, used: set[int]) -> list[Line] | None:
    """The lines between the two marker comments, else under a `## Name` heading; None when there is
    neither. The markers and the heading count as used; the lines are for the caller to take."""
    section = _section(body, name)
    if section is not None:
        used.add(body[section[0]].number)
    begin = next((i for i, line in enumerate(body) if not line.fenced and line.text.strip() == markers[0]), None)
    if begin is not None:
        end = next((i for i in range(begin + 1, len(body)) if not body[i].fenced and body[i].text.strip() == markers[1]),
                   len(body))
        used.update(line.number for line in body[begin:end + 1])
        used.difference_update(line.number for line in body[begin + 1:end])
        return body[begin + 1:end]
    return body[section[1]:section[2]] if section is not None else None


def _section(body: list[Line], name: str) -> tuple[int, int, int] | None:
    """(heading, first line, end) of the `## Name` section (any level up to 2), up to the next
    heading of level 1-2."""
    start = None
    for i, line in enumerate(body):
        heading = None if line.fenced else HEADING.fullmatch(line.text)
        if heading and len(heading.group(1)) <= 2:
            if start is not None:
                return start - 1, start, i
            if heading.group(2).strip().casefold() == name:
                start = i + 1
    return (start - 1, start, len(body)) if start is not None else None


def _rest(body: list[Line], used: set[int]) -> list[Line]:
    """The lines no field took, without blank lines at either end or two in a row."""
    rest: list[Line] = []
    for line in body:
        blank = not line.text.strip() and not line.fenced
        if line.number in used or (blank and (not rest or not rest[-1].text.strip())):
            continue
        rest.append(line)
    while rest and not rest[-1].text.strip():
        rest.pop()
    return rest
