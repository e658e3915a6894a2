"""The parts of a task file by their headings: which `##` titles name which section, the patterns of
the headings inside them (the title, sessions, an archived summary, chain inputs), and `Region`, a
heading with the text it owns.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from specflux.format.outline import Heading

# `## ...` titles (normalised, see `normalise_heading`) and the section each one names.
SECTION_KEYS = {
    "metadata": "metadata",
    "context": "context",
    "chain inputs": "chain_inputs",
    "chain input": "chain_inputs",
    "progress log": "progress",
    "progress": "progress",
    "chain output": "chain_output",
}
SECTION_NUMBERS = {"metadata": 0, "context": 1, "chain_inputs": 2, "progress": 3, "chain_output": 4}
SECTION_TITLES = {"chain_inputs": "Chain Inputs", "progress": "Progress Log", "chain_output": "Chain Output"}
NUMBERED = re.compile(r"^\d+(?:\.\d+)*[.):]?\s+")
TITLE = re.compile(r"^task\s*#?\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:[:\-–—]\s*(.*))?$", re.I)
SESSION = re.compile(r"^session\s*#?\s*(\d+)\b\s*(?:[-–—:,]\s*)?(.*)$", re.I)
ARCHIVED = re.compile(r"^archived\s+summary\s*\(\s*sessions?\s*(\d+)\s*[-–—]\s*(\d+)\s*\)", re.I)
FROM_TASK = re.compile(r"^from\s+task\s*#?\s*([A-Za-z0-9][A-Za-z0-9._-]*?)\s*(?:[:\-–—]\s*(.*))?$", re.I)
PLACEHOLDER = re.compile(r"\([^\r\n]*\)")  # a section holding only `(No sessions yet)` and the like
LINE_BREAK = re.compile(r"\r\n|\n|\r")  # only these end a line: not U+2028, \x0c or \x85 (str.splitlines)


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


def region_ends(headings: list[Heading], length: int) -> list[int]:
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
    return " ".join(NUMBERED.sub("", text.strip()).rstrip(":").split()).lower()
