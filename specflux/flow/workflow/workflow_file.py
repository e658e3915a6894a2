"""Declarative workflows (seed 000): edges between roles, each with a JSONata condition, in TOML.

```toml
name = "queue"
version = "1"
start = "coder"

[[edges]]
id = "coder-retry"
from = "coder"
to = "coder"
when = "coderOutput.selfValidation.passed = false"
max_iterations = 3
```

What an edge means (the engine acts on it; it is written down here so that a workflow author
reads it in one place):

- After a role finishes, the edges `from` that role are tried in file order and the first whose
  `when` holds fires: the run goes on with its `to` role. An edge without `when` always holds.
  When none fires, the run ends.
- `max_iterations` caps how many times the edge fires for one task; the engine counts. The seed
  says the workflow ends when an edge's limit is exceeded, so a limit never lets a later edge
  through (which is why an edge without `when` shadows every later edge from the same role).
- `task = "next"` (the built-in `next-task` edge has it): firing the edge accepts the current task
  and moves the queue to the next one, so the `to` role starts on a fresh task.
- A run begins at `start`, or at `planner` when it starts from a PRD (`flow start --prd`), so
  edges from `planner` are always reachable.

`spec = "package.module:Factory"` instead of edges hands the decisions to Python (seed 003,
`decisions.py`).

Everything is checked when the file is loaded, before anything runs, and every problem is
reported as `path:line: message` at the key that causes it: a typo in a field name would
otherwise make a condition quietly false, and the run would end early for no visible reason.

jsonata is imported only where an expression is compiled or evaluated: its import costs tens of
milliseconds, which commands that never touch a run (`specflux list`) must not pay.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from specflux.base.errors import NotFoundError, ParseError, UsageError
from specflux.base.records import record
from specflux.flow.workflow.condition_fields import STATE_FIELDS, STATE_SCHEMA, _Reads, close_matches  # noqa: F401 (STATE_FIELDS: part of this module's API)
from specflux.flow.decisions import plain as _plain  # jsonata reads only dicts and lists
from specflux.flow.workflow.builtin import BUILTIN, BUILTIN_QUEUE, built_in_conditions, tomllib  # noqa: F401 (BUILTIN_QUEUE: part of this module's API)
from specflux.flow.workflow.fast_conditions import evaluate_simple, fields_named as _fields_named
from specflux.flow.workflow.toml_lines import _EdgeLines, _scan_lines

ROLES = ("planner", "coder", "validate", "reviewer", "approval")
PRD_START = "planner"  # where a run that starts from a PRD begins, whatever `start` says
DEFAULT_START = "coder"
TOP_KEYS = ("name", "version", "start", "edges", "spec", "tests")
EDGE_KEYS = ("id", "from", "to", "when", "max_iterations", "task")
# What people copy from seed 000 as written: its spec agent is our planner, and its TypeScript
# spells the limit `maxIterations`. Both are read as ours, so the seed's text needs no edits.
ROLE_ALIASES = {"spec": "planner"}
EDGE_KEY_ALIASES = {"maxIterations": "max_iterations", "max-iterations": "max_iterations"}
TASK_MOVES = ("next",)

class WorkflowError(ParseError):
    """A workflow that cannot run, located `path:line: message` at the key that causes it.

    Loading reports every problem it finds: `problems` holds them all in line order, and the error
    itself is the first of them.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        super().__init__(message, path, line)
        self.problems: tuple[WorkflowError, ...] = (self,)


# --- the values ------------------------------------------------------------------------------

@record(frozen=True)
class Edge:
    id: str
    from_: str  # the TOML key "from"
    to: str
    when: str | None = None
    max_iterations: int | None = None
    task: str | None = None  # "next": firing accepts the current task and moves to the next one
    line: int = 0  # the line of this edge's `[[edges]]` header
    _path: str = "<workflow>"  # (fields named _...: left out of == and the repr, see base/records.py)
    _key_lines: tuple[tuple[str, int], ...] = ()
    _compiled: Any = None  # jsonata.Jsonata: compiled at load, else at first use
    _constant: bool | None = None  # a `when` that reads no state

    def line_of(self, key: str) -> int:
        """The line of `key` (`when`, `from`, ...) in this edge, else of its `[[edges]]` header."""
        return dict(self._key_lines).get(key, self.line)

    def fires(self, state: Mapping[str, Any]) -> bool:
        """Whether this edge's condition holds on `state` (the run state, seed field names).

        A condition that fails, or gives anything but true or false (a number, a list, nothing
        because a field was missing), is a WorkflowError at the `when` line: guessing a truth
        value would silently steer the run.
        """
        if self.when is None:
            return True
        answer = evaluate_simple(self.when, state)  # the seed's shapes without JSONata; None: it decides
        if answer is not None:
            return answer
        compiled = self._compiled
        if compiled is None:  # an Edge built by hand rather than loaded
            compiled = _compile(self.when)
            object.__setattr__(self, "_compiled", compiled)
        where = self.line_of("when")
        fields = _fields_named(self.when)
        if fields is not None:  # only what the condition can read: the state holds every step of the run
            state = {k: state[k] for k in fields if k in state}
        try:
            # Fresh bindings give each evaluation its own frame: the compiled expression can be
            # shared between threads (parallel tasks) without one run's state leaking into another.
            result = compiled.evaluate(_plain(state), {})
        except Exception as e:  # jsonata.JException, or a bug inside jsonata on odd data
            raise WorkflowError(f"edge `{self.id}`: `when` failed on this state: {e}", self._path, where) from None
        if not isinstance(result, bool):
            raise WorkflowError(f"edge `{self.id}`: `when` gave {_show(result)}, not true or false "
                                f"(compare with `=`, or wrap it in $boolean() or $exists())", self._path, where)
        return result


