"""Hand-ins: a reviewer's verdict and a planner's task list, checked the same way wherever they come from.

An API agent hands in through the `submit_review` / `submit_tasks` tools (`Toolbox`); an agent CLI
through `specflux submit-review --json FILE|-` / `specflux submit-tasks --json FILE|-`
(`submit_from_cli`), which writes the checked hand-in, sealed with its step's key, to
`$SPECFLUX_HANDIN` for the run to pick up (`handin_channel.py`). Both go through `check_review` /
`check_tasks`, so a hand-in is refused for the same reasons, in the same words, either way.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, TextIO

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from specflux.base.errors import ParseError, SpecfluxError
from specflux.base.files import atomic_write, os_error, read_text

Kind = Literal["review", "tasks"]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class HandinError(SpecfluxError):
    """A hand-in that does not fit; the message says why, in words the agent can act on."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# -- the reviewer's verdict -----------------------------------------------------------------------

class Issue(_Strict):
    severity: Literal["blocker", "major", "minor"]
    description: Text


class CriterionResult(_Strict):
    criterion: Text
    met: bool


class Review(_Strict):
    """The input of `submit_review`."""

    approved: bool
    issues: list[Issue] = []
    criteria_results: list[CriterionResult]


# -- the planner's task list ----------------------------------------------------------------------

class PlannedTask(_Strict):
    key: Text
    title: Text
    requirements: Text
    acceptance_criteria: list[Text]  # at least one: checked by `check_tasks`, naming the task
    priority: int = Field(ge=1, le=5)
    complexity: Literal["simple", "medium", "complex"]
    dependencies: list[Text] = []


class PlanSummary(_Strict):
    totalTasks: int = Field(ge=0)  # noqa: N815 - the seed's names
    byPriority: dict[str, int] = {}  # noqa: N815
    estimatedComplexity: Literal["hours", "days", "weeks"]  # noqa: N815


class TaskPlan(_Strict):
    """The input of `submit_tasks`."""

    tasks: list[PlannedTask] = Field(min_length=1)
    summary: PlanSummary | None = None


class HandinHooks(Protocol):
    """Optional methods of a session's hooks object (`TaskHooks`): `Toolbox` calls each one only
    where the hooks object has it, after the hand-in passed its checks. Raise SpecfluxError to
    refuse it (the agent reads the reason and may hand in again)."""

    def submit_review(self, review: Review) -> None: ...

    def submit_tasks(self, plan: TaskPlan) -> None: ...


# -- the checks -----------------------------------------------------------------------------------

def check_review(data: Any) -> Review:
    """`data` (parsed JSON) as a Review; HandinError when it does not fit or contradicts itself."""
    review = _validate(Review, data, "{approved, issues, criteria_results}")
    if not review.criteria_results:
        raise HandinError("criteria_results is empty: give one {criterion, met} for every acceptance "
                          "criterion of the task")
    if review.approved:
        unmet = [r.criterion for r in review.criteria_results if not r.met]
        blockers = [i.description for i in review.issues if i.severity == "blocker"]
        if unmet:
            which = _listed("criterion", "criteria", unmet)
            raise HandinError(f"approved is true but {which} not met: approve only when every criterion is met, "
                              "or set approved to false")
        if blockers:
            which = _listed("blocker issue", "blocker issues", blockers)
            raise HandinError(f"approved is true but {which} listed: approve only without blockers, or set "
                              "approved to false")
    return review


_NUMBERED = re.compile(r"(?:#|criterion\s*|ac\s*)?(\d+)\.?", re.I)


