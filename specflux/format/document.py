"""A task-state file as text: find its parts, read them, and edit them without touching the rest.

`TaskDocument(text)` is pure: no disk, no locks. Every part is located by character offsets into the
original text; reading never normalises it, and each edit replaces only the characters it must, with
the file's own line endings. `str(doc)` is always the text it was built from.

The class is the one door; the work behind it lives beside it: regions.py (sections and heading
patterns), metadata.py (the JSON block), criteria.py (the task-list boxes), list_fields.py (what
`list` reads), edits.py (edits of the text), to_model.py (the model's values), fields.py
(`**Label:**` fields, list items, token usage).
"""

from __future__ import annotations

import bisect
import re
from typing import TYPE_CHECKING, Any, Iterator

from specflux.base.errors import ParseError
from specflux.format import edits
from specflux.format.criteria import find_criteria
from specflux.format.edits import Edit, apply_edits
from specflux.format.list_fields import read_list_fields
from specflux.format.metadata import Member, find_fence, read_members, read_metadata, value_edits
from specflux.format.outline import Heading, Outline, content_end, line_number, newline_of, scan
from specflux.format.regions import (
    ARCHIVED,
    LINE_BREAK,
    PLACEHOLDER,
    SECTION_KEYS,
    SECTION_TITLES,
    SESSION,
    TITLE,
    Region,
    normalise_heading,
    region_ends,
)

if TYPE_CHECKING:
    from specflux.format.model import ArchivedSummary, ChainInput, ChainOutput, Criterion, Session, TaskState

BOM = "\ufeff"


class cached_property:
    """functools.cached_property without the lock Python 3.11 takes on each first read (`list`
    reads a handful of these per file; a document is not shared between threads)."""

    def __init__(self, func):
        self.func = func
        self.attrname = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner, name: str) -> None:
        self.attrname = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.attrname] = self.func(instance)
        return value