@record(frozen=True)
class Workflow:
    name: str
    version: str
    start: str
    edges: tuple[Edge, ...]
    spec: str | None = None  # `package.module:Factory`: Python decision logic instead of edges
    path: str | None = None  # None for the built-in
    hash: str = ""  # sha256 of the file's bytes (or of the built-in text): which workflow a run used

    def untested_warning(self) -> str | None:
        """Why this workflow can accept a task whose tests fail, if it can: no edge's condition
        reads the test result (`coderOutput.selfValidation` or `validation`). Python logic is its
        own business."""
        if self.spec or any(e.when and ("selfValidation" in e.when or "validation" in e.when) for e in self.edges):
            return None
        return (f"workflow {self.name!r} can accept a task whose tests fail: no condition reads "
                "coderOutput.selfValidation.passed or validation.passed (a task accepted so is logged as untested)")

    def edges_from(self, role: str) -> tuple[Edge, ...]:
        """The edges tried after `role` finishes, in the order they are tried."""
        return tuple(e for e in self.edges if e.from_ == role)


# --- loading ---------------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def load_workflow(name_or_path: str, workspace_dir: Path) -> Workflow:
    """The workflow `name_or_path` names: a path to a .toml file (as given, relative to the
    current folder), else `<workspace_dir>/workflows/<name>.toml`, else a built-in (`queue`).
    A user file of the same name overrides a built-in, so the built-in can be edited as a copy."""
    if name_or_path.endswith(".toml") or "/" in name_or_path or "\\" in name_or_path:
        return _load_file(Path(name_or_path), name_or_path)
    if not _NAME.fullmatch(name_or_path):
        raise UsageError(f"{name_or_path!r} is neither a workflow name nor a path to a .toml file")
    user = Path(workspace_dir) / "workflows" / f"{name_or_path}.toml"
    if user.exists():
        return _load_file(user, str(user))
    if name_or_path in BUILTIN:
        text = BUILTIN[name_or_path]
        return _parse(text, f"<built-in {name_or_path}>", _sha256(text.encode("utf-8")), None)
    known = sorted({*BUILTIN, *(p.stem for p in user.parent.glob("*.toml"))})
    raise NotFoundError(f"no workflow {name_or_path!r}: not built in and no {user} "
                        f"(known: {', '.join(known)})")


def parse_workflow(text: str, path: str) -> Workflow:
    """Parse and validate a workflow file's text; `path` is what errors are located with."""
    return _parse(text, path, _sha256(text.encode("utf-8")), path)


def _load_file(file: Path, shown: str) -> Workflow:
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise NotFoundError("no such workflow file", shown) from None
    except OSError as e:
        raise NotFoundError(f"cannot read the workflow file: {e.strerror or e}", shown) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise WorkflowError("not UTF-8 text: save the workflow file as UTF-8", shown, line) from None
    return _parse(text, shown, _sha256(data), shown)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _parse(text: str, path: str, digest: str, file: str | None) -> Workflow:
    data = _toml(text, path)
    lines = _scan_lines(text)
    problems = _Problems(path)
    top_line = lambda key: lines.top.get(key, 1)  # noqa: E731

    for key in data:
        if key not in TOP_KEYS:
            problems.add(f"unknown key `{key}` (a workflow has {', '.join(TOP_KEYS)})", top_line(key))
    name = _string(data, "name", problems, top_line, required=True)
    version = _string(data, "version", problems, top_line) or "1"
    start = _string(data, "start", problems, top_line) or DEFAULT_START
    start = ROLE_ALIASES.get(start, start)
    if "start" in data and start not in ROLES:
        problems.add(_unknown_role(start), top_line("start"))
    spec = _string(data, "spec", problems, top_line)

    tables = _edge_tables(data, problems, top_line)
    if spec is not None and tables:
        problems.add("give either `spec` (Python decision logic) or `[[edges]]`, not both", top_line("spec"))
    if "spec" not in data and not data.get("edges"):
        problems.add("no `[[edges]]` and no `spec`: the workflow does nothing", 1)

    edges = []
    for index, table in enumerate(tables):
        edge_lines = lines.edges[index] if index < len(lines.edges) else _EdgeLines(top_line("edges"), {})
        edge = _edge(table, edge_lines, path, problems)
        if edge is not None:
            edges.append(edge)
    _check_ids(edges, problems)
    _check_graph(edges, start, problems)
    if "tests" in data:
        from specflux.flow.workflow.condition_tests import check_tests

        check_tests(data["tests"], lines.tests, edges, problems, top_line("tests"))
    problems.raise_any()
    return Workflow(name=name or "", version=version, start=start, edges=tuple(edges), spec=spec,
                    path=file, hash=digest)


