"""The edge conditions evaluated without JSONata (flow/workflow/fast_conditions.py) answer exactly
as JSONata does, or leave the answer to it: random expressions of the grammar it compiles, over
random states with the values that part JSONata from Python (null, lists, NaN, big numbers, text)."""

from __future__ import annotations

import random

import jsonata
import pytest

from specflux.flow.workflow.fast_conditions import compile_simple

PATHS = ["a", "b", "c", "x.y", "x.z", "q.r.s", "tasks.id", "currentTaskIndex"]
VALUES = [True, False, 0, 1, 2, -1, 1.0, 0.5, 2**53, 2**60, float("nan"), float("inf"), "", "a", "1", "true",
          None, [], [1], {}, {"y": 1}, [{"id": 1}], "é𝄞"]
ATOMS = PATHS + ["true", "false", "0", "1", "2", "1.5", '"a"', '"1"', '""', "$count(tasks)", "$count(a)", "$count(x)"]
OPS = ["=", "!=", "<", "<=", ">", ">="]


def expression(rng: random.Random) -> str:
    def term() -> str:
        t = rng.choice(ATOMS)
        return t + rng.choice([" - ", " + "]) + rng.choice(["1", "0", "2.5"]) if rng.random() < 0.3 else t

    def comparison() -> str:
        return term() if rng.random() < 0.15 else f"{term()} {rng.choice(OPS)} {term()}"

    parts = [comparison()]
    for _ in range(rng.randrange(3)):
        parts += [rng.choice(["and", "or"]), comparison()]
    return " ".join(parts)


def state(rng: random.Random) -> dict:
    s = {k: rng.choice(VALUES) for k in ("a", "b", "c", "currentTaskIndex") if rng.random() < 0.85}
    if rng.random() < 0.8:
        s["x"] = rng.choice([{"y": rng.choice(VALUES), "z": rng.choice(VALUES)}, {"y": rng.choice(VALUES)},
                             [{"y": 1}], None, 3])
    if rng.random() < 0.8:
        s["tasks"] = rng.choice([[], [{"id": "1"}], [{"id": "1"}, {"id": "2"}, {"id": "3"}], [[1, 2]], {"id": 1},
                                 [1, 2], "x"])
    if rng.random() < 0.3:
        s["q"] = {"r": {"s": rng.choice(VALUES)}}
    return s


@pytest.mark.parametrize("seed", [7, 11, 2026])
def test_every_fast_answer_is_jsonatas(seed):
    rng = random.Random(seed)
    answered = 0
    for _ in range(3000):
        text, s = expression(rng), state(rng)
        fast = compile_simple(text)
        if fast is None:
            continue
        got = fast(s)
        if got is None:
            continue  # left to JSONata
        answered += 1
        want = jsonata.Jsonata(text).evaluate(s, {})  # raises if the fast path answered what JSONata refuses
        assert want is got, f"{text!r} on {s!r}: fast {got!r}, JSONata {want!r}"
    assert answered > 100  # the fast path really answers (the plain cases among these random ones)


@pytest.mark.parametrize("text, compiled", [
    ("reviewerOutput.approved = true and currentTaskIndex < $count(tasks) - 1", True),
    ("coderOutput.selfValidation.passed = false", True),
    ("a[0] = 1", False),
    ("$x = 1", False),
    ("a = 1e3", False),
    ("'x' = a", False),
])
def test_only_the_grammar_is_compiled(text, compiled):
    assert (compile_simple(text) is not None) is compiled
