"""The common shapes of edge conditions, evaluated without JSONata.

An edge's `when` is evaluated after every step. The seed's conditions are comparisons of a field
with a literal or a count (`reviewerOutput.approved = true and currentTaskIndex < $count(tasks) -
1`); handing JSONata the run state for them costs more than the rest of a step's decision (it
checks every value of its input first). `compile_simple` recognises a small grammar:

    expr  := conj ("or" conj)*
    conj  := cmp ("and" cmp)*
    cmp   := term [("=" | "!=" | "<" | "<=" | ">" | ">=") term]
    term  := atom ["-" | "+" number]
    atom  := field.path | true | false | number | "string" | $count(field)

and gives a function of the state that returns True or False, or None when the values it meets are
not plain (a missing field, null, a list where a record was expected, a comparison JSONata would
refuse, a big or odd number): then the caller evaluates the expression with JSONata as before, so
every answer given here is JSONata's own (the same value, never an error JSONata would not raise)
and everything else is left to JSONata. Anything outside the grammar is never compiled here.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Callable, Mapping

from specflux.flow.workflow.condition_fields import STATE_SCHEMA

Test = Callable[[Mapping[str, Any]], Any]  # the value, or _NO when JSONata must decide

_NO = object()
_TOKEN = re.compile(r'\s*(?:(\$count\(\s*[A-Za-z_][A-Za-z0-9_]*\s*\))|([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)'
                    r'|(\d+(?:\.\d+)?)|("[A-Za-z0-9_ .:-]*")|(!=|<=|>=|=|<|>|-|\+))')
_KEYWORDS = {"and", "or", "in", "true", "false", "null", "function"}
_LIMIT = 2 ** 53  # beyond it JSONata's numbers and Python's ints may part ways


def _number(v: Any) -> bool:
    if type(v) is int:
        return -_LIMIT < v < _LIMIT
    return type(v) is float and math.isfinite(v)


def _plain(v: Any) -> bool:
    return type(v) in (bool, str) or _number(v)


def _tokens(text: str) -> list[tuple[str, str]] | None:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        count, name, num, string, op = m.groups()
        if count:
            out.append(("count", count[len("$count("):-1].strip()))
        elif name:
            if name in ("and", "or"):
                out.append(("op", name))
            elif name in ("true", "false"):
                out.append(("lit", name))
            elif any(part in _KEYWORDS for part in name.split(".")):
                return None
            else:
                out.append(("path", name))
        elif num:
            out.append(("num", num))
        elif string:
            out.append(("str", string[1:-1]))
        else:
            out.append(("op", op))
        pos = m.end()
    return out


def _path(names: list[str]) -> Test:
    def read(state: Mapping[str, Any]) -> Any:
        value: Any = state
        for name in names:
            if type(value) is not dict and value is not state:
                return _NO
            if name not in value:
                return _NO
            value = value[name]
        return value if _plain(value) else _NO
    return read


def _count(name: str) -> Test:
    def count(state: Mapping[str, Any]) -> Any:
        items = state.get(name, _NO)
        if type(items) is not list or not all(type(i) is dict for i in items):
            return _NO
        return len(items)
    return count


def _const(value: Any) -> Test:
    return lambda state: value


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]):
        self.tokens, self.i = tokens, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expr(self) -> Test:
        parts = [self.conj()]
        while self.peek() == ("op", "or"):
            self.take()
            parts.append(self.conj())
        return parts[0] if len(parts) == 1 else _boolean(parts, any)

    def conj(self) -> Test:
        parts = [self.cmp()]
        while self.peek() == ("op", "and"):
            self.take()
            parts.append(self.cmp())
        return parts[0] if len(parts) == 1 else _boolean(parts, all)

    def cmp(self) -> Test:
        lhs = self.term()
        tok = self.peek()
        if tok and tok[0] == "op" and tok[1] in _COMPARE:
            self.take()
            return _compare(tok[1], lhs, self.term())
        return lhs

    def term(self) -> Test:
        atom = self.atom()
        tok = self.peek()
        if tok in (("op", "-"), ("op", "+")):
            self.take()
            kind, text = self.take()
            if kind != "num":
                raise ValueError("not simple")
            return _arith(tok[1], atom, _literal_number(text))
        return atom

    def atom(self) -> Test:
        kind, text = self.take()
        if kind == "path":
            return _path(text.split("."))
        if kind == "count":
            return _count(text)
        if kind == "lit":
            return _const(text == "true")
        if kind == "num":
            return _const(_literal_number(text))
        if kind == "str":
            return _const(text)
        raise ValueError("not simple")


def _literal_number(text: str) -> int | float:
    value = float(text) if "." in text else int(text)
    if not _number(value):
        raise ValueError("not simple")
    return value


def _boolean(parts: list[Test], combine) -> Test:
    def test(state: Mapping[str, Any]) -> Any:
        values = [p(state) for p in parts]
        if any(type(v) is not bool for v in values):  # JSONata's truthiness of other values: its business
            return _NO
        return combine(values)
    return test


def _equal(a: Any, b: Any) -> Any:
    if type(a) is bool or type(b) is bool:
        return type(a) is bool and type(b) is bool and a is b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b  # two numbers


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": _equal,
    "!=": lambda a, b: not _equal(a, b),
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _compare(op: str, lhs: Test, rhs: Test) -> Test:
    how = _COMPARE[op]
    ordered = op not in ("=", "!=")

    def test(state: Mapping[str, Any]) -> Any:
        a, b = lhs(state), rhs(state)
        if a is _NO or b is _NO:
            return _NO
        if ordered and not (_number(a) and _number(b)):  # strings (UTF-16 order), booleans (an error)
            return _NO
        return how(a, b)
    return test


def _arith(op: str, lhs: Test, n: int | float) -> Test:
    def test(state: Mapping[str, Any]) -> Any:
        a = lhs(state)
        if not _number(a):
            return _NO
        out = a - n if op == "-" else a + n
        return out if _number(out) else _NO
    return test


@lru_cache(maxsize=None)
def compile_simple(expression: str) -> Callable[[Mapping[str, Any]], bool | None] | None:
    """A function giving `expression`'s value (True or False) on a state, or None where JSONata
    must decide; None itself when the expression is not one of the simple shapes."""
    tokens = _tokens(expression)
    if not tokens:
        return None
    parser = _Parser(tokens)
    try:
        test = parser.expr()
    except (ValueError, IndexError):
        return None
    if parser.i != len(tokens):
        return None

    def evaluate(state: Mapping[str, Any]) -> bool | None:
        value = test(state)
        return value if type(value) is bool else None
    return evaluate


def evaluate_simple(expression: str, state: Mapping[str, Any]) -> bool | None:
    """`expression` on `state` when it is a simple shape over plain values, else None (JSONata decides)."""
    test = compile_simple(expression)
    return None if test is None else test(state)


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@lru_cache(maxsize=None)
def fields_named(expression: str) -> frozenset[str] | None:
    """The top-level state fields an expression names (a superset of what it reads: a name in a
    string adds a field, never drops one), or None when it may read anything (`*`, `$$`)."""
    if "*" in expression or "$$" in expression:
        return None
    return frozenset(w for w in _WORD.findall(expression) if w in STATE_SCHEMA)
