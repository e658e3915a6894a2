"""spec-kit: the head of a task line, the id and the markers written around it.

`T001 [P] [US1] Create ...`: the id, then `[P]` (may run in parallel), `[US1]` (its user story),
`[P1]` (a priority), other `[tags]` and `(tags):` as labels; what follows is the description.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .speckit_phrases import ID, RANGE

ID_FIRST = re.compile(rf"\s*(\*\*|__)?({ID})(\*\*|__)?(?![\w])")
PLACEHOLDER = re.compile(r"\s*\**(T[0-9X#N?]*[X#N?][0-9X#N?]*)\b")


@dataclass
class Head:
    raw_id: str | None  # None where the text does not start with an id
    text: str  # the description: the text without its id and markers
    parallel: bool = False
    story: str | None = None
    priority: int | None = None
    labels: list[str] = field(default_factory=list)


def starts_with_id(text: str) -> bool:
    m = ID_FIRST.match(text)
    return bool(m) and not RANGE.match(text)


def read_head(text: str) -> Head:
    """The id and the markers after it: `[P]`, `[US1]`, `[P1]`, other `[tags]` and `(tags):`."""
    m = ID_FIRST.match(text)
    if not m:
        return Head(None, text.strip())
    head, rest = Head(m.group(2), ""), text[m.end():]
    while True:
        bracket = re.match(r"\s*\[([^\]\s][^\]]{0,30})\]", rest)
        paren = re.match(r"\s*\(([^()]{1,30})\)\s*(?=:)", rest)
        if bracket:
            tag = bracket.group(1).strip()
            story = re.fullmatch(r"US\s*-?\s*(\d+)", tag, re.I)
            if tag.upper() == "P":
                head.parallel = True
            elif story:
                head.story = f"US{story.group(1)}"
            elif re.fullmatch(r"P\d", tag):
                head.priority = int(tag[1])
            else:
                head.labels.append(tag)
            rest = rest[bracket.end():]
        elif paren:
            head.labels.append(paren.group(1).strip())
            rest = rest[paren.end():]
        else:
            break
    head.text = re.sub(r"^\s*(?:[:.)]|\s[-–—])\s*", "", rest).strip()
    return head