class TaskDocument:
    def __init__(self, text: str, path: str | None = None):
        self.text = text
        self.path = path
        # A UTF-8 byte-order mark is read, not reported as "no title": scan a same-length copy in
        # which it is a space (one space of indentation still opens a heading), so every offset holds.
        self.outline: Outline = scan(" " + text[1:] if text.startswith(BOM) else text)
        self.newline = newline_of(text)
        self.sections: dict[str, Region] = {}
        self.duplicate_sections: list[tuple[str, Heading]] = []  # a second `## Progress Log`, ...
        headings = self.outline.headings
        self.ends = region_ends(headings, len(text))  # where each heading's region ends, by index
        self.title_heading = next((h for h in headings if h.level == 1), None)
        for i, h in enumerate(headings):
            if h.level == 2:
                key = SECTION_KEYS.get(normalise_heading(h.text))
                if key and key not in self.sections:
                    self.sections[key] = Region(h, self.ends[i])
                elif key:
                    self.duplicate_sections.append((key, h))

    def __str__(self) -> str:
        return self.text

    # ----------------------------------------------------------------- structure

    def subsections(self, region: Region | None, level: int = 3) -> Iterator[Region]:
        """The headings of `level` inside `region`, each with the text it owns."""
        if region is None:
            return
        headings, ends = self.outline.headings, self.ends
        i = bisect.bisect_right(self._starts, region.start)
        while i < len(headings) and headings[i].start < region.end:
            if headings[i].level == level:
                yield Region(headings[i], min(ends[i], region.end))
            i += 1

    @cached_property
    def _starts(self) -> list[int]:
        return [h.start for h in self.outline.headings]

    def find_subsection(self, region: Region | None, name: str) -> Region | None:
        return next((r for r in self.subsections(region) if normalise_heading(r.heading.text) == name), None)

    def error(self, message: str, pos: int | None = None, line: int | None = None) -> ParseError:
        if line is None and pos is not None:
            line = line_number(self.text, pos)
        return ParseError(message, self.path, line)

    def unclosed(self) -> list[tuple[str, int]]:
        """Code fences and HTML comments that are never closed, as (what, offset): each one turns
        the rest of the file into code or a comment, hiding every heading after it."""
        out = []
        for start, stop in self.outline.opaque:
            if stop < len(self.text):
                continue
            fence = next((f for f in self.outline.fences if f.start == start), None)
            if fence is not None and not fence.closed:
                out.append(("code fence", start))
            elif fence is None and "-->" not in self.text[start:]:
                out.append(("HTML comment", start))
        return out

    def hidden_by(self, pos: int) -> ParseError | None:
        """Why text written at `pos` would not be seen, or None: an unclosed fence or comment
        that starts before it swallows it."""
        for what, start in self.unclosed():
            if start <= pos:
                close = "```" if what == "code fence" else "-->"
                return self.error(f"the {what} opened here is never closed, so anything written after it "
                                  f"would be hidden; close it ({close}) and try again", start)
        return None

    def duplicate_keys(self) -> list[tuple[str, int]]:
        """Metadata keys written twice at the top level, as (key, offset of the later one)."""
        seen: set[str] = set()
        out = []
        for m in self.members:
            if m.key in seen:
                out.append((m.key, m.key_start))
            seen.add(m.key)
        return out

    def body_text(self, region: Region | None) -> str:
        """What the region holds below its heading, read as a value: line endings become "\\n"."""
        return "" if region is None else LINE_BREAK.sub("\n", self.text[region.body : region.end])

    # ----------------------------------------------------------------- title

    @cached_property
    def title(self) -> tuple[str | None, str]:
        """(id written in the title or None, title text)."""
        h = self.title_heading
        if h is None:
            raise self.error("no title: the first heading should be `# Task #<id>: <title>`", line=1)
        m = TITLE.match(h.text)
        if m and m.group(2) is not None:
            return m.group(1), m.group(2).strip()
        return None, h.text

    def set_title(self, title: str) -> str:
        """The text with the title replaced on its heading line (`# Task #<id>: ` and the line
        ending stay as they are)."""
        self.title  # noqa: B018 - no title heading is an error
        h = self.title_heading
        line = self.text[h.start : content_end(self.text, h.start)]
        m = re.match(r"^(\ufeff?[ ]{0,3}#[ \t]+task\s*#?\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*[:\-–—][ \t]*)", line, re.I)
        prefix = m.group(1) if m else line[: len(line) - len(line.lstrip("\ufeff #\t"))]
        return apply_edits(self.text, [Edit(h.start + len(prefix), h.start + len(line), title)])

    # ----------------------------------------------------------------- metadata (metadata.py)

    @cached_property
    def metadata_fence(self):
        return find_fence(self.sections.get("metadata"), self.outline.fences, self.error)

    @cached_property
    def metadata(self) -> dict[str, Any]:
        """The JSON block, validated enough that every command can rely on it."""
        return read_metadata(self.text, self.metadata_fence, self.error)

    @cached_property
    def members(self) -> list[Member]:
        """Top-level keys of the metadata object with their offsets in the file."""
        return read_members(self.text, self.metadata_fence)

    @property
    def status(self) -> str:
        return self.metadata["status"]

    @property
    def dependencies(self) -> list[str]:
        return [str(d) for d in self.metadata.get("dependencies", [])]

    # ----------------------------------------------------------------- context

    @cached_property
    def criteria_region(self) -> Region | None:
        found = self.find_subsection(self.sections.get("context"), "acceptance criteria")
        if found is None:  # tolerate the list under another parent heading
            for i, h in enumerate(self.outline.headings):
                if h.level >= 2 and normalise_heading(h.text) == "acceptance criteria":
                    return Region(h, self.ends[i])
        return found

    @cached_property
    def criteria_lines(self) -> list[tuple[int, int, bool, str, int]]:
        """(index, offset of the box character, checked, text, depth) per task-list item."""
        return find_criteria(self.text, self.outline, self.criteria_region)

    # ----------------------------------------------------------------- progress log

    @cached_property
    def session_regions(self) -> list[tuple[int, str | None, Region]]:
        out = []
        for r in self.subsections(self.sections.get("progress")):
            m = SESSION.match(r.heading.text)
            if m:
                out.append((int(m.group(1)), m.group(2).strip() or None, r))
        return out

    @cached_property
    def archived_region(self) -> tuple[int, int, Region] | None:
        for r in self.subsections(self.sections.get("progress")):
            m = ARCHIVED.match(r.heading.text)
            if m:
                return int(m.group(1)), int(m.group(2)), r
        return None

    @property
    def session_count(self) -> int:
        """Sessions the log accounts for: the archived range plus the sessions kept in full."""
        archived = self.archived_region
        return len(self.session_regions) + (archived[1] - archived[0] + 1 if archived else 0)

    @property
    def last_session_number(self) -> int:
        numbers = [n for n, _, _ in self.session_regions]
        if self.archived_region:
            numbers.append(self.archived_region[1])
        return max(numbers, default=0)

    def list_fields(self) -> tuple[str, list[str], int, int, int]:
        """What `list` shows besides the title: (status, dependencies, criteria done, criteria
        total, sessions), the values of `status`, `dependencies`, `criteria_lines` and
        `session_count` read in one pass over the headings (list_fields.py)."""
        return read_list_fields(self)

    # ----------------------------------------------------------------- chain output

    @cached_property
    def chain_output_is_placeholder(self) -> bool:
        body = self.body_text(self.sections.get("chain_output")).strip()
        return not body or bool(PLACEHOLDER.fullmatch(body))

    # ----------------------------------------------------------------- the model (to_model.py)
    # (imported where first asked for: `list`, and a worker on its way to its first agent, read no model)

    def to_state(self, task_id: str | None = None) -> "TaskState":
        from specflux.format import to_model

        return to_model.to_state(self, task_id)

    def criteria(self) -> list["Criterion"]:
        from specflux.format import to_model

        return to_model.criteria(self)

    def sessions(self) -> list["Session"]:
        from specflux.format import to_model

        return to_model.sessions(self)

    def archived_summary(self) -> "ArchivedSummary | None":
        from specflux.format import to_model

        return to_model.archived_summary(self)

    def chain_inputs(self) -> list["ChainInput"]:
        from specflux.format import to_model

        return to_model.chain_inputs(self)

    def chain_output(self) -> "ChainOutput | None":
        from specflux.format import to_model

        return to_model.chain_output(self)

    # ----------------------------------------------------------------- edits (edits.py)

    def check(self, index: int, checked: bool) -> str:
        """The text with acceptance criterion `index` (1-based) ticked or unticked."""
        return self.check_many([index], checked)[0]

    def check_many(self, indices, checked: bool) -> tuple[str, list[int]]:
        """The text with every criterion in `indices` ticked (or unticked), in one pass, and the
        indices whose box actually changed. A bad index changes nothing."""
        items = self.criteria_lines
        for index in indices:
            if not 1 <= index <= len(items):
                where = self.criteria_region.start if self.criteria_region else None
                raise self.error(f"no acceptance criterion {index} (the task has {len(items)})", where)
        changed = sorted({i for i in indices if items[i - 1][2] != checked})
        mark = "x" if checked else " "
        ticks = [Edit(items[i - 1][1], items[i - 1][1] + 1, mark) for i in changed]
        return (apply_edits(self.text, ticks) if ticks else self.text), changed

    def metadata_edits(self, updates: dict[str, Any]) -> list[Edit]:
        """Edits that set top-level metadata keys, rewriting only their values; new keys go last."""
        return value_edits(self.text, self.metadata_fence, self.members, self.newline, updates)

    def set_metadata(self, updates: dict[str, Any]) -> str:
        return apply_edits(self.text, self.metadata_edits(updates))

    def append_to_section(self, key: str, block: str) -> Edit:
        """An edit that adds `block` at the end of section `key` (created in its place if missing).

        A section whose only content is a placeholder line such as `(No sessions yet)` has that
        line replaced by the block.
        """
        region = self.sections.get(key)
        if region is None:
            return edits.new_section(self, key, block)
        return edits.append_to_region(self, region, block)

    def append_to_region(self, region: Region, block: str) -> Edit:
        return edits.append_to_region(self, region, block)

    def replace_content(self, region: Region, block: str) -> Edit:
        """An edit that replaces everything the region holds below its heading (not the blank
        lines that separate it from the next heading) with `block`."""
        return edits.replace_content(self, region, block)

    def chain_output_edits(self, summary: str, downstream: str | None) -> list[Edit]:
        """Edits that write `### Summary`, and `### For Downstream Tasks` when given, into the
        Chain Output, keeping every other subsection and any text a person wrote there."""
        return edits.chain_output_edits(self, summary, downstream)

    def section_heading_for(self, key: str) -> str:
        return self.sections[key].heading.text if key in self.sections else SECTION_TITLES.get(key, key)


class Parses:
    """The last TaskDocument parsed from each file (up to KEPT files, the oldest dropped first):
    the same text parses the same, and a document is never changed once made (its edits make
    new text), so a reader holding one may hand it out again for a file whose text is unchanged."""

    KEPT = 256

    def __init__(self) -> None:
        self._docs: dict[Any, TaskDocument] = {}

    def of(self, key: Any, text: str, path: str | None) -> TaskDocument | None:
        known = self._docs.get(key)
        return known if known is not None and known.text == text and known.path == path else None

    def keep(self, key: Any, doc: TaskDocument) -> TaskDocument:
        if len(self._docs) >= self.KEPT and key not in self._docs:
            try:
                del self._docs[next(iter(self._docs))]
            except (RuntimeError, KeyError, StopIteration):  # another thread's keep meanwhile (lanes)
                self._docs.clear()
        self._docs[key] = doc
        return doc
