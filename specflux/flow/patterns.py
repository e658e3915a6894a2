"""The seed's four workflow patterns (seed 003) as shipped decision specs.

- `LinearFactory`: a fixed sequence of work kinds, one after the other.
- `BranchingFactory`: ANALYZE, then REFACTOR only when the analysis says so, then GENERATE_TESTS.
- `ParallelFactory`: several parts at once, finished when the last of them is done (the join).
- `MapReduceFactory`: SPLIT into items, one PROCESS_ITEM per item, AGGREGATE their results.

Like every spec they import the decision protocol and nothing else: each decision is a pure
function of the state, the response and the context. Decision ids come from `ctx.now` and the
number of finished steps, so a replayed run makes the same decisions with the same ids.

Every pattern ends the run as failed (`failure_reason` "error") when a step answers ERROR, and
leaves agent errors to `retry_or_give_up`: rate limits and overloads are retried with backoff,
anything else ends the run.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

from .decisions import (
    Action,
    AgentErrorInfo,
    AgentResponse,
    Annotate,
    Decision,
    DecisionContext,
    RequestWork,
    SpecContext,
    SpecError,
    retry_or_give_up,
)

BOOT = "BOOT"


def _open_steps(state: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    return state.get("openSteps") or {}


class _PatternSpec:
    """What the four patterns share: decision ids, the ERROR answer, agent errors."""

    name = ""

    def on_agent_completed(self, state: Mapping[str, Any], response: AgentResponse,
                           ctx: DecisionContext) -> Decision:
        if response.status != "OK":
            return self._decide(state, response, ctx, finalize=True, failure_reason="error",
                                why=f"{response.work_kind} answered {response.status}")
        return self.next(state, response, ctx)

    def on_agent_error(self, state: Mapping[str, Any], work_kind: str, error: AgentErrorInfo,
                       attempt: int) -> Decision:
        return retry_or_give_up(state, work_kind, error, attempt)

    def next(self, state: Mapping[str, Any], response: AgentResponse,
             ctx: DecisionContext) -> Decision:
        """The decision after `response`, a step that finished OK (or the run's BOOT)."""
        raise NotImplementedError

    def _decide(self, state: Mapping[str, Any], response: AgentResponse, ctx: DecisionContext,
                actions: Sequence[Action] = (), *, finalize: bool = False,
                failure_reason: str | None = None, why: str = "") -> Decision:
        finished = sum(1 for step in _open_steps(state).values() if step.get("status") != "WAITING")
        based_on = {"stepId": response.step_id, "runId": response.run_id}
        return Decision(decision_id=f"dec-{self.name}-{ctx.now}-{finished}", actions=tuple(actions),
                        finalize=finalize, based_on=based_on, failure_reason=failure_reason, why=why)

    def _unexpected(self, response: AgentResponse) -> SpecError:
        return SpecError(f"spec {self.name!r} requested no work of kind {response.work_kind!r} "
                         f"(step {response.step_id!r})")


class _Factory:
    """A factory's metadata; subclasses set the class attributes and `_spec`."""

    name = ""
    version = "1.0.0"
    description = ""
    required_work_kinds: tuple[str, ...] = ()
    config_schema: Mapping[str, Any] = {}  # never changed: describe() hands out a copy

    def create(self, context: SpecContext) -> _PatternSpec:
        return self._spec(context.config or {})

    def _spec(self, config: Mapping[str, Any]) -> _PatternSpec:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "requiredWorkKinds": list(self.required_work_kinds),
            "configSchema": copy.deepcopy(dict(self.config_schema)),
        }


def _strings(config: Mapping[str, Any], key: str, default: Sequence[str] | None = None, *,
             distinct: bool = False) -> list[str]:
    """`config[key]` as a non-empty list of non-empty strings."""
    value = config.get(key, default)
    if (not isinstance(value, (list, tuple)) or not value
            or not all(isinstance(v, str) and v for v in value)):
        raise SpecError(f"config {key!r} must be a non-empty list of strings, not {value!r}")
    if distinct and len(set(value)) != len(value):
        raise SpecError(f"config {key!r} names one twice: {value!r}")
    return list(value)