def check_judged(review: Review, criteria: Sequence[str]) -> Review:
    """`review` when its `criteria_results` judge each of the task's own `criteria` (by number,
    `1` / `#1` / `criterion 1`, or by exact text) and nothing else; HandinError listing what it
    must answer otherwise. A review of criteria the task does not have cannot complete it."""
    if not criteria:
        return review
    texts = {" ".join(c.split()).casefold(): n for n, c in enumerate(criteria, 1)}
    judged: set[int] = set()
    unknown: list[str] = []
    for result in review.criteria_results:
        key = result.criterion.strip()
        number = _NUMBERED.fullmatch(key)
        n = int(number.group(1)) if number else texts.get(" ".join(key.split()).casefold())
        if n is None or not 1 <= n <= len(criteria):
            unknown.append(key)
        else:
            judged.add(n)
    missing = [n for n in range(1, len(criteria) + 1) if n not in judged]
    if not unknown and not missing:
        return review
    problems = []
    if unknown:
        problems.append(f"not criteria of this task: {', '.join(repr(u) for u in unknown[:5])}")
    if missing:
        problems.append(f"not judged: {', '.join(map(str, missing))}")
    listed = "; ".join(f"{n}. {c}" for n, c in enumerate(criteria, 1))
    raise HandinError(f"criteria_results must judge each acceptance criterion of the task, by number or exact "
                      f"text ({'; '.join(problems)}). The criteria: {listed}")


