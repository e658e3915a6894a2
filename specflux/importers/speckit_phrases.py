"""spec-kit: the task ids a piece of text names, and what it says about order.

Ids are `T001`, `T-001`, `T005.1`, `T023a`, `T068A`, `T-HF01` (a letter prefix after a hyphen); a
range is `T006-T012`, `T006..T012`, `T006 to T012`. An id stands apart from letters and digits
around it, not from other scripts (`（依赖T031）`).
A task's own text states what it waits on after a keyword (`depends on T006`, `after T003`,
`needs T020`); a dependency section states it in sentences (`T014 blocks T019`,
`T001 → T002 → (T003, T004)`, `After T010: T011, T012`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ID = r"[Tt](?:-[A-Z]{1,4}-?|-)?\d+(?:\.\d+)*[a-zA-Z]?"  # `t005` too: see `normal`
_BEFORE, _AFTER = r"(?<![A-Za-z0-9_-])", r"(?![A-Za-z0-9_])"
ID_ANYWHERE = re.compile(rf"{_BEFORE}({ID}){_AFTER}")
RANGE = re.compile(rf"{_BEFORE}({ID})\s*(?:-|–|—|\.\.|\bto\b|\bthrough\b|\bthru\b)\s*({ID}){_AFTER}")
_NEEDS = r"depends\s+on|depend\s+on|dependent\s+on|requires|require|needs|after|blocked\s+by|waits?\s+for|once"
_NEEDS_CJK = r"依赖于|依赖|取决于"  # "depends on": no word boundary between these and an id
_BLOCKS = r"blocks|unblocks|before|precedes"
_INLINE_KEYWORD = re.compile(rf"\b(?:{_NEEDS})\b|{_NEEDS_CJK}", re.I)
_SECTION_KEYWORD = re.compile(rf"\b(?:(?P<needs>{_NEEDS})|(?P<blocks>{_BLOCKS}))\b|(?P<cjk>{_NEEDS_CJK})", re.I)
_ARROW = re.compile(r"\s*(?:→|⟶|->|=>|⇒)\s*")
# a clause ends at `;`, a full stop, or a word that turns to another subject ("... are parallel
# except T004 depends on T001-T003": only T004 waits)
_CLAUSE_END = re.compile(r"[;；。]|\.(?=\s|$)|\b(?:but|except|while|whereas|however)\b", re.I)


@dataclass
class Statement:
    """`dependents` wait on `prerequisites`, as a dependency section says on `line`."""

    line: int
    dependents: list[str]
    prerequisites: list[str]


def ids(text: str) -> list[tuple[str, str | None]]:
    """Ids mentioned in `text` in order, ranges as (first, last) pairs, single ids as (id, None)."""
    out: list[tuple[str, str | None]] = []
    pos = 0
    for m in RANGE.finditer(text):
        out += [(x, None) for x in ID_ANYWHERE.findall(text[pos:m.start()])]
        out.append((m.group(1), m.group(2)))
        pos = m.end()
    return out + [(x, None) for x in ID_ANYWHERE.findall(text[pos:])]


def statements(text: str, line: int) -> list[Statement]:
    """Dependency statements in one line of a dependency section. A parenthesis that states a
    dependency of its own is read apart; clauses end at `;`, a full stop or "but"."""
    out: list[Statement] = []
    while True:
        inner = next((m for m in re.finditer(r"\(([^()]*)\)", text)
                      if _SECTION_KEYWORD.search(m.group(1)) or _ARROW.search(m.group(1))), None)
        if inner is None:
            break
        own = statements(inner.group(1), line)
        out += own  # "(T012 depends on T011)" stands alone; "(after T003)" belongs to the clause around it
        text = text[: inner.start()] + " " + ("" if own else inner.group(1)) + " " + text[inner.end():]
    for clause in _CLAUSE_END.split(text):
        out += _clause(clause, line)
    return out


def _clause(clause: str, line: int) -> list[Statement]:
    segments = [ids(s) for s in _ARROW.split(clause)]
    if len(segments) > 1:  # an arrow chain: each step waits on the one before it
        return [Statement(line, flat(after), flat(before))
                for before, after in zip(segments, segments[1:]) if before and after]
    keywords = list(_SECTION_KEYWORD.finditer(clause))
    if not keywords:
        return []
    subject = flat(ids(clause[: keywords[0].start()]))
    spans = [clause[k.end(): nxt.start() if nxt else len(clause)]
             for k, nxt in zip(keywords, [*keywords[1:], None])]
    if keywords[0].group("blocks"):  # "T014 blocks T019", "Tests (T004-T009) before implementation (T010-T018)"
        dependents, prerequisites = flat(ids(spans[0])), subject
    else:  # "T013 can run with T014 after T012", "T005 and T006 once T003 is done"
        dependents = subject
        prerequisites = [x for k, span in zip(keywords, spans) if not k.group("blocks") for x in flat(ids(span))]
        if not subject and ":" in spans[0]:  # "After T010: T011, T012 in parallel"
            before, after = spans[0].split(":", 1)
            dependents, prerequisites = flat(ids(after)), flat(ids(before))
    return [Statement(line, dependents, prerequisites)] if dependents and prerequisites else []


def flat(found: list[tuple[str, str | None]]) -> list[str]:
    """Ranges stay as "first..last" until the known ids are there to fill them in."""
    return [f"{a}..{b}" if b else a for a, b in found]


def inline(text: str) -> list[str]:
    """Ids a task's own text says it waits on: after "depends on", "after", "requires", "needs"...
    up to the end of that parenthesis or clause."""
    out: list[str] = []
    for m in _INLINE_KEYWORD.finditer(text):
        span = text[m.end():]
        stop = re.search(rf"[);）；。]|\.(?=\s|$)|\b(?:{_NEEDS}|{_BLOCKS})\b|{_NEEDS_CJK}", span, re.I)
        out += flat(ids(span[: stop.start()] if stop else span))
    return out


def normal(written: str) -> str:
    """An id as specflux keeps it: `t005` is `T005` (the rest as written)."""
    return "T" + written[1:] if written[:1] == "t" else written


def key(task_id: str) -> tuple:
    """Order of ids: `T5` < `T005.1` < `T023a` < `T023A` < `T023b`; `T-HF01` < `T-HF02`, apart from
    the ids without a prefix; `T001-2` (a second T001) after `T001`."""
    m = re.fullmatch(r"[Tt](?:-([A-Z]{1,4})-?|-)?(\d+(?:\.\d+)*)([a-zA-Z]?)(?:-(\d+))?", task_id)
    if not m:
        return ("", (), task_id, 0)
    suffix = m.group(3)
    return (m.group(1) or "", tuple(int(n) for n in m.group(2).split(".")), (suffix.lower(), suffix),
            int(m.group(4) or 0))


def resolve(raw: str, known: dict) -> list[str] | None:
    """The known ids `raw` names (a range "T006..T012" names every known id between); None when it
    names none."""
    if ".." not in raw:
        return [normal(raw)] if normal(raw) in known else None
    first, last = (key(x) for x in raw.split(".."))
    inside = [t for t in known if first <= key(t) <= last]
    return inside or None
