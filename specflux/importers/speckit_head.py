"""spec-kit: the head of a task line, the id and the markers written around it.

`T001 [P] [US1] Create ...`: the id, then `[P]` (may run in parallel), `[US1]` or `[Story 1]` (its
user story), `[P1]` (a priority), other `[tags]` and `(tags):` as labels; what follows is the
description. People write the head in many ways, and all of these read the same:

    T002 [P] Create ...      T002: [P] Create ...      T002 - [P] [US1] Create ...
    T002. [P] Create ...     T002 — [P] Create ...     **T002** [P] Create ...
    **T002:** [P] Create ... [P] T002 Create ...       T002 Create ... [P]

An id in lower case (`t005`) is the same id in upper case (`T005`). The template's own
placeholders (`[Story]`, `[P?]`) are dropped. Markers never stay in the description.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specflux.importers.speckit_phrases import ID, RANGE, normal

_MARKER = r"\[\s*(?:[Pp]|US\s*-?\s*\d+(?:\.\d+)*|Story(?:\s*-?\s*\d+(?:\.\d+)*)?|P\d)\s*\]"
ID_FIRST = re.compile(rf"\s*(?P<pre>(?:{_MARKER}\s*)*)(?P<bold>\*\*|__)?(?P<id>{ID})(?![A-Za-z0-9_])"
                      r"(?P<close>[:.]?(?:\*\*|__))?")
PLACEHOLDER = re.compile(r"\s*\**(T[0-9X#N?]*[X#N?][0-9X#N?]*)\b")
_SEPARATOR = r"\s*(?:[:.)]|[-–—]+)?\s*"
_TAG = re.compile(rf"{_SEPARATOR}\[([^\]\s][^\]]{{0,30}})\](?!\()")  # not a link's [text](url)
_LABEL = re.compile(r"\s*\(([^()]{1,30})\)\s*(?=:)")  # `(RED):`, `(tests-first):`
_CLOSE_BOLD = re.compile(r"\s*[:.]?\s*(?:\*\*|__)")
# the separator after the id or its markers: `T002: `, `T002. `, `T002) `, `T002 - `; a dot that
# starts the text (`T001 .gitignore`) is the text's own
_LEAD = re.compile(r"^(?:[:.)](?=\s|$)|\s*:(?=\s|$)|\s+[-–—]+(?=\s|$)|[-–—]+(?=\s))\s*")
_TRAILING = re.compile(rf"(?:\s*{_MARKER})+\s*$")
_PLACEHOLDERS = {"story", "p?", "us?", "story?", "id", "usx"}


@dataclass
class Head:
    raw_id: str | None  # None where the text does not start with an id; `T005` for `t005`
    text: str  # the description: the text without its id and markers
    written: str | None = None  # the id as written (`t005`)
    parallel: bool = False
    story: str | None = None
    priority: int | None = None
    labels: list[str] = field(default_factory=list)


def starts_with_id(text: str) -> bool:
    """Whether `text` starts with a task id (markers and bold allowed in front), not a range."""
    m = ID_FIRST.match(text)
    return bool(m) and not RANGE.match(text, m.start("id"))


def read_head(text: str) -> Head:
    """The id, the markers around it and the description of a task line's text."""
    m = ID_FIRST.match(text)
    if not m or RANGE.match(text, m.start("id")):
        return Head(None, text.strip())
    head = Head(normal(m.group("id")), "", written=m.group("id"))
    for tag in re.findall(r"\[([^\]]*)\]", m.group("pre")):
        _tag(head, tag)
    rest, bold_open = text[m.end():], bool(m.group("bold")) and not m.group("close")
    while True:
        close = _CLOSE_BOLD.match(rest) if bold_open else None
        bracket = _TAG.match(rest)
        label = _LABEL.match(rest)
        if close:
            rest, bold_open = rest[close.end():], False
        elif bracket:
            _tag(head, bracket.group(1))
            rest = rest[bracket.end():]
        elif label:
            head.labels.append(label.group(1).strip())
            rest = rest[label.end():]
        else:
            break
    trailing = _TRAILING.search(rest)
    if trailing and trailing.start() > 0:  # `T002 Create the model [P]`
        for tag in re.findall(r"\[([^\]]*)\]", trailing.group(0)):
            _tag(head, tag)
        rest = rest[: trailing.start()]
    head.text = _LEAD.sub("", rest).strip()
    return head


def _tag(head: Head, tag: str) -> None:
    tag = tag.strip()
    story = re.fullmatch(r"(?:US|Story)\s*-?\s*(\d+(?:\.\d+)*)", tag, re.I)
    if tag.upper() == "P":
        head.parallel = True
    elif story:
        head.story = f"US{story.group(1)}"
    elif re.fullmatch(r"P\d", tag):
        head.priority = int(tag[1])
    elif tag.lower() not in _PLACEHOLDERS:
        head.labels.append(tag)