def task_criteria(task_file: str | os.PathLike[str]) -> list[str]:
    """The acceptance criteria of the task file at `task_file`, in order ([] when it cannot be read)."""
    from specflux.format.document import TaskDocument

    try:
        text = Path(task_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    try:
        return [item[3] for item in TaskDocument(text, str(task_file)).criteria_lines]
    except Exception:  # a broken task file: the run's own checks report it; the review stands unjudged
        return []


def check_tasks(data: Any) -> TaskPlan:
    """`data` (parsed JSON) as a TaskPlan; HandinError naming the task keys when keys repeat, a task
    has no acceptance criteria, a dependency is not a key of the list, or dependencies form a cycle."""
    plan = _validate(TaskPlan, data, "{tasks: [...], summary?}")
    problems: list[str] = []
    positions: dict[str, list[int]] = {}
    for n, task in enumerate(plan.tasks, 1):
        positions.setdefault(task.key, []).append(n)
    for key, where in positions.items():
        if len(where) > 1:
            problems.append(f'task key "{key}" is used by tasks {_and(map(str, where))}: every key must be unique')
    for task in plan.tasks:
        if not task.acceptance_criteria:
            problems.append(f'task "{task.key}" has no acceptance criteria: give at least one checkable criterion')
        for dep in task.dependencies:
            if dep not in positions:
                problems.append(f'task "{task.key}" depends on "{dep}", which is not a task key of this list '
                                f"(the keys: {', '.join(positions)})")
    cycle = _cycle({t.key: [d for d in t.dependencies if d in positions] for t in plan.tasks})
    if cycle:
        problems.append(f"dependencies form a cycle: {' -> '.join(cycle)}; a task cannot depend on itself, "
                        "directly or through others")
    if problems:
        raise HandinError("; ".join(problems))
    return plan


CHECKS = {"review": check_review, "tasks": check_tasks}


def _validate(model: type[_Strict], data: Any, shape: str) -> Any:
    if not isinstance(data, dict):
        raise HandinError(f"give a JSON object {shape}, not {_json_type(data)}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise HandinError("; ".join(f"{_place(err['loc'], data)}: {err['msg']}" for err in e.errors())) from None


def _place(loc: tuple[str | int, ...], data: dict[str, Any]) -> str:
    """`criteria_results[0].met`; a task named by its key: `task "auth" (tasks[2]).priority`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
        task = data["tasks"][loc[1]]
        if isinstance(task, dict) and isinstance(task.get("key"), str) and task["key"].strip():
            return f'task "{task["key"].strip()}" ({text})'
    return text or "input"


def _cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """The first dependency cycle found, as a path that returns to its start (`a, b, a`), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(key: str) -> list[str] | None:
        if key in path:
            return [*path[path.index(key):], key]
        if key in done:
            return None
        path.append(key)
        for dep in graph.get(key, []):
            found = visit(dep)
            if found:
                return found
        path.pop()
        done.add(key)
        return None

    for key in graph:
        found = visit(key)
        if found:
            return found
    return None


def _listed(one: str, many: str, names: list[str]) -> str:
    quoted = [f'"{n}"' for n in names]
    return f"{one} {quoted[0]} is" if len(quoted) == 1 else f"{many} {_and(quoted)} are"


def _and(items: Any) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# -- agent CLIs: `specflux submit-review` / `submit-tasks` -----------------------------------------

ROLES = {"review": "reviewer", "tasks": "planner"}
COMMANDS = {"review": "specflux submit-review", "tasks": "specflux submit-tasks"}
KEY_VAR = "SPECFLUX_HANDIN_KEY"  # the step's key: in its session's environment alone (handin_channel.py)
STEP_VAR = "SPECFLUX_HANDIN_STEP"


def sign(key: str, step: str, kind: str, data: Any) -> str:
    """A hand-in's seal: HMAC-SHA256 under the step's key of its step, kind and data."""
    body = json.dumps({"step": step, "kind": kind, "data": data}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()


def submit_from_cli(kind: Kind, source: str, env: Mapping[str, str], stdin: TextIO | None = None) -> tuple[int, str]:
    """Check the JSON at `source` (a file path, or `-` for standard input) and write it, sealed
    with the step's key ($SPECFLUX_HANDIN_KEY), to `$SPECFLUX_HANDIN` for the run; (exit code,
    one line to print): 0 when it was recorded, 1 for a file that cannot be read, bad JSON or a
    refused hand-in, 2 when run outside a session of the right role. Handing in again replaces
    the earlier hand-in."""
    command, role = COMMANDS[kind], ROLES[kind]
    target = env.get("SPECFLUX_HANDIN", "")
    if not target:
        return 2, f"{command} runs inside a workflow run's {role} session (SPECFLUX_HANDIN is not set)"
    if not os.path.isabs(target):
        return 2, f"SPECFLUX_HANDIN must be an absolute file path, not {target!r}"
    session_role = env.get("SPECFLUX_ROLE")
    if session_role and session_role != role:
        return 2, f"{command} is the {role}'s hand-in; this session's role is {session_role} (SPECFLUX_ROLE)"
    missing = next((name for name in (KEY_VAR, STEP_VAR) if not env.get(name)), None)
    if missing:
        return 2, (f"{command} runs inside a workflow run's {role} session ({missing} is not set: only the "
                   "session the run started for this step can hand in for it)")

    shown = "<stdin>" if source == "-" else source
    try:
        text = (stdin or sys.stdin).read() if source == "-" else read_text(Path(source), shown)
    except OSError as e:
        return 1, str(os_error(e, shown, "read"))
    except UnicodeDecodeError as e:
        return 1, f"{shown}: not valid UTF-8 (byte {e.start})"
    except ParseError as e:
        return 1, str(e)
    if not text.strip():
        return 1, f"{shown}: empty: give the {kind} as one JSON object"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return 1, f"{shown}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}"
    try:
        checked = CHECKS[kind](data)
        if kind == "review" and env.get("SPECFLUX_TASK_FILE"):
            check_judged(checked, task_criteria(env["SPECFLUX_TASK_FILE"]))
    except HandinError as e:
        return 1, f"{shown}: refused: {e.message}"

    data = checked.model_dump(mode="json")
    step = env[STEP_VAR]
    record = {"kind": kind, "step": step, "data": data, "seal": sign(env[KEY_VAR], step, kind, data)}
    try:
        atomic_write(Path(target), json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    except OSError as e:
        return 1, str(os_error(e, target))
    if kind == "review":
        return 0, "review recorded"
    count = len(checked.tasks)
    return 0, f"{count} task{'s' if count != 1 else ''} recorded"