class _Problems:
    """Every problem found, so that one load reports them all; the first (by line) is raised."""

    def __init__(self, path: str):
        self.path = path
        self.found: list[WorkflowError] = []

    def add(self, message: str, line: int | None) -> None:
        self.found.append(WorkflowError(message, self.path, line or 1))

    def raise_any(self) -> None:
        if self.found:
            ordered = sorted(self.found, key=lambda e: e.line or 0)
            first = ordered[0]
            first.problems = tuple(ordered)
            raise first


def _toml(text: str, path: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # The message ends "(at line 3, column 7)"; Python < 3.14 has no attribute for it.
        message = str(e)
        found = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
        line = int(found.group(1)) if found else text.count("\n") + 1
        if found:
            message = f"{message[:found.start()]} (column {found.group(2)})"
        raise WorkflowError(f"not valid TOML: {message}", path, line) from None


def _string(data: Mapping[str, Any], key: str, problems: _Problems, line_of, required: bool = False) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            problems.add(f"`{key}` is missing: add `{key} = \"...\"`", 1)
        return None
    if not isinstance(value, str) or not value.strip():
        problems.add(f"`{key}` must be a non-empty string, like `{key} = \"...\"`", line_of(key))
        return None
    return value


def _unknown_role(role: str) -> str:
    hint = close_matches(role, ROLES, n=1)
    maybe = f" (did you mean `{hint[0]}`?)" if hint else ""
    return f"unknown role `{role}`{maybe}: roles are {', '.join(ROLES)}"


def _edge_tables(data: Mapping[str, Any], problems: _Problems, top_line) -> list[Mapping[str, Any]]:
    tables = data.get("edges", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        problems.add("`edges` must be `[[edges]]` tables", top_line("edges"))
        return []
    return tables


# --- one edge --------------------------------------------------------------------------------

def _edge(table: Mapping[str, Any], lines: "_EdgeLines", path: str, problems: _Problems) -> Edge | None:
    """The edge of one `[[edges]]` table, its problems added. None when it has no usable id, `from`
    or `to`; an edge with other problems is still returned, so that the checks of the whole graph
    see it and do not report its neighbours as unreachable because of a typo in its `when`."""
    table = {EDGE_KEY_ALIASES.get(key, key): value for key, value in table.items()}
    key_lines = {EDGE_KEY_ALIASES.get(key, key): line for key, line in lines.keys.items()}
    line_of = lambda key: key_lines.get(key, lines.header)  # noqa: E731
    for key in table:
        if key not in EDGE_KEYS:
            hint = close_matches(key, EDGE_KEYS, n=1)
            maybe = f" (did you mean `{hint[0]}`?)" if hint else ""
            problems.add(f"unknown key `{key}` in an edge{maybe}: an edge has {', '.join(EDGE_KEYS)}", line_of(key))
    values = {}
    for key in ("id", "from", "to", "when", "task"):
        value = table.get(key)
        if value is None:
            if key in ("id", "from", "to"):
                problems.add(f"this edge has no `{key}`", lines.header)
        elif not isinstance(value, str) or not value.strip():
            problems.add(f"`{key}` must be a non-empty string", line_of(key))
        else:
            values[key] = ROLE_ALIASES.get(value, value) if key in ("from", "to") else value
    for key in ("from", "to"):
        if key in values and values[key] not in ROLES:
            problems.add(_unknown_role(values[key]), line_of(key))
    if "task" in values and values["task"] not in TASK_MOVES:
        problems.add(f"`task` can only be \"next\" (accept this task and move to the next one), "
                     f"not {values['task']!r}", line_of("task"))
    limit = table.get("max_iterations")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        problems.add(f"`max_iterations` must be a positive whole number, not {limit!r}", line_of("max_iterations"))
    compiled, constant = None, None
    if "when" in values:
        compiled, constant = _check_when(values["when"], values.get("id", "?"), line_of("when"), problems)
    if not all(key in values for key in ("id", "from", "to")) or not {values["from"], values["to"]} <= set(ROLES):
        return None
    return Edge(id=values["id"], from_=values["from"], to=values["to"], when=values.get("when"),
                max_iterations=limit, task=values.get("task"), line=lines.header, _path=path,
                _key_lines=tuple(key_lines.items()), _compiled=compiled, _constant=constant)


def _compile(expression: str):
    import jsonata

    return jsonata.Jsonata(expression)


def _check_when(expression: str, edge_id: str, line: int, problems: _Problems) -> tuple[Any, bool | None]:
    """The compiled condition and, when it reads nothing from the state, its constant value; or
    None with the reason added. It must parse, read only fields the run state has, depend on the
    state alone, and be able to come out true.

    A condition of a built-in workflow is not compiled here: the suite checks each the same way
    (tests/flow/test_workflow_file.py), and `Edge.fires` compiles it at the first evaluation the
    fast conditions leave to JSONata, if one comes. A run of the built-in `queue` (every worker's)
    so never imports JSONata (~40 ms of CPU before its first agent, more on a busy machine)."""
    if expression in built_in_conditions():
        return None, None
    return _compile_checked(expression, edge_id, line, problems)


def _compile_checked(expression: str, edge_id: str, line: int, problems: _Problems) -> tuple[Any, bool | None]:
    import jsonata

    try:
        compiled = _compile(expression)
    except jsonata.JException as e:
        at = getattr(e, "location", None)
        where = f" near character {at}" if isinstance(at, int) and at >= 0 else ""
        problems.add(f"edge `{edge_id}`: `when` is not valid JSONata{where}: {e}", line)
        return None, None
    reads = _Reads()
    reads.walk(compiled.ast, (STATE_SCHEMA, ()))
    for problem in reads.problems:
        problems.add(f"edge `{edge_id}`: `when` {problem}", line)
    if reads.problems:
        return None, None
    if reads.state:
        return compiled, None
    constant = _constant_value(compiled, expression, edge_id, line, problems)
    if constant is False:
        problems.add(f"edge `{edge_id}` can never fire: its `when` ({expression}) reads nothing from "
                     "the run state and is always false", line)
    return compiled, constant


def _constant_value(compiled, expression: str, edge_id: str, line: int, problems: _Problems) -> bool | None:
    """The value of a condition that reads nothing from the state: it is the same on every state."""
    try:
        value = compiled.evaluate({}, {})
    except Exception as e:
        problems.add(f"edge `{edge_id}`: `when` fails: {e}", line)
        return None
    if not isinstance(value, bool):
        problems.add(f"edge `{edge_id}`: `when` ({expression}) gives {_show(value)}, not true or false", line)
        return None
    return value


# --- the edges together ----------------------------------------------------------------------

def _check_ids(edges: Iterable[Edge], problems: _Problems) -> None:
    seen: dict[str, Edge] = {}
    for edge in edges:
        if edge.id in seen:
            problems.add(f"duplicate edge id `{edge.id}` (first at line {seen[edge.id].line})",
                         edge.line_of("id"))
        else:
            seen[edge.id] = edge


def _check_graph(edges: list[Edge], start: str, problems: _Problems) -> None:
    """Edges that can never fire: shadowed by an earlier edge from the same role that always
    fires, or leaving a role the run never reaches."""
    dead: set[int] = set()
    always: dict[str, Edge] = {}
    for index, edge in enumerate(edges):
        if edge._constant is False:
            dead.add(index)  # already reported where its `when` was checked
        elif edge.from_ in always:
            first = always[edge.from_]
            problems.add(f"edge `{edge.id}` can never fire: edge `{first.id}` (line {first.line}) leaves "
                         f"`{edge.from_}` first and always fires", edge.line_of("from"))
            dead.add(index)
        elif edge.when is None or edge._constant is True:
            always[edge.from_] = edge
    reached = {start, PRD_START}
    grew = True
    while grew:
        grew = False
        for index, edge in enumerate(edges):
            if index not in dead and edge.from_ in reached and edge.to not in reached:
                reached.add(edge.to)
                grew = True
    for index, edge in enumerate(edges):
        if index not in dead and edge.from_ not in reached:
            problems.add(f"edge `{edge.id}` can never fire: the run never reaches `{edge.from_}` (it is not "
                         f"`start` ({start}) and no edge that can fire leads to it)", edge.line_of("from"))


# --- small helpers ---------------------------------------------------------------------------

def _show(value: Any) -> str:
    if value is None:
        return "nothing (a field on its path is missing or null)"
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