# -- Pattern 1: linear --------------------------------------------------------------------------

class LinearSpec(_PatternSpec):
    """BOOT -> steps[0] -> steps[1] -> ... -> finalize. Step ids are `step-<i>`, so a work kind
    may appear more than once in `steps`."""

    name = "linear"

    def __init__(self, steps: Sequence[str]):
        self.steps = list(steps)

    def next(self, state, response, ctx):
        index = 0 if response.work_kind == BOOT else self._index(response) + 1
        if index < len(self.steps):
            kind = self.steps[index]
            return self._decide(state, response, ctx, [RequestWork(kind, step_id=f"step-{index}")],
                                why=f"step {index + 1}/{len(self.steps)}: {kind}")
        return self._decide(state, response, ctx, finalize=True, why="all steps done")

    def _index(self, response: AgentResponse) -> int:
        prefix, _, number = response.step_id.partition("-")
        if prefix == "step" and number.isdigit() and int(number) < len(self.steps) \
                and self.steps[int(number)] == response.work_kind:
            return int(number)
        raise self._unexpected(response)


class LinearFactory(_Factory):
    name = "linear"
    description = "A fixed sequence of steps, each started when the one before it is done"
    config_schema = {"steps": {"type": "array", "items": {"type": "string"}, "required": True}}

    def _spec(self, config):
        return LinearSpec(_strings(config, "steps"))


# -- Pattern 2: conditional branching -----------------------------------------------------------

class BranchingSpec(_PatternSpec):
    """BOOT -> ANALYZE -> (REFACTOR when `refactorNeeded` is true) -> GENERATE_TESTS -> finalize."""

    name = "branching"

    def next(self, state, response, ctx):
        kind = response.work_kind
        content = dict(response.content or {})
        if kind == BOOT:
            return self._decide(state, response, ctx, [RequestWork("ANALYZE", step_id="analyze")],
                                why="analyze first")
        if kind == "ANALYZE" and content.get("refactorNeeded") is True:
            return self._decide(state, response, ctx,
                                [RequestWork("REFACTOR", content, step_id="refactor")],
                                why="analysis: refactor needed")
        if kind in ("ANALYZE", "REFACTOR"):
            why = "refactored" if kind == "REFACTOR" else "analysis: no refactor needed"
            return self._decide(state, response, ctx,
                                [RequestWork("GENERATE_TESTS", content, step_id="generate-tests")],
                                why=f"{why}; generate tests")
        if kind == "GENERATE_TESTS":
            return self._decide(state, response, ctx, finalize=True, why="tests generated")
        raise self._unexpected(response)


class BranchingFactory(_Factory):
    name = "branching"
    description = "Analyze, refactor only when the analysis says so, then generate tests"
    required_work_kinds = ("ANALYZE", "REFACTOR", "GENERATE_TESTS")

    def _spec(self, config):
        return BranchingSpec()


# -- Pattern 3: parallel execution --------------------------------------------------------------

class ParallelSpec(_PatternSpec):
    """BOOT -> one step per part, all at once (step id = the part) -> finalize when all are DONE."""

    name = "parallel"

    def __init__(self, work_kinds: Mapping[str, str]):
        self.work_kinds = dict(work_kinds)  # part (= step id) -> work kind, in order

    def next(self, state, response, ctx):
        if response.work_kind == BOOT:
            actions = [RequestWork(kind, step_id=part) for part, kind in self.work_kinds.items()]
            return self._decide(state, response, ctx, actions,
                                why=f"start {len(actions)} parts: {', '.join(self.work_kinds)}")
        if response.step_id not in self.work_kinds:
            raise self._unexpected(response)
        steps = _open_steps(state)
        waiting = [part for part in self.work_kinds
                   if (steps.get(part) or {}).get("status") != "DONE"]
        if waiting:
            return self._decide(state, response, ctx,
                                why=f"{response.step_id} done; waiting for {', '.join(waiting)}")
        return self._decide(state, response, ctx, finalize=True, why="all parts done")


