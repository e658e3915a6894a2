"""What a hand-in must agree with, checked on plain values, without its pydantic model.

`handin.py` checks a hand-in's shape with pydantic, then these rules: a verdict agrees with itself
(`agrees`) and judges the task's own criteria (`judges`). `plain_review` is the way round the
model for the common case of an agent CLI's `specflux submit-review` (a process of its own, where
importing pydantic and building the models is ~80 ms of its ~120) and of the `submit_review` tool
(plain_inputs.review_of: an API session or its replay need not import pydantic): a verdict every
field of which already has its exact type, no text to strip and no key too many or missing is
taken as the model would dump it; anything else goes to the model, which words every refusal
(`tests/agent/test_handin.py` holds the two to the same answers).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any, Literal, Sequence

from specflux.base.errors import SpecfluxError

Kind = Literal["review", "tasks"]
KEY_VAR = "SPECFLUX_HANDIN_KEY"  # the step's key: in its session's environment alone (handin_channel.py)
STEP_VAR = "SPECFLUX_HANDIN_STEP"
SEVERITIES = ("blocker", "major", "minor")


class HandinError(SpecfluxError):
    """A hand-in that does not fit; the message says why, in words the agent can act on."""


def sign(key: str, step: str, kind: str, data: Any) -> str:
    """A hand-in's seal: HMAC-SHA256 under the step's key of its step, kind and data."""
    body = json.dumps({"step": step, "kind": kind, "data": data}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hmac.new(key.encode(), body.encode(), hashlib.sha256).hexdigest()


def agrees(approved: bool, results: Sequence[tuple[str, bool]], blockers: Sequence[str]) -> None:
    """HandinError when a verdict contradicts itself: no criterion judged, or approved with a
    criterion unmet or a blocker issue listed."""
    if not results:
        raise HandinError("criteria_results is empty: give one {criterion, met} for every acceptance "
                          "criterion of the task")
    if approved:
        unmet = [criterion for criterion, met in results if not met]
        if unmet:
            which = listed("criterion", "criteria", unmet)
            raise HandinError(f"approved is true but {which} not met: approve only when every criterion is met, "
                              "or set approved to false")
        if blockers:
            which = listed("blocker issue", "blocker issues", list(blockers))
            raise HandinError(f"approved is true but {which} listed: approve only without blockers, or set "
                              "approved to false")


_NUMBERED = re.compile(r"(?:#|criterion\s*|ac\s*)?(\d+)\.?", re.I)


def judges(judged_criteria: Sequence[str], criteria: Sequence[str]) -> None:
    """HandinError listing what a verdict must answer, unless its criteria (`judged_criteria`)
    judge each of the task's own `criteria` (by number, `1` / `#1` / `criterion 1`, or by exact
    text) and nothing else. A review of criteria the task does not have cannot complete it."""
    if not criteria:
        return
    texts = {" ".join(c.split()).casefold(): n for n, c in enumerate(criteria, 1)}
    judged: set[int] = set()
    unknown: list[str] = []
    for criterion in judged_criteria:
        key = criterion.strip()
        number = _NUMBERED.fullmatch(key)
        n = int(number.group(1)) if number else texts.get(" ".join(key.split()).casefold())
        if n is None or not 1 <= n <= len(criteria):
            unknown.append(key)
        else:
            judged.add(n)
    missing = [n for n in range(1, len(criteria) + 1) if n not in judged]
    if not unknown and not missing:
        return
    problems = []
    if unknown:
        problems.append(f"not criteria of this task: {', '.join(repr(u) for u in unknown[:5])}")
    if missing:
        problems.append(f"not judged: {', '.join(map(str, missing))}")
    shown = "; ".join(f"{n}. {c}" for n, c in enumerate(criteria, 1))
    raise HandinError(f"criteria_results must judge each acceptance criterion of the task, by number or exact "
                      f"text ({'; '.join(problems)}). The criteria: {shown}")


def plain_review(data: Any) -> dict[str, Any] | None:
    """`data` as the Review model would dump it, where the model would take it as it is; None
    where the model must judge it (a wrong or missing field, a key too many, text with spaces to
    strip): it then accepts or refuses it, in its own words."""
    if type(data) is not dict or not {"approved", "criteria_results"} <= data.keys() <= {"approved", "issues",
                                                                                          "criteria_results"}:
        return None
    approved, issues, results = data["approved"], data.get("issues", []), data["criteria_results"]
    if type(approved) is not bool or type(issues) is not list or type(results) is not list:
        return None
    if not all(_exactly(i, "severity", "description") and i["severity"] in SEVERITIES and _text(i["description"])
               for i in issues):
        return None
    if not all(_exactly(r, "criterion", "met") and _text(r["criterion"]) and type(r["met"]) is bool for r in results):
        return None
    return {"approved": approved,
            "issues": [{"severity": i["severity"], "description": i["description"]} for i in issues],
            "criteria_results": [{"criterion": r["criterion"], "met": r["met"]} for r in results]}


def agreed_plain_review(data: Any) -> dict[str, Any] | None:
    """`plain_review(data)` held to `agrees` as the model's verdict is (HandinError when it
    contradicts itself); None where the model must judge it."""
    plain = plain_review(data)
    if plain is not None:
        agrees(plain["approved"], [(r["criterion"], r["met"]) for r in plain["criteria_results"]],
               [i["description"] for i in plain["issues"] if i["severity"] == "blocker"])
    return plain


def _exactly(item: Any, *keys: str) -> bool:
    return type(item) is dict and item.keys() == set(keys) and type(item[keys[0]]) is str


def _text(value: Any) -> bool:
    """A string the model keeps as it is: not empty, no white space at either end (Python's
    `isspace` counts every character pydantic strips, and a few more: those go to the model)."""
    return type(value) is str and value != "" and not value[0].isspace() and not value[-1].isspace()


def listed(one: str, many: str, names: list[str]) -> str:
    quoted = [f'"{n}"' for n in names]
    return f"{one} {quoted[0]} is" if len(quoted) == 1 else f"{many} {joined(quoted)} are"


def joined(items: Any) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
