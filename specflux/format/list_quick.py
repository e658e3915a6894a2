"""`list`'s row of a plainly written task file, read in one pass without building a TaskDocument.

`list` with its cache off reads every file, and building a `TaskDocument` (the outline with every
heading and span, the sections, the regions) costs ~3x what the row needs. Most task files are
written plainly: LF line endings, headings at the start of their line, one code fence (the
metadata's ```json block) and no HTML comment. For such a file every heading is a line starting
with `#`s outside that fence, so the row can be read with one regular expression over the text.

`quick_list_fields` returns None for any file that is not plain in exactly this sense, and for any
file with a problem to report (no title, broken metadata, criteria outside their section, a fence
among the criteria): `list` then reads it through `TaskDocument`, as every other command does.
tests/format/test_document.py checks with hypothesis that where it answers, it answers what
`TaskDocument` reads.
"""

from __future__ import annotations

import re

from specflux.base.errors import ParseError
from specflux.format.criteria import count_ticked_plain
from specflux.format.metadata import read_metadata
from specflux.format.outline import Fence, heading_text
from specflux.format.regions import SECTION_KEYS, TITLE, normalise_heading

# Lines of the padded text ("\n" + text; see outline.py), by the same rules as `scan`'s: a
# heading of level 1 or 2 (the title, the sections), any heading of level 3, and a heading of
# level 1-3 (where a level-3 heading's region ends).
_TOP = re.compile(r"\n(#{1,2})(?=[ \t\n]|\Z)([^\n]*)")
_THIRD = re.compile(r"\n###(?=[ \t\n]|\Z)([^\n]*)")
_UP_TO_THIRD = re.compile(r"\n#{1,3}(?=[ \t\n]|\Z)")
# In the progress log, a level-3 heading whose title (stripped) regions.SESSION matches, or else
# one ARCHIVED matches (with its two numbers): the same patterns, where `\s` may not cross the line
# ([^\S\n]: whitespace but a line break).
_W = r"[^\S\n]"
_PROGRESS_LINE = re.compile(rf"\n###[ \t]{_W}*(?:session{_W}*#?{_W}*\d+\b|archived{_W}+summary{_W}*\({_W}*sessions?{_W}*"
                            rf"(\d+){_W}*[-–—]{_W}*(\d+){_W}*\))", re.I)
# The lines `scan` reads besides headings at the start of their line: fences, comments, and any
# of these indented. A plain file has two: its fence's opening and closing lines.
_OTHER_LINES = re.compile(r"\n(?: {1,3}[#`~<]|[`~<])")
# A fence's opening line: three backticks and an info string without one; its closing line.
_OPENER = re.compile(r"\n```(?!`)([^`\n]*)\n")
_CLOSER = re.compile(r"\n```[ \t]*(?:\n|\Z)")


def _title(rest: str) -> str:
    """A heading's text from what follows its `#`s, as `scan` reads it."""
    title = rest.strip()
    return heading_text(rest) if title.endswith("#") else title


def _error(message: str, pos: int | None = None, line: int | None = None) -> ParseError:
    return ParseError(message)  # (never shown: a file with an error is read again through TaskDocument)


def _fence(padded: str) -> Fence | None:
    """The text's one code fence when it is a plain one, and nothing else but headings starts a line
    that `scan` reads: ``` and an info string, closed by ``` (offsets in the text: padded[i] is the
    line break before the line at text[i])."""
    lines = [m.start() for m in _OTHER_LINES.finditer(padded)]
    if len(lines) != 2:
        return None
    opener, closer = _OPENER.match(padded, lines[0]), _CLOSER.match(padded, lines[1])
    if opener is None or closer is None:
        return None
    return Fence(lines[0], opener.end() - 1, lines[1], closer.end() - 1, opener.group(1).strip(), True)


def quick_list_fields(text: str) -> tuple[str, str, list[str], int, int, int] | None:
    """(title, status, dependencies, criteria done, criteria total, sessions) of a plainly written
    task file, or None (see the module's docstring)."""
    if "\r" in text or text.startswith("\ufeff"):
        return None
    padded = "\n" + text
    fence = _fence(padded)
    if fence is None:
        return None
    n = len(text)
    title = None
    sections: dict[str, tuple[int, int, int]] = {}  # key -> (start, body, end) of the first of each
    last: tuple[str | None, int, int] | None = None  # the open section: (key, start, body)
    for m in _TOP.finditer(padded):
        start = m.start()
        if fence.start <= start < fence.end:
            continue  # inside the fence: code, not a heading
        if last is not None:
            key, s, b = last
            sections[key] = (s, b, start)  # a level-1 or -2 heading ends the section before it
            last = None
        hashes, rest = m.groups()
        if len(hashes) == 1:
            if title is None:
                title = _title(rest)
            continue
        key = SECTION_KEYS.get(normalise_heading(_title(rest)))
        if key and key not in sections:
            last = (key, start, min(m.end(), n))
    if last is not None:
        sections[last[0]] = (last[1], last[2], n)
    if title is None:
        return None  # no title: TaskDocument says so
    found = TITLE.match(title)
    shown = found.group(2).strip() if found and found.group(2) is not None else title

    metadata = sections.get("metadata")
    if metadata is None or not metadata[1] <= fence.start < metadata[2] or fence.end > metadata[2]:
        return None
    try:
        meta = read_metadata(text, fence, _error)
    except ParseError:
        return None

    criteria = None
    context = sections.get("context")
    if context is not None:
        c_start, _, c_end = context
        for m in _THIRD.finditer(padded, c_start + 1, c_end):
            if normalise_heading(_title(m.group(1))) == "acceptance criteria":
                body = min(m.end(), n)
                after = _UP_TO_THIRD.search(padded, m.end(), c_end)
                criteria = (body, after.start() if after else c_end)
                break
    if criteria is None:
        return None  # no criteria in their section: TaskDocument's rules look elsewhere
    sessions, archived = 0, None
    progress = sections.get("progress")
    if progress is not None:
        p_start, _, p_end = progress
        for first, last_ in _PROGRESS_LINE.findall(padded, p_start + 1, p_end):
            if not first:
                sessions += 1
            elif archived is None:
                archived = int(last_) - int(first) + 1
        sessions += archived or 0
    done, total = count_ticked_plain(text, *criteria)
    return shown, meta["status"], [str(d) for d in meta.get("dependencies", [])], done, total, sessions
