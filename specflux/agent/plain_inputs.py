"""Tool inputs that fit their model as they are, read without pydantic.

`tool_inputs.MODELS` says, with pydantic, what each tool of a session accepts, and words every
refusal. Importing pydantic and building those models is ~70 ms of CPU: ~4% of a 100-step replay
(bench/bench_flow.py), paid by every run of the API backend before its first tool call. Yet
nearly every call an agent makes fits as it is. `plain` takes such an input (every field of its
exact JSON type and within its bounds, none missing, no key too many) into an object with the
model's attributes and the values the model would give them (`end_session`'s: a WrittenHandoff,
the record a hand-off written in a task file is read into; `submit_review`'s, `review_of`: a
PlainReview); anything else is None, and goes to the model, which accepts or refuses it in its
own words (tests/agent/test_plain_inputs.py holds the two to the same values, case by case).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from specflux.agent.handin_rules import agreed_plain_review
from specflux.base.records import record

REQUIRED = object()


@record(frozen=True)
class WrittenChainOutput:
    summary: str
    downstream: str = ""


@record(frozen=True)
class WrittenHandoff:
    """The hand-off an agent CLI made by writing its task file (its entry's **Did:**, its chain
    output), read as a `Handoff` is: the same fields, without pydantic's model (a run of agent
    CLIs need not import it: ~0.1 s of CPU), since the task file's parser checked them. Also an
    `end_session` call that fits the model as it is (`plain`)."""

    did: list[str]
    chain_output: WrittenChainOutput | None = None
    issues: str = ""
    next: str = ""


def _str(value: Any) -> bool:
    return type(value) is str


def _text(value: Any) -> bool:  # Field(min_length=1)
    return type(value) is str and value != ""


def _int(value: Any) -> bool:  # strict int: not a bool, not a float
    return type(value) is int


def _seconds(value: Any) -> bool:  # float | None, gt=0 (an int or a NaN: the model's to judge)
    return value is None or (type(value) is float and value > 0)


# per tool, its fields: (the check of a value the model takes as it is, the default or REQUIRED)
FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "read_file": {"path": (_str, REQUIRED)},
    "list_files": {"path": (_str, ".")},
    "search": {"path": (_str, "."), "pattern": (_str, REQUIRED)},
    "write_file": {"path": (_str, REQUIRED), "content": (_str, REQUIRED)},
    "edit_file": {"path": (_str, REQUIRED), "old": (_text, REQUIRED), "new": (_str, REQUIRED)},
    "run_command": {"command": (_text, REQUIRED), "timeout_s": (_seconds, None)},
    "check_criterion": {"index": (_int, REQUIRED)},
}


def plain(tool: str, data: Any) -> Any:
    """`data` read as `tool`'s model would read it, or None where the model must judge it."""
    if type(data) is not dict:
        return None
    if tool == "end_session":
        return _handoff(data)
    fields = FIELDS.get(tool)
    if fields is None or not data.keys() <= fields.keys():
        return None
    values = {}
    for name, (fits, default) in fields.items():
        value = data.get(name, default)
        if value is REQUIRED or not fits(value):
            return None
        values[name] = value
    return SimpleNamespace(**values)


def _handoff(data: dict) -> WrittenHandoff | None:
    """`end_session`'s Handoff (not strict; one string of `did` is one item)."""
    if "did" not in data or not data.keys() <= {"did", "issues", "next", "chain_output"}:
        return None
    did = [data["did"]] if type(data["did"]) is str else data["did"]
    issues, after, chain = data.get("issues", ""), data.get("next", ""), data.get("chain_output")
    if type(did) is not list or not did or not all(map(_str, did)) or not _str(issues) or not _str(after):
        return None
    if chain is not None:
        if type(chain) is not dict or not _text(chain.get("summary")) or not chain.keys() <= {"summary", "downstream"}:
            return None
        if not _str(chain.get("downstream", "")):
            return None
        chain = WrittenChainOutput(chain["summary"], chain.get("downstream", ""))
    return WrittenHandoff(did=list(did), chain_output=chain, issues=issues, next=after)


class PlainReview(SimpleNamespace):
    """A verdict `handin_rules.agreed_plain_review` took, read as the Review model is: its fields as
    attributes (each issue and criterion result too), `model_dump()` the dict."""

    def __init__(self, plain: dict[str, Any]):
        super().__init__(approved=plain["approved"], issues=[SimpleNamespace(**i) for i in plain["issues"]],
                         criteria_results=[SimpleNamespace(**r) for r in plain["criteria_results"]])

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        return {"approved": self.approved, "issues": [vars(i).copy() for i in self.issues],
                "criteria_results": [vars(r).copy() for r in self.criteria_results]}


def review_of(data: Any) -> Any:
    """`handin.check_review(data)` (the `submit_review` tool's input): a PlainReview where
    `agreed_plain_review` takes `data`; otherwise the model's answer, or its refusal."""
    plain = agreed_plain_review(data)
    if plain is None:
        from specflux.agent.handin import check_review

        return check_review(data)
    return PlainReview(plain)
