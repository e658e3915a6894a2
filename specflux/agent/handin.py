"""Hand-ins: a reviewer's verdict and a planner's task list, checked the same way wherever they come from.

An API agent hands in through the `submit_review` / `submit_tasks` tools (`Toolbox`); an agent CLI
through `specflux submit-review --json FILE|-` / `specflux submit-tasks --json FILE|-`
(handin_cli.py), which writes the checked hand-in, sealed with its step's key, to
`$SPECFLUX_HANDIN` for the run to pick up (`handin_channel.py`). Both go through `check_review` /
`check_tasks` (the rules past the shape: handin_rules.py), so a hand-in is refused for the same
reasons, in the same words, either way.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from specflux.agent.handin_rules import HandinError, agrees, joined

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


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
    agrees(review.approved, [(r.criterion, r.met) for r in review.criteria_results],
           [i.description for i in review.issues if i.severity == "blocker"])
    return review


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
            problems.append(f'task key "{key}" is used by tasks {joined(map(str, where))}: every key must be unique')
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


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
