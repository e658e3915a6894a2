"""The decision protocol (seed 003): what a workflow's logic sees and what it may decide.

A spec is a pure function of (state, response, context): it reads the run state (a mapping with
the field names of CONTRACT section 5), the response of the step that just finished, and a
context whose `now` and `random` come from the run's events, and returns a Decision. It imports
nothing from the engine, so it can be tested without running an agent, and a replayed run makes
the same decisions.

Actions: REQUEST_WORK (run a role: `coder`, `validate`, `reviewer`, `planner`, or any work kind a
spec's own roles understand), REQUEST_APPROVAL (pause for a person), ANNOTATE (store an artifact);
`finalize` ends the run. Two artifact keys have a meaning for the engine: `accepted:<taskId>`
completes that task (its chain output is written and wired downstream) and `failed:<taskId>`
marks it failed (the value says why).
"""

from __future__ import annotations

import importlib
import random as _random
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Mapping, Protocol, Union

from specflux.base.errors import SpecfluxError
from specflux.base.records import Factory, record

ENTRY_POINT_GROUP = "specflux.specs"


class SpecError(SpecfluxError):
    """A spec that cannot be loaded, or a decision that does not make sense."""


@record(frozen=True)
class RequestWork:
    work_kind: str
    payload: Mapping[str, Any] | None = None
    step_id: str | None = None
    type: Literal["REQUEST_WORK"] = "REQUEST_WORK"


@record(frozen=True)
class RequestApproval:
    payload: Mapping[str, Any] | None = None
    step_id: str | None = None
    type: Literal["REQUEST_APPROVAL"] = "REQUEST_APPROVAL"


@record(frozen=True)
class Annotate:
    key: str
    value: Any = None
    type: Literal["ANNOTATE"] = "ANNOTATE"


Action = Union[RequestWork, RequestApproval, Annotate]


