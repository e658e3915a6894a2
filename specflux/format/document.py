"""A task-state file as text: find its parts, read them, and edit them without touching the rest.

`TaskDocument(text)` is pure: no disk, no locks. Every part is located by character offsets into the
original text; reading never normalises it, and each edit replaces only the characters it must, with
the file's own line endings. `str(doc)` is always the text it was built from.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from json.decoder import scanstring
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

from specflux.base.errors import ParseError
from specflux.format.outline import Heading, Outline, content_end, line_end, line_number, newline_of, scan

if TYPE_CHECKING:
    from specflux.format.model import ArchivedSummary, ChainInput, ChainOutput, Criterion, Session, TaskState

BOM = "\ufeff"
STATUSES = ("pending", "in_progress", "review", "complete", "failed", "blocked")

_SECTION_KEYS = {
    "metadata": "metadata",
    "context": "context",
    "chain inputs": "chain_inputs",
    "chain input": "chain_inputs",
    "progress log": "progress",
    "progress": "progress",
    "chain output": "chain_output",
}
_SECTION_NUMBERS = {"metadata": 0, "context": 1, "chain_inputs": 2, "progress": 3, "chain_output": 4}
_SECTION_TITLES = {"chain_inputs": "Chain Inputs", "progress": "Progress Log", "chain_output": "Chain Output"}
_NUMBERED = re.compile(r"^\d+(?:\.\d+)*[.):]?\s+")
_TITLE = re.compile(r"^task\s*#?\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:[:\-–—]\s*(.*))?$", re.I)
_SESSION = re.compile(r"^session\s*#?\s*(\d+)\b\s*(?:[-–—:,]\s*)?(.*)$", re.I)
_ARCHIVED = re.compile(r"^archived\s+summary\s*\(\s*sessions?\s*(\d+)\s*[-–—]\s*(\d+)\s*\)", re.I)
_FROM_TASK = re.compile(r"^from\s+task\s*#?\s*([A-Za-z0-9][A-Za-z0-9._-]*?)\s*(?:[:\-–—]\s*(.*))?$", re.I)
# Matched from the line break before the line (see outline.py): search from region.body - 1.
_CHECKBOX_BODY = r"([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+\[([ xX])\](?=[ \t\r\n]|\Z)[ \t]*([^\r\n]*)"
_CHECKBOX = re.compile(r"[\n\r]" + _CHECKBOX_BODY)
_CHECKBOX_LF = re.compile(r"\n" + _CHECKBOX_BODY)  # the same for text without a CR: a literal first is 2x faster
_LABEL = re.compile(r"^[ \t]*\*\*([A-Za-z][A-Za-z ]*?)\s*:?\s*\*\*\s*:?[ \t]*(.*)$")
_BULLET = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(.*)$")
_PLACEHOLDER = re.compile(r"\([^\r\n]*\)")
_LINK = re.compile(r"\[(?:Full details:\s*)?([^\]]+)\](?:\(([^)]+)\))?")
_WS = re.compile(r"[ \t\r\n]*")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # as in file names (CONTRACT section 1)
_SHA = re.compile(r"\b[0-9a-f]{7,64}\b")
_LINE_BREAK = re.compile(r"\r\n|\n|\r")  # only these end a line: not U+2028, \x0c or \x85 (str.splitlines)


def _region_ends(headings: list[Heading], length: int) -> list[int]:
    """For each heading, where the text it owns ends: at the next heading of its level or higher."""
    ends = [length] * len(headings)
    open_: list[int] = []
    for i, h in enumerate(headings):
        while open_ and headings[open_[-1]].level >= h.level:
            ends[open_.pop()] = h.start
        open_.append(i)
    return ends


@lru_cache(maxsize=4096)
def normalise_heading(text: str) -> str:
    """`3. Progress Log` -> `progress log`: numbers, case, colons and extra spaces do not matter."""
    return " ".join(_NUMBERED.sub("", text.strip()).rstrip(":").split()).lower()


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


class Region(NamedTuple):
    """A heading and the text it owns, up to the next heading of the same or a higher level."""

    heading: Heading
    end: int

    @property
    def start(self) -> int:
        return self.heading.start

    @property
    def body(self) -> int:
        return self.heading.body


@dataclass(frozen=True)
class Member:
    """A top-level key of the metadata object, with the offsets of its key and value."""

    key: str
    value: Any
    key_start: int
    value_start: int
    value_end: int


@dataclass(frozen=True)
class Edit:
    start: int
    end: int
    text: str


def apply_edits(text: str, edits: list[Edit]) -> str:
    """Replace each edit's span; spans must not overlap."""
    out, pos = [], 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        if e.start < pos:
            raise ValueError("overlapping edits")
        out.append(text[pos:e.start])
        out.append(e.text)
        pos = e.end
    out.append(text[pos:])
    return "".join(out)


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
        self._ends = _region_ends(headings, len(text))
        self.title_heading = next((h for h in headings if h.level == 1), None)
        for i, h in enumerate(headings):
            if h.level == 2:
                key = _SECTION_KEYS.get(normalise_heading(h.text))
                if key and key not in self.sections:
                    self.sections[key] = Region(h, self._ends[i])
                elif key:
                    self.duplicate_sections.append((key, h))

    def __str__(self) -> str:
        return self.text

    # ----------------------------------------------------------------- structure

    def subsections(self, region: Region | None, level: int = 3) -> Iterator[Region]:
        """The headings of `level` inside `region`, each with the text it owns."""
        if region is None:
            return
        headings, ends = self.outline.headings, self._ends
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
        return "" if region is None else _LINE_BREAK.sub("\n", self.text[region.body : region.end])

    # ----------------------------------------------------------------- title

    @cached_property
    def title(self) -> tuple[str | None, str]:
        """(id written in the title or None, title text)."""
        h = self.title_heading
        if h is None:
            raise self.error("no title: the first heading should be `# Task #<id>: <title>`", line=1)
        m = _TITLE.match(h.text)
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

    # ----------------------------------------------------------------- metadata

    @cached_property
    def metadata_fence(self):
        region = self.sections.get("metadata")
        if region is None:
            raise self.error("no `## 0. Metadata` section with a ```json block", line=1)
        fence = None
        for f in self.outline.fences:  # the first one in the section (a loop: `list` reads thousands)
            if f.start >= region.body:
                fence = f if f.start < region.end else None
                break
        if fence is None:
            raise self.error("the Metadata section has no ```json block", region.start)
        if not fence.closed:
            raise self.error("the metadata ```json block is never closed", fence.start)
        return fence

    @cached_property
    def metadata(self) -> dict[str, Any]:
        """The JSON block, validated enough that every command can rely on it."""
        fence = self.metadata_fence
        source = self.text[fence.body : fence.close]
        try:
            data = json.loads(source)
        except json.JSONDecodeError as e:
            at = fence.body + e.pos  # json counts only LF as a line end: place the error ourselves
            column = at - max(self.text.rfind("\n", 0, at), self.text.rfind("\r", 0, at))
            raise self.error(f"metadata is not valid JSON: {e.msg} (column {column})", at) from None
        except RecursionError:
            raise self.error("metadata nests too deeply to read (keep it to a few levels)", fence.body) from None
        except ValueError:  # an integer past Python's digit limit (4300 by default)
            long = re.search(r"\d{4000,}", source)
            at = fence.body + (long.start() if long else 0)
            digits = f"a number of {len(long.group())} digits" if long else "a number"
            raise self.error(f"metadata holds {digits}, too long to read; shorten it or write it as a string", at) from None
        if not isinstance(data, dict):
            raise self.error("metadata must be a JSON object", fence.body)
        self._check_metadata(data)
        return data

    def _check_metadata(self, data: dict[str, Any]) -> None:
        def at(key: str) -> int:
            m = next((m for m in self.members if m.key == key), None)
            return m.key_start if m else self.metadata_fence.start

        if "status" not in data:
            raise self.error("metadata has no \"status\"", self.metadata_fence.start)
        status = data["status"]
        if status not in STATUSES:
            raise self.error(f"unknown status {status!r} (expected one of: {', '.join(STATUSES)})", at("status"))
        task_id = data.get("task_id")
        if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, (int, str))):
            raise self.error("\"task_id\" must be a number or a string", at("task_id"))
        deps = data.get("dependencies", [])
        if not isinstance(deps, list) or any(isinstance(d, bool) or not isinstance(d, (int, str)) for d in deps):
            raise self.error("\"dependencies\" must be a list of task ids", at("dependencies"))
        bad = [d for d in deps if not _ID.fullmatch(str(d))]
        if bad:
            raise self.error(f"\"dependencies\" holds {bad[0]!r}, which is not a task id "
                             "(letters, digits, '.', '_' or '-')", at("dependencies"))
        if task_id is not None and str(task_id) in (str(d) for d in deps):
            raise self.error(f"task {task_id} depends on itself; remove {task_id} from \"dependencies\"", at("dependencies"))
        total = data.get("total_sessions", 0)
        if isinstance(total, bool) or not isinstance(total, int):
            raise self.error("\"total_sessions\" must be a whole number", at("total_sessions"))

    @cached_property
    def members(self) -> list[Member]:
        """Top-level keys of the metadata object with their offsets in the file."""
        fence = self.metadata_fence
        src, decoder, out = self.text, json.JSONDecoder(), []
        i = _WS.match(src, fence.body).end() + 1  # past "{"
        i = _WS.match(src, i).end()
        while i < fence.close and src[i] == '"':
            key, after = scanstring(src, i + 1)
            colon = _WS.match(src, after).end()
            value_start = _WS.match(src, colon + 1).end()
            value, value_end = decoder.raw_decode(src, value_start)
            out.append(Member(key, value, i, value_start, value_end))
            i = _WS.match(src, value_end).end()
            if src[i] == ",":
                i = _WS.match(src, i + 1).end()
        return out

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
                    return Region(h, self._ends[i])
        return found

    @cached_property
    def criteria_lines(self) -> list[tuple[int, int, bool, str, int]]:
        """(index, offset of the box character, checked, text, depth) per task-list item."""
        region = self.criteria_region
        if region is None:
            return []
        out, indents = [], []
        for m in _CHECKBOX.finditer(self.text, region.body - 1, region.end):
            if self.outline.in_opaque(m.start() + 1):
                continue
            indent = len(m.group(1).expandtabs(4))
            while indents and indents[-1] >= indent:
                indents.pop()
            out.append((len(out) + 1, m.start(2), m.group(2) != " ", m.group(3).rstrip(), len(indents)))
            indents.append(indent)
        return out

    def _field(self, label: str) -> str | None:
        context = self.sections.get("context")
        if context is None:
            return None
        m = re.search(r"(?:^|(?<=\r))[ \t]*\*\*" + label + r"\s*:?\*\*:?[ \t]*([^\r\n]*)", self.text[context.body : context.end], re.M | re.I)
        return m.group(1).strip() if m else None

    # ----------------------------------------------------------------- progress log

    @cached_property
    def session_regions(self) -> list[tuple[int, str | None, Region]]:
        out = []
        for r in self.subsections(self.sections.get("progress")):
            m = _SESSION.match(r.heading.text)
            if m:
                out.append((int(m.group(1)), m.group(2).strip() or None, r))
        return out

    @cached_property
    def archived_region(self) -> tuple[int, int, Region] | None:
        for r in self.subsections(self.sections.get("progress")):
            m = _ARCHIVED.match(r.heading.text)
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
        `session_count` read in one pass over the headings. `list` reads every file, and those
        properties cost twice as much (regions, generators, each criterion's text and depth)."""
        meta = self.metadata
        context, progress = self.sections.get("context"), self.sections.get("progress")
        c_start, c_end = (context.start, context.end) if context else (-1, -1)
        p_start, p_end = (progress.start, progress.end) if progress else (-1, -1)
        criteria = None  # (body, end) of the acceptance criteria
        sessions, archived = 0, None
        for i, h in enumerate(self.outline.headings):
            if h.level != 3:
                continue
            if c_start < h.start < c_end:
                if criteria is None and normalise_heading(h.text) == "acceptance criteria":
                    criteria = (h.body, min(self._ends[i], c_end))
            elif p_start < h.start < p_end:
                if _SESSION.match(h.text):
                    sessions += 1
                elif archived is None and (m := _ARCHIVED.match(h.text)):
                    archived = int(m.group(2)) - int(m.group(1)) + 1
        if criteria is None and self.criteria_region is not None:  # the list under another heading
            criteria = (self.criteria_region.body, self.criteria_region.end)
        done = total = 0
        if criteria is not None:
            body, end = criteria
            hidden = any(a < end and b > body for a, b in self.outline.opaque)  # a fence or comment among them
            boxes = _CHECKBOX if "\r" in self.text else _CHECKBOX_LF
            for m in boxes.finditer(self.text, body - 1, end):
                if not (hidden and self.outline.in_opaque(m.start() + 1)):
                    total += 1
                    done += m.group(2) != " "
        dependencies = [str(d) for d in meta.get("dependencies", [])]
        return meta["status"], dependencies, done, total, sessions + (archived or 0)

    # ----------------------------------------------------------------- chain output

    @cached_property
    def chain_output_is_placeholder(self) -> bool:
        body = self.body_text(self.sections.get("chain_output")).strip()
        return not body or bool(_PLACEHOLDER.fullmatch(body))

    # ----------------------------------------------------------------- the model

    def to_state(self, task_id: str | None = None) -> "TaskState":
        from specflux.format.model import TaskState

        written_id, title = self.title
        meta = self.metadata
        return TaskState(
            id=task_id or str(meta.get("task_id", written_id or "")),
            title=title,
            metadata=meta,
            status=meta["status"],
            dependencies=self.dependencies,
            epic=self._field("Epic"),
            repository=self._field("Repository"),
            requirements=self.body_text(self.find_subsection(self.sections.get("context"), "requirements")).strip(),
            criteria=self.criteria(),
            chain_inputs=self.chain_inputs(),
            archived_summary=self.archived_summary(),
            sessions=self.sessions(),
            chain_output=self.chain_output(),
        )

    def criteria(self) -> list["Criterion"]:
        from specflux.format.model import Criterion

        return [
            Criterion(index=i, text=text, checked=checked, line=line_number(self.text, box), depth=depth)
            for i, box, checked, text, depth in self.criteria_lines
        ]

    def sessions(self) -> list["Session"]:
        from specflux.format.model import Session

        out = []
        for number, stamp, region in self.session_regions:
            fields = labelled_fields(self.body_text(region))
            did_lines = fields.get("did", [])
            out.append(
                Session(
                    number=number,
                    timestamp=stamp,
                    did=bullet_items(did_lines),
                    issues=plain(fields.get("issues", [])),
                    next=plain(fields.get("next", [])),
                    line=line_number(self.text, region.start),
                    usage=parse_usage(plain(fields.get("usage", []))),
                )
            )
        return out

    def archived_summary(self) -> "ArchivedSummary | None":
        from specflux.format.model import ArchivedSummary

        if self.archived_region is None:
            return None
        first, last, region = self.archived_region
        body = self.body_text(region)
        fields = labelled_fields(body)
        link = _LINK.search("\n".join(line for line in body.split("\n") if "**" not in line))
        commits = plain(fields.get("commits", []))
        return ArchivedSummary(
            first=first,
            last=last,
            duration=plain(fields.get("duration", [])),
            accomplishments=plain(fields.get("accomplishments", [])),
            commits=_SHA.findall(commits),
            more_commits=int(more.group(1)) if (more := re.search(r"\((\d+) more\)", commits)) else 0,
            archive=(link.group(2) or link.group(1)).strip() if link else None,
            line=line_number(self.text, region.start),
        )

    def chain_inputs(self) -> list["ChainInput"]:
        from specflux.format.model import ChainInput

        out = []
        for region in self.subsections(self.sections.get("chain_inputs")):
            m = _FROM_TASK.match(region.heading.text)
            if not m:
                continue
            quoted = [re.sub(r"^[ \t]*>[ ]?", "", ln) for ln in self.body_text(region).split("\n") if ln.lstrip().startswith(">")]
            out.append(
                ChainInput(
                    task_id=m.group(1),
                    title=(m.group(2) or "").strip(),
                    body="\n".join(quoted).strip(),
                    line=line_number(self.text, region.start),
                )
            )
        return out

    def chain_output(self) -> "ChainOutput | None":
        from specflux.format.model import ChainOutput

        region = self.sections.get("chain_output")
        if region is None or self.chain_output_is_placeholder:
            return None
        summary = self.find_subsection(region, "summary")
        downstream = self.find_subsection(region, "for downstream tasks")
        return ChainOutput(
            summary=self.body_text(summary).strip(),
            downstream=self.body_text(downstream).strip(),
            body=self.body_text(region).strip(),
        )

    # ----------------------------------------------------------------- edits

    def _lines(self, block: str) -> str:
        return block.replace("\n", self.newline)

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
        edits = [Edit(items[i - 1][1], items[i - 1][1] + 1, mark) for i in changed]
        return (apply_edits(self.text, edits) if edits else self.text), changed

    def metadata_edits(self, updates: dict[str, Any]) -> list[Edit]:
        """Edits that set top-level metadata keys, rewriting only their values; new keys go last."""
        fence, edits = self.metadata_fence, []
        members = {m.key: m for m in self.members}
        new = []
        for key, value in updates.items():
            encoded = json.dumps(value, ensure_ascii=False)
            if key in members:
                m = members[key]
                if m.value != value or type(m.value) is not type(value):
                    edits.append(Edit(m.value_start, m.value_end, encoded))
            else:
                new.append(f"{json.dumps(key)}: {encoded}")
        if new:
            last = self.members[-1] if self.members else None
            if last is None:
                brace = self.text.index("{", fence.body)
                edits.append(Edit(brace + 1, brace + 1, " " + ", ".join(new) + " "))
            elif "\n" in self.text[fence.body : last.key_start] and self.text.count("\n", last.value_end, fence.close) > 1:
                line_start = self.text.rfind("\n", 0, last.key_start) + 1
                indent = self.text[line_start : last.key_start]
                sep = "," + self.newline + indent
                edits.append(Edit(last.value_end, last.value_end, sep + sep.join(new)))
            else:
                edits.append(Edit(last.value_end, last.value_end, ", " + ", ".join(new)))
        return edits

    def set_metadata(self, updates: dict[str, Any]) -> str:
        return apply_edits(self.text, self.metadata_edits(updates))

    def append_to_section(self, key: str, block: str) -> Edit:
        """An edit that adds `block` at the end of section `key` (created in its place if missing).

        A section whose only content is a placeholder line such as `(No sessions yet)` has that
        line replaced by the block.
        """
        region = self.sections.get(key)
        if region is None:
            return self._new_section(key, block)
        return self.append_to_region(region, block)

    def append_to_region(self, region: Region, block: str) -> Edit:
        text, nl = self.text, self.newline
        block = self._lines(block)
        body = text[region.body : region.end]
        stripped = body.strip()
        if _PLACEHOLDER.fullmatch(stripped) and region.heading.level == 2:
            start = region.body + body.index(stripped)
            return Edit(start, start + len(stripped), block)
        content = body.rstrip(" \t\r\n")
        at = line_end(text, region.body + len(content) - 1) if content else region.body
        prefix = nl if at == len(text) and not text.endswith(("\n", "\r")) else ""
        suffix = nl if at < len(text) and text[at] not in "\r\n" else ""
        return Edit(at, at, prefix + nl + block + nl + suffix)

    def replace_content(self, region: Region, block: str) -> Edit:
        """An edit that replaces everything the region holds below its heading (not the blank
        lines that separate it from the next heading) with `block`."""
        body = self.text[region.body : region.end]
        content = body.rstrip(" \t\r\n")
        if not content.strip():
            return self.append_to_region(region, block)
        lead = len(body) - len(body.lstrip("\r\n"))
        start = region.body + lead
        return Edit(start, content_end(self.text, region.body + len(content) - 1), self._lines(block))

    def chain_output_edits(self, summary: str, downstream: str | None) -> list[Edit]:
        """Edits that write `### Summary`, and `### For Downstream Tasks` when `downstream` is
        given (or the subsection is missing), into the Chain Output. Every other subsection
        (`### Files Created`, `### Integration Notes`, ...) and any text a person wrote there stays."""
        from specflux.format.render import inert, render_chain_output

        region = self.sections.get("chain_output")
        if region is None:
            return [self.append_to_section("chain_output", render_chain_output(summary, downstream or ""))]
        if self.chain_output_is_placeholder:
            return [self.replace_content(region, render_chain_output(summary, downstream or ""))]
        summary_body = inert(summary) or "(no summary)"
        down_body = inert(downstream or "") or "None"
        summary_region = self.find_subsection(region, "summary")
        down_region = self.find_subsection(region, "for downstream tasks")
        edits, added = [], []
        if summary_region is not None:
            edits.append(self.replace_content(summary_region, summary_body))
        else:
            added.append(f"### Summary\n{summary_body}")
        if down_region is not None:
            if downstream is not None:
                edits.append(self.replace_content(down_region, down_body))
        else:
            added.append(f"### For Downstream Tasks\n{down_body}")
        if not added:
            return edits
        nl, block = self.newline, self._lines("\n\n".join(added))
        first_sub = next(self.subsections(region), None)
        if summary_region is not None:  # the downstream part goes right after the summary
            at = self._after_content(summary_region)
            edits.append(Edit(at, at, nl + nl + block))
        elif first_sub is not None:  # before the first subsection, after any free text
            edits.append(Edit(first_sub.start, first_sub.start, block + nl + nl))
        else:
            edits.append(self.append_to_region(region, "\n\n".join(added)))
        return edits

    def _after_content(self, region: Region) -> int:
        """The offset of the line ending of the region's last non-blank line."""
        body = self.text[region.start : region.end].rstrip(" \t\r\n")
        return content_end(self.text, region.start + len(body) - 1)

    def _new_section(self, key: str, block: str) -> Edit:
        """A new `## N. Title` section placed between its neighbours by number."""
        numbered = any(_NUMBERED.match(r.heading.text) for r in self.sections.values())
        title = _SECTION_TITLES[key]
        heading = f"## {_SECTION_NUMBERS[key]}. {title}" if numbered else f"## {title}"
        later = [r for k, r in self.sections.items() if _SECTION_NUMBERS[k] > _SECTION_NUMBERS[key]]
        nl = self.newline
        section = self._lines(f"{heading}\n\n{block}\n")
        if later:
            at = min(r.start for r in later)
            return Edit(at, at, section + nl)
        text = self.text
        prefix = "" if text.endswith(("\n", "\r")) else nl
        return Edit(len(text), len(text), prefix + nl + section)

    def section_heading_for(self, key: str) -> str:
        return self.sections[key].heading.text if key in self.sections else _SECTION_TITLES.get(key, key)


# --------------------------------------------------------------------- small readers


def labelled_fields(body: str) -> dict[str, list[str]]:
    """Lines under `**Label:**` markers, by lower-case label; an inline value is the first line."""
    fields: dict[str, list[str]] = {}
    current = None
    for line in _LINE_BREAK.split(body):
        m = _LABEL.match(line)
        if m:
            current = m.group(1).strip().lower()
            fields[current] = [m.group(2)] if m.group(2).strip() else []
        elif current is not None:
            fields[current].append(line)
    return fields


def bullet_items(lines: list[str]) -> list[str]:
    """List items (and a leading inline text) as strings; continuation lines join their item."""
    items: list[str] = []
    for line in lines:
        m = _BULLET.match(line)
        if m:
            items.append(m.group(2).strip())
        elif line.strip():
            if items and line[:1] in " \t":
                items[-1] = f"{items[-1]} {line.strip()}"
            else:
                items.append(line.strip())
    return items


_USAGE_PART = re.compile(r"([\d,]+)\s*(input|output|cache-read|cache-write)")
_USAGE_KEYS = {"input": "input_tokens", "output": "output_tokens",
               "cache-read": "cache_read_input_tokens", "cache-write": "cache_creation_input_tokens"}


def parse_usage(text: str) -> dict[str, int] | None:
    """`**Usage:** 1200 input, 340 output, 900 cache-read, 0 cache-write tokens` as numbers."""
    return {_USAGE_KEYS[k]: int(v.replace(",", "")) for v, k in _USAGE_PART.findall(text)} or None


def format_usage(input_tokens: int, output_tokens: int, cache_read: int, cache_write: int = 0) -> str:
    """The session's token counts for its progress-log entry (wall-clock time goes in the commit)."""
    return f"{input_tokens} input, {output_tokens} output, {cache_read} cache-read, {cache_write} cache-write tokens"


def plain(lines: list[str]) -> str:
    return "\n".join(line.rstrip() for line in lines).strip()
