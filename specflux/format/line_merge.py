"""Three-way merge by lines, as `git merge-file` does it, with one difference: the boxes of
acceptance criteria (`- [ ]` / `- [x]`) are merged apart from their text, so that a tick on one side
and an edit of the same line on the other are both kept (the side that changed a box wins).

A true conflict is left between git's markers (`<<<<<<< ours` / `=======` / `>>>>>>> theirs`);
`conflict_lines` finds them again. format/merge.py merges a task file by its parts with this.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator

from specflux.base.records import record
from specflux.format.outline import split_lines

if TYPE_CHECKING:
    from difflib import SequenceMatcher

OURS_MARKER, SEPARATOR, THEIRS_MARKER = "<<<<<<< ours", "=======", ">>>>>>> theirs"
_MARKER_LINE = re.compile(r"^<{7}(?:[ \t]|$)", re.M)


def conflict_lines(text: str) -> list[int]:
    """1-based lines where a conflict left by a merge starts (`<<<<<<<` at a line start; a line of
    `=======` alone is also a markdown heading underline, so it is not counted)."""
    return [text.count("\n", 0, m.start()) + 1 for m in _MARKER_LINE.finditer(to_lf(text))]


def to_lf(text: str) -> str:
    """CRLF and lone CR line endings as LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


@record
class _Version:
    """One side's text as lines; a criterion's box is blanked in `neutral` so that lines are
    compared by their text and ticks are merged apart."""

    lines: list[str]
    neutral: list[str]
    box: list[int | None]  # column of the box character in the line, for criteria

    @classmethod
    def of(cls, text: str, boxes=()) -> "_Version":
        lines, neutral, box, pos = split_lines(text), [], [], 0
        marks = sorted(boxes)
        k = 0
        for line in lines:
            while k < len(marks) and marks[k] < pos:
                k += 1
            col = marks[k] - pos if k < len(marks) and marks[k] < pos + len(line) else None
            box.append(col)
            neutral.append(line if col is None else line[:col] + " " + line[col + 1 :])
            pos += len(line)
        return cls(lines, neutral, box)

    def ticked(self, i: int | None) -> bool | None:
        if i is None or self.box[i] is None:
            return None
        return self.lines[i][self.box[i]] != " "


def merge_lines(base: str, ours: str, theirs: str, boxes=((), (), ())) -> tuple[str, bool]:
    """`git merge-file` on three texts: changes of one side are taken, the same change on both is
    taken once, and changes that touch the same lines differently are left between markers.
    `boxes` are the offsets of criteria boxes in each text: their ticks merge apart (`_decide`)."""
    B, O, T = (_Version.of(text, bx) for text, bx in zip((base, ours, theirs), boxes))
    from difflib import SequenceMatcher  # here: `lint` (conflict_lines) runs after every session, a merge seldom

    mo = SequenceMatcher(None, B.neutral, O.neutral, autojunk=False)
    mt = SequenceMatcher(None, B.neutral, T.neutral, autojunk=False)
    b2o, o2b = _alignment(mo, B, O)
    b2t, t2b = _alignment(mt, B, T)
    out: list[str] = []
    clean = True

    def emit(src: _Version, i: int, b: int | None, o: int | None, t: int | None) -> None:
        out.append(_tick(src, i, (B, b), (O, o), (T, t)))

    for chunk in _diff3(B.neutral, O.neutral, T.neutral, mo.get_matching_blocks(), mt.get_matching_blocks()):
        kind, (z1, z2), (a1, a2), (c1, c2) = chunk
        if kind == "unchanged":
            for i in range(z1, z2):
                emit(B, i, i, b2o.get(i), b2t.get(i))
        elif kind == "ours":
            for j in range(a1, a2):
                emit(O, j, o2b.get(j), j, b2t.get(o2b.get(j)))
        elif kind == "theirs":
            for k in range(c1, c2):
                emit(T, k, t2b.get(k), b2o.get(t2b.get(k)), k)
        elif kind == "same":
            for j, k in zip(range(a1, a2), range(c1, c2)):
                emit(O, j, o2b.get(j), j, k)
        else:  # a conflict: what both sides agree on at its edges is not part of it (git's "zealous")
            head = 0
            while a1 + head < a2 and c1 + head < c2 and O.neutral[a1 + head] == T.neutral[c1 + head]:
                head += 1
            tail = 0
            while a2 - tail > a1 + head and c2 - tail > c1 + head and O.neutral[a2 - tail - 1] == T.neutral[c2 - tail - 1]:
                tail += 1
            for j, k in zip(range(a1, a1 + head), range(c1, c1 + head)):
                emit(O, j, o2b.get(j), j, k)
            if (a2 - tail) - (a1 + head) or (c2 - tail) - (c1 + head):
                clean = False
                out.append(_conflict(O.lines[a1 + head : a2 - tail], T.lines[c1 + head : c2 - tail]))
            for j, k in zip(range(a2 - tail, a2), range(c2 - tail, c2)):
                emit(O, j, o2b.get(j), j, k)
    return "".join(out), clean


