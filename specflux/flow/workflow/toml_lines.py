"""Line numbers in a workflow file, which tomllib does not give: the line of every top-level key,
every `[[edges]]` and `[[tests]]` table and every key inside one, so that every problem is
reported `path:line` at the key that causes it.
"""

from __future__ import annotations

import re

from specflux.base.records import Factory, record

@record
class _EdgeLines:
    header: int  # the `[[edges]]` line
    keys: dict[str, int]


@record
class _Lines:
    top: dict[str, int]  # top-level key (or table name) -> its line
    edges: list[_EdgeLines]
    tests: list[_EdgeLines] = Factory(list)  # `[[tests]]` tables, like edges


_HEADER = re.compile(r"\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
_KEY = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*[.=]""")


def _scan_lines(text: str) -> _Lines:
    """The line of every top-level key, every `[[edges]]` header and every key inside one.

    A scan of the text, not a TOML parser: tomllib has already accepted the file, so the lines
    only need telling apart. Multi-line strings are skipped so that their text is never a key.
    """
    lines = _Lines({}, [])
    table: str | None = None  # None: top level; "edges": inside the last [[edges]]; else elsewhere
    open_string: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if open_string:
            if line.count(open_string) % 2 == 1:
                open_string = None
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        header = _HEADER.match(line) if stripped.startswith("[") else None
        if header:
            table = _enter_table(lines, header.group(1), header.group(2), number)
        else:
            key = _KEY.match(line)
            if key:
                name = key.group(1).strip("\"'")
                if table is None:
                    lines.top.setdefault(name, number)
                elif table == "edges" and lines.edges:
                    lines.edges[-1].keys.setdefault(name, number)
                elif table == "tests" and lines.tests:
                    lines.tests[-1].keys.setdefault(name, number)
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                open_string = quote
                break
    return lines


def _enter_table(lines: _Lines, brackets: str, name: str, number: int) -> str:
    first, _, rest = name.partition(".")
    first = first.strip().strip("\"'")
    if first == "edges" and brackets == "[[" and not rest:
        lines.edges.append(_EdgeLines(number, {}))
        lines.top.setdefault("edges", number)
        return "edges"
    if first == "tests" and brackets == "[[" and not rest:
        lines.tests.append(_EdgeLines(number, {}))
        lines.top.setdefault("tests", number)
        return "tests"
    if first == "edges" and rest and lines.edges:  # [edges.x]: key x of the last edge
        lines.edges[-1].keys.setdefault(rest.partition(".")[0].strip().strip("\"'"), number)
        return "elsewhere"
    lines.top.setdefault(first, number)
    return "elsewhere"
