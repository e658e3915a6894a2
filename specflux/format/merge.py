"""A three-way merge of task-state files by parts: the merge git's driver for task files runs
(vcs/merge_driver.py is git's side of it: the three files git hands over, and the registration).

Why: two lanes (or two people on two machines) working on one task both append a session, tick
criteria and change metadata. Git merges text by lines, so two sessions appended at the end of
the progress log, two `"status"` lines or two ticks on neighbouring lines are conflicts, although
nothing disagrees. `merge_task(base, ours, theirs)` merges the file by what it is made of:

- **metadata**, key by key (`_merge_value`): a key changed on one side takes that side; both sides
  to the same value is fine; nested objects merge key by key and lists of plain values (such as
  `dependencies`) as sets (additions and removals of both sides). Two different values are a
  conflict, except `total_sessions` (recomputed from the merged progress log) and `status`, where
  the further state wins: complete > review > in_progress > failed > blocked > pending (work that
  was handed in or finished is a fact; `in_progress` is someone working again after a failure;
  `blocked` is derived from a dependency; `pending` is where every task starts).
- **acceptance criteria**: a box ticked on either side is ticked; unticked only when one side
  unticked it and the other left it as it was. Ticks are merged apart from the text, so ticking
  never conflicts with an edit of the same line; the text is merged by lines.
- **progress log**: the sessions of both sides. Sessions theirs added after the base go after
  ours, and keep their number unless it would repeat or go backwards, when they take the previous
  number + 1 (the `### Session N` heading is rewritten). An archived summary changed on both sides
  differently is a conflict.
- **every other part** (chain inputs, chain output, context, unknown sections, the title) is
  merged subsection by subsection (`### ...`): a subsection added on either side is kept where it
  was added, and each one is merged three-way by lines, like `git merge-file`.

A true conflict keeps git's markers (`<<<<<<< ours` / `=======` / `>>>>>>> theirs`) around the
lines that disagree, in the part they belong to, and nothing else. Every byte outside a conflict
comes from one of the sides; the file keeps ours' line endings. A file that is not a task file
(no title, no readable metadata, a code fence never closed, mixed line endings) is merged by lines
as a whole, the way `git merge-file` does: never losing a side. The merge by lines, criteria ticks
included, is format/line_merge.py's.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from specflux.base.records import record
from specflux.format.document import TaskDocument
from specflux.format.line_merge import merge_lines, to_lf
from specflux.format.outline import Heading, scan
from specflux.format.regions import ARCHIVED, FROM_TASK, SECTION_KEYS, SESSION, normalise_heading

STATUS_ORDER = ("complete", "review", "in_progress", "failed", "blocked", "pending")
_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<missing>"})()
_SESSION_HEADING = re.compile(r"^( {0,3}#{3}[ \t]+session\s*#?\s*)(\d+)", re.I)

Key = tuple


# ====================================================================== the entry point


def merge_task(base: str, ours: str, theirs: str) -> tuple[str, bool]:
    """The merged text and whether it is clean (no conflict markers were left in it)."""
    newline = _common_newline((base, ours, theirs))
    if newline is None:  # mixed line endings inside a file: lines as they are, endings included
        return merge_lines(base, ours, theirs)
    b, o, t = (to_lf(text) for text in (base, ours, theirs))
    docs = [_parse(text) for text in (b, o, t)]
    if None in docs:
        merged, clean = merge_lines(b, o, t)
    else:
        merged, clean = _merge_documents(*docs)
        if clean and _parse(merged) is None:
            clean = False  # a merge that no longer reads as a task file is for a person to look at
    return (merged if newline == "\n" else merged.replace("\n", newline)), clean


# ====================================================================== line endings and parsing


def _common_newline(texts) -> str | None:
    """The line ending to write (ours', else theirs', else base's, else LF), or None when one of the
    files mixes endings (then no normalising is safe)."""
    styles = []
    for text in texts:
        kinds = set(re.findall(r"\r\n|\r|\n", text))
        if len(kinds) > 1:
            return None
        styles.append(kinds.pop() if kinds else None)
    return styles[1] or styles[2] or styles[0] or "\n"


def _parse(text: str) -> TaskDocument | None:
    """The document when it reads as a task file whose outline can be trusted, else None."""
    doc = TaskDocument(text)
    try:
        doc.title  # noqa: B018
        doc.metadata  # noqa: B018
        doc.members  # noqa: B018
    except Exception:  # ParseError, and JSON a hand edit broke in ways only json names
        return None
    return None if doc.unclosed() else doc


# ====================================================================== pieces of a document


@record(frozen=True)
class _Piece:
    """A heading with the text it owns (or the text before the first heading), and the offsets of
    the criteria boxes in it."""

    key: Key
    text: str
    boxes: tuple[int, ...] = ()
    number: int | None = None  # a session's number


_EMPTY = _Piece(("empty",), "")


def _cut(text: str, boxes, headings: list[Heading], key_of: Callable[[Heading], tuple]) -> tuple[_Piece, list[_Piece]]:
    """The text before the first of `headings` and a piece per heading, each up to the next one.
    Keys get an occurrence count, so that a heading written twice is two pieces."""
    bounds = [0, *(h.start for h in headings), len(text)]
    pieces, seen = [], {}
    for n, (start, end) in enumerate(zip(bounds, bounds[1:])):
        inside = tuple(x - start for x in boxes if start <= x < end)
        if n == 0:
            head = _Piece(("head",), text[start:end], inside)
            continue
        h = headings[n - 1]
        key = key_of(h)
        occurrence = seen[key] = seen.get(key, -1) + 1
        m = SESSION.match(h.text) if h.level == 3 else None
        pieces.append(_Piece(key + (occurrence,), text[start:end], inside, int(m.group(1)) if m else None))
    return head, pieces


def _sections(doc: TaskDocument) -> tuple[_Piece, list[_Piece]]:
    """The title part and one piece per `##` section (a `#` heading after the title too)."""
    boxes = [box for _, box, _, _, _ in doc.criteria_lines]
    cuts = [h for h in doc.outline.headings if h.level <= 2 and h is not doc.title_heading]
    return _cut(doc.text, boxes, cuts, _section_key)


def _section_key(h: Heading) -> tuple:
    name = normalise_heading(h.text)
    if h.level == 2 and name in SECTION_KEYS:
        return ("section", SECTION_KEYS[name])
    return ("heading", h.level, name)


def _subsections(piece: _Piece, key_of: Callable[[Heading], tuple]) -> tuple[_Piece, list[_Piece]]:
    headings = [h for h in scan(piece.text).headings if h.level == 3]
    return _cut(piece.text, piece.boxes, headings, key_of)


def _sub_key(h: Heading) -> tuple:
    m = FROM_TASK.match(h.text)
    return ("from", m.group(1)) if m else ("heading", normalise_heading(h.text))


def _log_key(h: Heading) -> tuple:
    m = SESSION.match(h.text)
    if m:
        return ("session", int(m.group(1)))
    return ("archived",) if ARCHIVED.match(h.text) else ("heading", normalise_heading(h.text))


def _join(texts) -> str:
    """Pieces one after the other; one that ended the file without a line break gets one, and a
    blank line, when something now follows it."""
    out = ""
    for text in texts:
        if out and not out.endswith("\n") and text:
            out += "\n\n"
        out += text
    return out


# ====================================================================== merging pieces


def _order(base: dict[Key, _Piece], ours: dict[Key, _Piece], theirs: dict[Key, _Piece]) -> list[Key]:
    """The merged sequence of keys: ours' order; a piece one side deleted and the other left as it
    was is gone; one theirs added goes after the piece it follows in theirs, and after what ours
    added there (ours first, as with sessions)."""
    keys = [k for k in ours if k in theirs or k not in base or ours[k].text != base[k].text]
    theirs_keys = list(theirs)
    for i, k in enumerate(theirs_keys):
        if k in ours or (k in base and theirs[k].text == base[k].text):
            continue
        after = next((p for p in reversed(theirs_keys[:i]) if p in keys), None)
        at = 0 if after is None else keys.index(after) + 1
        while at < len(keys) and keys[at] in ours and keys[at] not in base and keys[at] not in theirs:
            at += 1
        keys.insert(at, k)
    return keys


def _merge_piece(b: _Piece | None, o: _Piece | None, t: _Piece | None) -> tuple[str, bool]:
    """One piece three-way by lines; added on one side only, it is that side's."""
    if o is None or t is None:
        only = o or t
        if b is None:
            return only.text, True
    b, o, t = b or _EMPTY, o or _EMPTY, t or _EMPTY
    return merge_lines(b.text, o.text, t.text, (b.boxes, o.boxes, t.boxes))


def _merge_sequence(b: dict, o: dict, t: dict, merge: Callable) -> tuple[list[str], bool]:
    texts, clean = [], True
    for key in _order(b, o, t):
        text, ok = merge(key, b.get(key), o.get(key), t.get(key))
        texts.append(text)
        clean &= ok
    return texts, clean


def _by_subsections(b: _Piece, o: _Piece, t: _Piece, key_of=_sub_key) -> tuple[str, bool]:
    """A section: the text under its heading by lines, each `###` subsection by lines, subsections
    either side added kept (two `### From Task #101` added differently are a conflict)."""
    (bh, bs), (oh, os_), (th, ts) = (_subsections(p, key_of) for p in (b, o, t))
    head, clean = _merge_piece(bh, oh, th)
    texts, ok = _merge_sequence(_keyed(bs), _keyed(os_), _keyed(ts), lambda k, *p: _merge_piece(*p))
    return _join([head, *texts]), clean and ok


def _keyed(pieces: list[_Piece]) -> dict[Key, _Piece]:
    return {p.key: p for p in pieces}


def _merge_documents(base: TaskDocument, ours: TaskDocument, theirs: TaskDocument) -> tuple[str, bool]:
    (bh, bs), (oh, os_), (th, ts) = (_sections(d) for d in (base, ours, theirs))
    head, clean = _merge_piece(bh, oh, th)
    b, o, t = _keyed(bs), _keyed(os_), _keyed(ts)
    progress, metadata = ("section", "progress", 0), ("section", "metadata", 0)
    done: dict[Key, tuple[str, bool]] = {}
    for key in _order(b, o, t):
        if key == metadata:
            continue  # last: total_sessions comes from the merged log
        if key == progress and o.get(key) and t.get(key):
            done[key] = _merge_log(b.get(key, _EMPTY), o[key], t[key])
        elif o.get(key) and t.get(key):
            done[key] = _by_subsections(b.get(key, _EMPTY), o[key], t[key])
        else:
            done[key] = _merge_piece(b.get(key), o.get(key), t.get(key))
    if metadata in o or metadata in t:
        total = _session_count(done[progress][0]) if progress in done else None
        if metadata in o and metadata in t and metadata in b:
            done[metadata] = _merge_metadata(b[metadata], o[metadata], t[metadata], total)
        else:
            done[metadata] = _merge_piece(b.get(metadata), o.get(metadata), t.get(metadata))
    texts = [done[k][0] for k in _order(b, o, t)]
    return _join([head, *texts]), clean and all(ok for _, ok in done.values())


# ====================================================================== the progress log


def _merge_log(b: _Piece, o: _Piece, t: _Piece) -> tuple[str, bool]:
    """The progress log: sessions both sides kept (each merged by lines), then the sessions ours
    added, then those theirs added, renumbered where their numbers would repeat or go backwards."""
    (bh, bs), (oh, os_), (th, ts) = (_subsections(p, _log_key) for p in (b, o, t))
    if any(p.key[0] == "session" and p.key[-1] > 0 for p in (*bs, *os_, *ts)):
        return _merge_piece(b, o, t)  # a session number written twice: which is which is a guess
    known = {p.number for p in bs if p.number is not None}
    mine = [_as_new(p, "ours") if p.number is not None and p.number not in known else p for p in os_]
    added = [p for p in ts if p.number is not None and p.number not in known]
    rest = [p for p in ts if p not in added]
    head, clean = _merge_piece(bh, oh, th)
    keys = _order(_keyed(bs), _keyed(mine), _keyed(rest))
    B, O, T = _keyed(bs), _keyed(mine), _keyed(rest)
    merged: list[tuple[str, int | None, bool]] = []  # (text, session number, added by theirs)
    for key in keys:
        text, ok = _merge_piece(B.get(key), O.get(key), T.get(key))
        clean &= ok
        number = next((p.number for p in (O.get(key), T.get(key)) if p is not None), None)
        merged.append((text, number, False))
    ours_new = {p.text for p in mine if p.key[0] == "new"}
    theirs_new = [(p.text, p.number, True) for p in added if p.text not in ours_new]
    last = max((i for i, (text, number, _) in enumerate(merged) if number is not None or _is_archived(text)), default=None)
    at = len(merged) if last is None else last + 1
    merged[at:at] = theirs_new
    return _join([head, *_renumber(merged)]), clean


def _as_new(piece: _Piece, side: str) -> _Piece:
    return _Piece(("new", side, piece.number), piece.text, piece.boxes, piece.number)


def _is_archived(text: str) -> bool:
    return _archived_range(text) is not None


def _archived_range(text: str) -> tuple[int, int] | None:
    for h in scan(text).headings:
        m = ARCHIVED.match(h.text) if h.level == 3 else None
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def _renumber(merged: list[tuple[str, int | None, bool]]) -> list[str]:
    """Texts in order, theirs' added sessions renumbered so that numbers keep increasing."""
    out, previous = [], 0
    for text, number, added in merged:
        archived = _archived_range(text) if number is None else None
        if archived:
            previous = max(previous, archived[1])
        if number is not None:
            if added and number <= previous:
                number = previous + 1
                text = _SESSION_HEADING.sub(lambda m: m.group(1) + str(number), text, count=1)
            previous = max(previous, number)
        out.append(text)
    return out


def _session_count(progress_text: str) -> int:
    """Sessions the merged log accounts for (both sides of a conflict in it count)."""
    headings = [h for h in scan(progress_text).headings if h.level == 3]
    sessions = sum(1 for h in headings if SESSION.match(h.text))
    archived = _archived_range(progress_text)
    return sessions + (archived[1] - archived[0] + 1 if archived else 0)


# ====================================================================== metadata


def _merge_metadata(b: _Piece, o: _Piece, t: _Piece, total: int | None) -> tuple[str, bool]:
    """The metadata section: the JSON key by key, the text around the block by lines."""
    parts = [_json_parts(p.text) for p in (b, o, t)]
    if None in parts:
        return _merge_piece(b, o, t)
    (bpre, bjson, bpost, bv), (opre, ojson, opost, ov), (tpre, tjson, tpost, tv) = parts
    pre, clean_pre = merge_lines(bpre, opre, tpre)
    post, clean_post = merge_lines(bpost, opost, tpost)
    updates, conflicts = {}, []
    for key in [*ov, *(k for k in tv if k not in ov)]:
        value, ok = _merge_key(key, bv.get(key, _MISSING), ov.get(key, _MISSING), tv.get(key, _MISSING), total)
        if not ok:
            conflicts.append(key)
        elif not _same(value, ov.get(key, _MISSING)):
            updates[key] = value
    merged = _rewrite_json(ojson, updates)
    if conflicts:  # the disagreeing members between markers, every other member merged
        merged, _ = merge_lines(_rewrite_json(merged, {k: bv.get(k, _MISSING) for k in conflicts}), merged,
                                _rewrite_json(merged, {k: tv.get(k, _MISSING) for k in conflicts}))
    return pre + merged + post, clean_pre and clean_post and not conflicts


def _merge_key(key: str, b, o, t, total: int | None) -> tuple[Any, bool]:
    value, ok = _merge_value(b, o, t)
    if key == "total_sessions" and total is not None and value is not _MISSING:
        return total, True
    if not ok and key == "status" and o in STATUS_ORDER and t in STATUS_ORDER:
        return min(o, t, key=STATUS_ORDER.index), True
    return value, ok


def _merge_value(b, o, t) -> tuple[Any, bool]:
    """A value three-way; (ours' value, False) when both sides changed it differently."""
    if _same(o, t) or _same(t, b):
        return o, True
    if _same(o, b):
        return t, True
    if isinstance(o, dict) and isinstance(t, dict) and (b is _MISSING or isinstance(b, dict)):
        base = {} if b is _MISSING else b
        out, clean = {}, True
        for key in [*o, *(k for k in t if k not in o)]:
            value, ok = _merge_value(base.get(key, _MISSING), o.get(key, _MISSING), t.get(key, _MISSING))
            clean &= ok
            if value is not _MISSING:
                out[key] = value
        return (out, True) if clean else (o, False)
    if all(v is _MISSING or _plain_list(v) for v in (b, o, t)) and _plain_list(o) and _plain_list(t):
        base = [] if b is _MISSING else b
        gone = {_canon(v) for v in base} - {_canon(v) for v in t}
        have = {_canon(v) for v in base} | {_canon(v) for v in o}
        return [v for v in o if _canon(v) not in gone] + [v for v in t if _canon(v) not in have], True
    return o, False


def _plain_list(value) -> bool:
    """A list of strings and numbers, none twice: merged as a set (dependencies, labels, files)."""
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return False
    return len({_canon(v) for v in value}) == len(value)


def _canon(value) -> str:
    return "\0missing" if value is _MISSING else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _same(x, y) -> bool:
    return _canon(x) == _canon(y)


_FRAME = "## Metadata\n```json\n"


def _json_parts(section: str) -> tuple[str, str, str, dict] | None:
    """(text before the JSON, the JSON, text after it, its values), or None when a key is written
    twice (which one counts is a guess: merged by lines then)."""
    doc = TaskDocument(section)
    try:
        fence, members = doc.metadata_fence, doc.members
    except Exception:
        return None
    if doc.duplicate_keys():
        return None
    return (section[: fence.body], section[fence.body : fence.close], section[fence.close :],
            {m.key: m.value for m in members})


def _rewrite_json(source: str, updates: dict[str, Any]) -> str:
    """The JSON text with these members set (new ones last) or removed (`_MISSING`), every other
    character as written: the edits TaskDocument makes to a task's metadata."""
    text = _FRAME + source + "```\n"
    for key, value in updates.items():
        if value is _MISSING:
            text = _without_member(TaskDocument(text), key)
    sets = {k: v for k, v in updates.items() if v is not _MISSING}
    if sets:
        text = TaskDocument(text).set_metadata(sets)
    return text[len(_FRAME) : text.rindex("```")]


def _without_member(doc: TaskDocument, key: str) -> str:
    members = doc.members
    i = next((n for n, m in enumerate(members) if m.key == key), None)
    if i is None:
        return doc.text
    m = members[i]
    if i + 1 < len(members):
        start, end = m.key_start, members[i + 1].key_start
    elif i > 0:
        start, end = members[i - 1].value_end, m.value_end
    else:
        start, end = m.key_start, m.value_end
    return doc.text[:start] + doc.text[end:]