def _diff3(base, a, b, ma, mb) -> Iterator[tuple[str, tuple[int, int], tuple[int, int], tuple[int, int]]]:
    """The regions of a three-way merge (bzr's merge3): stretches of base unchanged on both sides,
    and between them what each side made of the base. Yields (kind, base range, ours range, theirs
    range) with kind unchanged, ours (only ours changed), theirs, same (both alike) or conflict."""
    sync, ia, ib = [], 0, 0
    while ia < len(ma) and ib < len(mb):
        abase, amatch, alen = ma[ia]
        bbase, bmatch, blen = mb[ib]
        lo, hi = max(abase, bbase), min(abase + alen, bbase + blen)
        if lo < hi:
            sync.append((lo, hi, amatch + lo - abase, amatch + hi - abase, bmatch + lo - bbase, bmatch + hi - bbase))
        if abase + alen < bbase + blen:
            ia += 1
        else:
            ib += 1
    sync.append((len(base), len(base), len(a), len(a), len(b), len(b)))
    iz = ia = ib = 0
    for z1, z2, a1, a2, b1, b2 in sync:
        if a1 > ia or b1 > ib:
            zr, ar, br = (iz, z1), (ia, a1), (ib, b1)
            if a[ia:a1] == b[ib:b1]:
                yield "same", zr, ar, br
            elif base[iz:z1] == a[ia:a1]:
                yield "theirs", zr, ar, br
            elif base[iz:z1] == b[ib:b1]:
                yield "ours", zr, ar, br
            else:
                yield "conflict", zr, ar, br
        if z2 > z1:
            yield "unchanged", (z1, z2), (a1, a2), (b1, b2)
        iz, ia, ib = z2, a2, b2


def _alignment(matcher: SequenceMatcher, base: _Version, side: _Version) -> tuple[dict, dict]:
    """Which base line each side line is (and back): lines that match, and criteria whose text was
    edited (paired in order when a block has as many before as after, else by likeness), so that
    a criterion reworded on one side and ticked on the other ends up both."""
    b2s, s2b = {}, {}
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs = zip(range(i1, i2), range(j1, j2))
        elif tag == "replace":
            pairs = _pair_criteria([i for i in range(i1, i2) if base.box[i] is not None],
                                   [j for j in range(j1, j2) if side.box[j] is not None], base, side)
        else:
            continue
        for i, j in pairs:
            b2s[i], s2b[j] = j, i
    return b2s, s2b


def _pair_criteria(bl: list[int], sl: list[int], base: _Version, side: _Version) -> list[tuple[int, int]]:
    if len(bl) == len(sl) or len(bl) * len(sl) > 10_000:  # a rewritten list of hundreds: in order
        return list(zip(bl, sl))
    from difflib import SequenceMatcher

    pairs, free = [], list(bl)
    for j in sl:
        scored = [(SequenceMatcher(None, base.neutral[i], side.neutral[j]).ratio(), i) for i in free]
        best = max(scored, default=(0.0, None))
        if best[0] >= 0.6:
            pairs.append((best[1], j))
            free.remove(best[1])
    return pairs


def _decide(b: bool | None, o: bool | None, t: bool | None) -> bool | None:
    """A criterion's tick from the three sides (None: the side does not have it): the side that
    changed it wins; with no base, ticked on either side is ticked."""
    if o is None or t is None:
        return t if o is None else o
    if o == t:
        return o
    if b is None:
        return True
    return t if o == b else o


def _tick(src: _Version, i: int, base, ours, theirs) -> str:
    """Line `i` of `src` with its criterion's box set as `_decide` says; each of base, ours and
    theirs is (version, index of the same line there or None)."""
    line, col = src.lines[i], src.box[i]
    if col is None:
        return line
    o, t = ours[0].ticked(ours[1]), theirs[0].ticked(theirs[1])
    want = _decide(base[0].ticked(base[1]), o, t)
    if want is None or want == (line[col] != " "):
        return line
    mark = " "
    if want:  # the mark the ticking side wrote (x or X)
        version, j = ours if o else theirs
        mark = version.lines[j][version.box[j]]
    return line[:col] + mark + line[col + 1 :]


def _conflict(ours: list[str], theirs: list[str]) -> str:
    def block(lines):
        text = "".join(lines)
        return text if not text or text.endswith("\n") else text + "\n"

    return f"{OURS_MARKER}\n{block(ours)}{SEPARATOR}\n{block(theirs)}{THEIRS_MARKER}\n"
