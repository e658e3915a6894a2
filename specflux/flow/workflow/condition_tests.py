"""`[[tests]]` in a workflow file: edge conditions checked on example states when the file loads.

Seed 000 ends its edges with tests of their conditions ("coder-retry fires when self-validation
fails", ...). Written into the workflow file, they run every time the file is loaded, before a run
starts, so an edited condition that no longer means what its author wrote stops here, located:

```toml
[[tests]]
it = "next-task fires when approved and more tasks"
edge = "next-task"                       # the edge's `when`; or `when = "..."` for any expression
state = { reviewerOutput = { approved = true }, currentTaskIndex = 0, tasks = [{}, {}, {}] }
expect = true
```

A test reads its own `state`, not the run's: the example states of the seed are partial (a
`coderOutput` and nothing else), so the fields a condition reads are not checked against the run
state's shape here; the edges' own checks do that.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

TEST_KEYS = ("it", "name", "edge", "when", "state", "expect")


def check_tests(tables: Any, lines: Sequence[Any], edges: Sequence[Any], problems: Any, line: int) -> None:
    """Every test's problem added to `problems` (`.add(message, line)`): malformed, or its condition
    gives another answer. `lines`: each `[[tests]]` table's header line and key lines; `edges`: the
    workflow's edges (`.id`, `.when`)."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        problems.add("`tests` must be `[[tests]]` tables", line)
        return
    by_id = {edge.id: edge for edge in edges}
    for index, table in enumerate(tables):
        where = lines[index] if index < len(lines) else None
        header = where.header if where else line
        line_of = (lambda key, w=where, h=header: (w.keys.get(key, h) if w else h))
        _check_one(table, index, by_id, problems, header, line_of)


def _check_one(table: Mapping[str, Any], index: int, edges: Mapping[str, Any], problems: Any,
               header: int, line_of) -> None:
    name = table.get("it") or table.get("name") or f"test {index + 1}"
    for key in table:
        if key not in TEST_KEYS:
            problems.add(f"unknown key `{key}` in a test: a test has {', '.join(TEST_KEYS)}", line_of(key))
    if ("edge" in table) == ("when" in table):
        problems.add(f"test `{name}`: give `edge = \"<edge id>\"` or `when = \"<condition>\"`, one of them", header)
        return
    expect = table.get("expect")
    if not isinstance(expect, bool):
        problems.add(f"test `{name}`: `expect` must be true or false", line_of("expect") if "expect" in table else header)
        return
    state = table.get("state", {})
    if not isinstance(state, dict):
        problems.add(f"test `{name}`: `state` must be a table, like `state = {{ currentTaskIndex = 0 }}`",
                     line_of("state"))
        return
    if "edge" in table:
        edge = edges.get(table["edge"])
        if edge is None:
            known = ", ".join(edges) or "none"
            problems.add(f"test `{name}`: no edge `{table['edge']}` in this workflow (edges: {known})", line_of("edge"))
            return
        expression = edge.when
        if expression is None:
            got = True  # an edge without `when` always holds
        else:
            got = _evaluate(expression, state, name, problems, line_of("edge"))
    else:
        expression = table["when"]
        if not isinstance(expression, str) or not expression.strip():
            problems.add(f"test `{name}`: `when` must be a non-empty string", line_of("when"))
            return
        got = _evaluate(expression, state, name, problems, line_of("when"))
    if got is None:
        return
    if got is not expect:
        problems.add(f"test `{name}` fails: `{expression}` is {str(got).lower()} on its state, expected "
                     f"{str(expect).lower()}", line_of("expect") if "expect" in table else header)


def _evaluate(expression: str, state: Mapping[str, Any], name: str, problems: Any, line: int) -> bool | None:
    import jsonata

    try:
        value = jsonata.Jsonata(expression).evaluate(state, {})
    except Exception as e:  # jsonata.JException, or jsonata's own bug on odd data
        problems.add(f"test `{name}`: `{expression}` fails: {e}", line)
        return None
    if not isinstance(value, bool):
        problems.add(f"test `{name}`: `{expression}` gives {_show(value)}, not true or false", line)
        return None
    return value


def _show(value: Any) -> str:
    if value is None:
        return "nothing (a field on its path is missing or null)"
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