@record(frozen=True)
class Decision:
    decision_id: str
    actions: tuple[Action, ...] = ()
    finalize: bool = False
    based_on: Mapping[str, Any] | None = None
    failure_reason: str | None = None  # with finalize: the run failed, and why
    why: str = ""  # one line for the narrative ("coder-retry: 2 tests failed")

    def to_json(self) -> dict[str, Any]:
        return {
            "decisionId": self.decision_id,
            "actions": [_action_json(a) for a in self.actions],
            "finalize": self.finalize,
            "basedOn": dict(self.based_on) if self.based_on else None,
            "failureReason": self.failure_reason,
            "why": self.why,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Decision":
        return cls(
            decision_id=data["decisionId"],
            actions=tuple(_action_from_json(a) for a in data.get("actions", [])),
            finalize=bool(data.get("finalize")),
            based_on=data.get("basedOn"),
            failure_reason=data.get("failureReason"),
            why=data.get("why", ""),
        )


def _action_json(action: Action) -> dict[str, Any]:
    if isinstance(action, RequestWork):
        return {"type": action.type, "workKind": action.work_kind, "payload": plain(action.payload),
                "stepId": action.step_id}
    if isinstance(action, RequestApproval):
        return {"type": action.type, "payload": plain(action.payload), "stepId": action.step_id}
    if isinstance(action, Annotate):
        return {"type": action.type, "key": action.key, "value": plain(action.value)}
    raise SpecError(f"not an action: {action!r}")


def _action_from_json(data: Mapping[str, Any]) -> Action:
    kind = data.get("type")
    if kind == "REQUEST_WORK":
        return RequestWork(data["workKind"], data.get("payload"), data.get("stepId"))
    if kind == "REQUEST_APPROVAL":
        return RequestApproval(data.get("payload"), data.get("stepId"))
    if kind == "ANNOTATE":
        return Annotate(data["key"], data.get("value"))
    raise SpecError(f"unknown action type {kind!r}")


def plain(value: Any) -> Any:
    """Mappings and sequences as plain dicts and lists (decisions compare equal after JSON, and
    jsonata reads only those)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@record(frozen=True)
class AgentResponse:
    """What a finished step hands to the spec. `work_kind` "BOOT" starts a run."""

    step_id: str
    work_kind: str
    status: Literal["OK", "ERROR"] = "OK"
    content: Mapping[str, Any] | None = None
    run_id: str = ""
    task_id: str | None = None


@record(frozen=True)
class AgentErrorInfo:
    """Why a step failed: `type` is RATE_LIMIT, OVERLOADED, TIMEOUT, INTERRUPTED or ERROR."""

    type: str
    message: str
    retry_after_s: float | None = None


@record
class DecisionContext:
    """Deterministic inputs of a decision: both come from the run's events, never the clock."""

    now: int  # milliseconds since the epoch, as recorded for this step
    seed: int  # recorded with it

    @cached_property
    def random(self) -> _random.Random:
        """Random numbers from `seed`: the same in a replay."""
        return _random.Random(self.seed)


@record
class SpecContext:
    """What a factory gets to build its spec: the workflow's own settings, and where it runs."""

    config: Mapping[str, Any] = Factory(dict)
    root: Path | None = None


class Spec(Protocol):
    name: str

    def on_agent_completed(self, state: Mapping[str, Any], response: AgentResponse,
                           ctx: DecisionContext) -> Decision: ...

    def on_agent_error(self, state: Mapping[str, Any], work_kind: str, error: AgentErrorInfo,
                       attempt: int) -> Decision: ...


class SpecFactory(Protocol):
    name: str
    version: str

    def create(self, context: SpecContext) -> Spec: ...

    def describe(self) -> Mapping[str, Any]: ...


def retry_or_give_up(state: Mapping[str, Any], work_kind: str, error: AgentErrorInfo, attempt: int,
                     max_attempts: int = 3, base_delay_s: float = 2.0) -> Decision:
    """The seed's `on_agent_error`: rate limits, overloads and timeouts are retried (the same
    work, after an exponential backoff the engine waits out), anything else ends the run as failed.
    (A coder whose session times out is not an error: it is an attempt that failed, roles.py.)"""
    if error.type in ("RATE_LIMIT", "OVERLOADED", "TIMEOUT") and attempt < max_attempts:
        delay = error.retry_after_s or base_delay_s * 2 ** (attempt - 1)
        step_id, step = _failed_step(state, work_kind)
        payload = (state.get("artifacts") or {}).get(f"{work_kind}_payload")
        if payload is None and step is not None:
            payload = step.get("payload")
        return Decision(
            decision_id=f"dec-retry-{step_id or work_kind}-{attempt}",
            actions=(RequestWork(work_kind, {**(payload or {}), "delay_s": delay}, step_id),),
            why=f"{error.type.lower().replace('_', ' ')}: retry {work_kind} in {delay:g}s (attempt {attempt + 1})",
        )
    return Decision(decision_id=f"dec-abort-{work_kind}-{attempt}", finalize=True,
                    failure_reason="error", why=f"{work_kind} failed: {error.message}")


def _failed_step(state: Mapping[str, Any], work_kind: str) -> tuple[str | None, Mapping[str, Any] | None]:
    """The one FAILED step of `work_kind` in the state (the one being retried), or (None, None)
    when there is none or more than one: the retry then gets a new step and no payload."""
    failed = [(step_id, step) for step_id, step in (state.get("openSteps") or {}).items()
              if step.get("kind") == work_kind and step.get("status") == "FAILED"]
    return failed[0] if len(failed) == 1 else (None, None)


def load_spec(ref: str) -> SpecFactory:
    """A spec factory from `package.module:Factory` (a class or an instance) or the name of an
    entry point in the group `specflux.specs`."""
    if ":" in ref:
        module_name, _, attr = ref.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise SpecError(f"cannot import {module_name!r} for spec {ref!r}: {e}") from None
        try:
            found = getattr(module, attr)
        except AttributeError:
            raise SpecError(f"module {module_name!r} has no {attr!r} (spec {ref!r})") from None
    else:
        from importlib.metadata import entry_points

        matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == ref]
        if not matches:
            raise SpecError(f"no spec {ref!r}: give `package.module:Factory` or install a package with an "
                            f"entry point {ref!r} in the group {ENTRY_POINT_GROUP!r}")
        try:
            found = matches[0].load()
        except (ImportError, AttributeError) as e:
            raise SpecError(f"cannot load spec {ref!r} ({matches[0].value}): {e}") from None
    if isinstance(found, type):
        for attr in ("create", "describe"):
            if not hasattr(found, attr):
                raise SpecError(f"{ref!r} is not a spec factory: it has no {attr!r}")
        try:
            factory = found()
        except TypeError as e:
            raise SpecError(f"spec factory {ref!r} cannot be created without arguments: {e}") from None
    else:
        factory = found
    for attr in ("name", "version", "create", "describe"):
        if not hasattr(factory, attr):
            raise SpecError(f"{ref!r} is not a spec factory: it has no {attr!r}")
    return factory
