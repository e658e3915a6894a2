"""A lossless outline of any markdown text: where its headings are, and which spans are opaque.

Nothing here changes text. `scan(text)` finds ATX headings outside code fences and HTML comment
blocks, and keeps every position as a character offset into the original string, so that edits can
replace exactly the characters they must and leave every other byte as it was.

It is a line scanner, not a markdown parser: one regular expression finds the few lines that can
matter (headings, fence openers, comment openers), so a 3 KB file costs a handful of regex steps.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from typing import NamedTuple

# Lines are found by the line break before them: CR, LF and CRLF all end a line (CommonMark).
# Scanning "\n" + text makes the first line no exception, and a pattern that starts with a
# character class lets the regex engine skip straight to line breaks (a `^`/lookbehind
# alternation would try every position: 3-4x slower). A match at index i of the padded text is
# the line starting at offset i of the original.
# Lines that can open a heading, a fenced code block or an HTML comment block (CommonMark: up to
# three spaces of indentation), with the rest of the line: one pass of one regex finds them all.
_INTERESTING_BODY = r" {0,3}(?:(#{1,6})(?=[ \t\r\n]|\Z)|(`{3,}|~{3,})|<!--)([^\r\n]*)"
# A literal "\n" first is what makes the engine fast (3x over a character class); files with
# lone CRs as line breaks (rare) take the class. The lookahead (the same first character the body
# needs) turns away the many lines that are plain text before the alternation is tried: -25%.
_FIRST = r"(?=[#`~<]| {1,3}[#`~<])"
_INTERESTING_LF = re.compile(r"\n" + _FIRST + _INTERESTING_BODY)
_INTERESTING_ANY = re.compile(r"[\r\n]" + _FIRST + _INTERESTING_BODY)
_LONE_CR = re.compile(r"\r(?!\n)")
_LINE_END = re.compile(r"\r\n|\n|\r")


class Heading(NamedTuple):
    """An ATX heading: `start` is the offset of its line, `body` the offset after its line ending."""

    level: int
    text: str
    start: int
    body: int


class Fence(NamedTuple):
    """A fenced code block: its opening line at `start`, content from `body` to `close` (the
    closing line's offset, or the end of the text when unclosed, then `closed` is False)."""

    start: int
    body: int
    close: int
    end: int
    info: str
    closed: bool


class Outline:
    """What `scan` found in `text`: headings and fences in document order, and the opaque spans
    (fences and comments, their delimiters included) sorted by start."""

    __slots__ = ("text", "headings", "fences", "opaque", "_opaque_starts")

    def __init__(self, text: str, headings: list[Heading] | None = None, fences: list[Fence] | None = None,
                 opaque: list[tuple[int, int]] | None = None, opaque_starts: list[int] | None = None):
        self.text = text
        self.headings = [] if headings is None else headings
        self.fences = [] if fences is None else fences
        self.opaque = [] if opaque is None else opaque
        self._opaque_starts = [s for s, _ in self.opaque] if opaque_starts is None else opaque_starts

    def __repr__(self) -> str:
        return f"Outline(headings={self.headings!r}, fences={self.fences!r}, opaque={self.opaque!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outline):
            return NotImplemented
        return (self.text, self.headings, self.fences, self.opaque) == (other.text, other.headings, other.fences, other.opaque)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def in_opaque(self, pos: int) -> bool:
        """True when `pos` lies inside a code fence or an HTML comment block (its delimiters too)."""
        i = bisect_right(self._opaque_starts, pos) - 1
        return i >= 0 and pos < self.opaque[i][1]

    def line_of(self, pos: int) -> int:
        """1-based line number of offset `pos`."""
        return line_number(self.text, pos)


def line_number(text: str, pos: int) -> int:
    """1-based line number of offset `pos` in `text` (CRLF, LF and CR endings)."""
    lines = text.count("\n", 0, pos) + 1
    if "\r" in text:  # a CR not followed by LF ends a line too
        lines += text.count("\r", 0, pos) - text.count("\r\n", 0, pos)
    return lines


def line_end(text: str, pos: int) -> int:
    """Offset just past the line ending of the line holding `pos` (or the end of the text)."""
    m = _LINE_END.search(text, pos)
    return m.end() if m else len(text)


def content_end(text: str, pos: int) -> int:
    """Offset of the line ending of the line holding `pos` (or the end of the text)."""
    m = _LINE_END.search(text, pos)
    return m.start() if m else len(text)


def newline_of(text: str) -> str:
    """The line ending the text uses (its first one), "\\n" when it has none."""
    m = _LINE_END.search(text)
    return m.group() if m else "\n"


def split_lines(text: str) -> list[str]:
    """Lines with their endings kept; ''.join(result) == text. Only CR, LF and CRLF end a line."""
    return re.findall(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+$", text)


@lru_cache(maxsize=None)
def _closer(breaks: str, char: str, length: int) -> re.Pattern:
    """The closing line of a fence opened by `length` times `char`."""
    return re.compile(breaks + r" {0,3}" + re.escape(char) + "{" + str(length) + r",}[ \t]*(?=[\r\n]|\Z)")


def heading_text(rest: str) -> str:
    """The text of an ATX heading from what follows its `#`s, without a closing `#` sequence."""
    content = rest.strip(" \t")
    if content.endswith("#"):
        bare = content.rstrip("#")
        if not bare:
            return ""
        if bare[-1] in " \t":
            content = bare
    return content.strip()


def scan(text: str) -> Outline:
    headings: list[Heading] = []
    fences: list[Fence] = []
    opaque: list[tuple[int, int]] = []
    opaque_starts: list[int] = []
    n = len(text)
    padded = "\n" + text
    cr = "\r" in text
    breaks = "[\r\n]" if cr and _LONE_CR.search(text) else "\n"
    pattern = _INTERESTING_LF if breaks == "\n" else _INTERESTING_ANY
    add_heading = headings.append
    new = tuple.__new__  # a NamedTuple without its Python-level __new__: the hot path of `list`
    skip_until = 0
    for m in pattern.finditer(padded):
        start, after = m.span()
        if start < skip_until:
            continue
        hashes, marker, rest = m.groups()
        # `after` is the offset of the line's break in `text`, plus one: past an LF or a lone CR
        if after > n:
            after = n
        elif cr and text.startswith("\r\n", after - 1):
            after += 1
        if hashes:
            title = rest.strip()
            if title.endswith("#"):
                title = heading_text(rest)
            add_heading(new(Heading, (len(hashes), title, start, after)))
        elif marker:
            if marker[0] == "`" and "`" in rest:
                continue  # a backtick "fence" with a backtick in its info string is inline code
            c = _closer(breaks, marker[0], len(marker)).search(padded, after)
            close = n if c is None else c.start()
            stop = n if c is None else line_end(text, close)
            fences.append(new(Fence, (start, after, close, stop, rest.strip(), c is not None)))
            opaque.append((start, stop))
            opaque_starts.append(start)
            skip_until = stop
        else:
            close = text.find("-->", start)  # "<!-->" closes itself (CommonMark)
            stop = n if close < 0 else line_end(text, close)
            opaque.append((start, stop))
            opaque_starts.append(start)
            skip_until = stop
    return Outline(text, headings, fences, opaque, opaque_starts)
