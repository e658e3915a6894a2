"""A lossless outline of any markdown text: where its headings are, and which spans are opaque.

Nothing here changes text. `scan(text)` finds ATX headings outside code fences and HTML comment
blocks, and keeps every position as a character offset into the original string, so that edits can
replace exactly the characters they must and leave every other byte as it was.

It is a line scanner, not a markdown parser: one regular expression finds the few lines that can
matter (headings, fence openers, comment openers), so a 3 KB file costs a handful of regex steps.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

# Where a line starts: CR, LF and CRLF all end a line (CommonMark), and re.M's `^` knows only LF.
_LINE_START = r"(?:^|(?<=\r))"
# Lines that can open a heading, a fenced code block or an HTML comment block (CommonMark: up to
# three spaces of indentation).
_INTERESTING = re.compile(_LINE_START + r" {0,3}(?:#{1,6}(?=[ \t\r\n]|$)|`{3,}|~{3,}|<!--)", re.M)
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))??(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")
_LINE_END = re.compile(r"\r\n|\n|\r")


@dataclass(frozen=True)
class Heading:
    """An ATX heading: `start` is the offset of its line, `body` the offset after its line ending."""

    level: int
    text: str
    start: int
    body: int


@dataclass(frozen=True)
class Fence:
    """A fenced code block: its opening line at `start`, content from `body` to `close` (the
    closing line's offset, or the end of the text when unclosed, then `closed` is False)."""

    start: int
    body: int
    close: int
    end: int
    info: str
    closed: bool


@dataclass
class Outline:
    text: str
    headings: list[Heading] = field(default_factory=list)
    fences: list[Fence] = field(default_factory=list)
    opaque: list[tuple[int, int]] = field(default_factory=list)  # fences and comments, sorted
    _opaque_starts: list[int] = field(default_factory=list)

    def in_opaque(self, pos: int) -> bool:
        """True when `pos` lies inside a code fence or an HTML comment block (its delimiters too)."""
        i = bisect.bisect_right(self._opaque_starts, pos) - 1
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


def scan(text: str) -> Outline:
    outline = Outline(text)
    pos = 0
    n = len(text)
    search = _INTERESTING.search
    while pos < n:
        m = search(text, pos)
        if m is None:
            break
        start = m.start()
        end_of_line = content_end(text, start)
        after = line_end(text, start)
        line = text[start:end_of_line]
        stripped = line.lstrip(" ")
        if stripped.startswith("#"):
            h = _HEADING.match(line)
            if h:
                outline.headings.append(Heading(len(h.group(1)), (h.group(2) or "").strip(), start, after))
            pos = after
        elif stripped.startswith("<!--"):
            close = text.find("-->", start)  # "<!-->" closes itself (CommonMark)
            stop = n if close < 0 else line_end(text, close)
            outline.opaque.append((start, stop))
            pos = stop
        else:
            fence = _FENCE.match(line)
            if fence is None or (fence.group(1)[0] == "`" and "`" in fence.group(2)):
                pos = after  # backtick "fence" with a backtick in its info string is inline code
                continue
            marker = fence.group(1)
            closer = re.compile(_LINE_START + r" {0,3}" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}[ \t]*(?=\r\n|\n|\r|\Z)", re.M)
            c = closer.search(text, after)
            stop = n if c is None else line_end(text, c.start())
            close = n if c is None else c.start()
            outline.fences.append(Fence(start, after, close, stop, fence.group(2).strip(), c is not None))
            outline.opaque.append((start, stop))
            pos = stop
    outline._opaque_starts = [s for s, _ in outline.opaque]
    return outline