class ParallelFactory(_Factory):
    name = "parallel"
    description = "Independent parts run at once; the run ends when the last part is done"
    required_work_kinds = ("GENERATE_CODE", "GENERATE_TESTS", "GENERATE_DOCS")
    config_schema = {
        "parts": {"type": "array", "items": {"type": "string"}, "default": ["code", "tests", "docs"]},
        "workKinds": {"type": "object", "description": "part -> work kind; default GENERATE_<PART>"},
    }

    def _spec(self, config):
        parts = _strings(config, "parts", ["code", "tests", "docs"], distinct=True)
        kinds = config.get("workKinds") or {}
        if not isinstance(kinds, Mapping) or not all(isinstance(k, str) and k for k in kinds.values()):
            raise SpecError(f"config 'workKinds' must map parts to work kinds, not {kinds!r}")
        unknown = sorted(set(kinds) - set(parts))
        if unknown:
            raise SpecError(f"config 'workKinds' names parts that are not in 'parts': {unknown}")
        return ParallelSpec({part: kinds.get(part, f"GENERATE_{part.upper()}") for part in parts})


# -- Pattern 4: map-reduce ----------------------------------------------------------------------

class MapReduceSpec(_PatternSpec):
    """BOOT -> SPLIT -> one PROCESS_ITEM per item (step ids `item-<i>`, each result annotated as
    `result:item-<i>`) -> AGGREGATE with the results in item order -> finalize."""

    name = "map-reduce"

    def next(self, state, response, ctx):
        kind = response.work_kind
        if kind == BOOT:
            return self._decide(state, response, ctx, [RequestWork("SPLIT", step_id="split")],
                                why="split the work")
        if kind == "SPLIT":
            items = (response.content or {}).get("items", [])
            if not isinstance(items, (list, tuple)):
                raise SpecError(f"SPLIT (step {response.step_id!r}) gave 'items' that are not a list: "
                                f"{items!r}")
            if not items:
                return self._aggregate(state, response, ctx, [], why="nothing to process")
            actions = [RequestWork("PROCESS_ITEM", {"item": item}, step_id=f"item-{i}")
                       for i, item in enumerate(items)]
            return self._decide(state, response, ctx, actions, why=f"process {len(items)} items")
        if kind == "PROCESS_ITEM":
            note = Annotate(f"result:{response.step_id}", response.content)
            steps = _open_steps(state)
            items = [step_id for step_id, step in steps.items() if step.get("kind") == "PROCESS_ITEM"]
            left = [step_id for step_id in items if steps[step_id].get("status") != "DONE"]
            if left:
                return self._decide(state, response, ctx, [note],
                                    why=f"{response.step_id} done; {len(left)} items left")
            artifacts = {**(state.get("artifacts") or {}), note.key: note.value}
            results = [artifacts.get(f"result:{step_id}") for step_id in sorted(items, key=_item_index)]
            return self._aggregate(state, response, ctx, results, note, why=f"all {len(items)} items done")
        if kind == "AGGREGATE":
            return self._decide(state, response, ctx, finalize=True, why="aggregated")
        raise self._unexpected(response)

    def _aggregate(self, state, response, ctx, results: list[Any], *before: Action,
                   why: str) -> Decision:
        work = RequestWork("AGGREGATE", {"results": results}, step_id="aggregate")
        return self._decide(state, response, ctx, [*before, work], why=f"{why}; aggregate")


def _item_index(step_id: str) -> tuple[int, str]:
    number = step_id.rpartition("-")[2]
    return (int(number) if number.isdigit() else -1, step_id)


class MapReduceFactory(_Factory):
    name = "map-reduce"
    description = "Split the work into items, process each, aggregate the results"
    required_work_kinds = ("SPLIT", "PROCESS_ITEM", "AGGREGATE")

    def _spec(self, config):
        return MapReduceSpec()
