"""base/records.py: the value classes of the everyday commands behave as the dataclasses they
replace (init, defaults, fresh factories, keyword-only, frozen, equality, hashing, repr, asdict)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from specflux.base.records import Factory, FrozenError, as_dict, field_names, record


@record(frozen=True, kw_only=True)
class Inner:
    number: int
    note: str | None = None
    after: int  # keyword-only: a field without a default may follow one with


@record
class Outer:
    name: str
    inner: Inner | None = None
    items: list[Inner] = Factory(list)
    table: dict[str, int] = Factory(dict)
    KIND: ClassVar[str] = "outer"


@dataclasses.dataclass
class OuterDC:
    name: str
    inner: object = None
    items: list = dataclasses.field(default_factory=list)
    table: dict = dataclasses.field(default_factory=dict)


def test_a_record_is_built_compared_and_shown_as_a_dataclass():
    a = Inner(number=1, after=2)
    assert (a.number, a.note, a.after) == (1, None, 2)
    with pytest.raises(TypeError):
        Inner(1, after=2)  # keyword-only
    with pytest.raises(TypeError):
        Inner(number=1)  # `after` is required
    assert a == Inner(number=1, after=2) and a != Inner(number=1, after=3) and hash(a) == hash(Inner(number=1, after=2))
    assert repr(a) == "Inner(number=1, note=None, after=2)"
    with pytest.raises(FrozenError):
        a.number = 5  # type: ignore[misc]
    assert isinstance(FrozenError(), AttributeError)

    x, y = Outer("x"), Outer("y", a, [a])
    x.items.append(a)
    assert Outer("z").items == [] and x.items == [a]  # a fresh list each time
    assert field_names(Outer) == ("name", "inner", "items", "table") and Outer.KIND == "outer"
    with pytest.raises(TypeError):
        hash(x)  # mutable: unhashable, as a dataclass
    x.name = "renamed"
    assert x.name == "renamed" and y != x and y == Outer("y", a, [a])


def test_as_dict_is_asdict():
    inner = Inner(number=1, note="n", after=2)
    value = Outer("y", inner, [inner], {"k": 1})
    plain = OuterDC("y", dataclasses.asdict(dataclasses.make_dataclass("Inner", ["number", "note", "after"])(1, "n", 2)),
                    [{"number": 1, "note": "n", "after": 2}], {"k": 1})
    assert as_dict(value) == dataclasses.asdict(plain)


def test_a_required_field_after_a_default_is_refused_unless_keyword_only():
    with pytest.raises(TypeError, match="follows a default"):
        @record
        class Wrong:
            a: int = 0
            b: int


def test_a_field_named_with_an_underscore_is_kept_out_of_eq_hash_and_repr():
    """As dataclasses' `field(compare=False, repr=False)`: a cache or a note of where a value came
    from (workflow_file.Edge's compiled condition) does not make two equal values differ."""
    @record(frozen=True)
    class Edge:
        id: str
        when: str | None = None
        _compiled: object = None

    a, b = Edge("e", "x", _compiled=object()), Edge("e", "x")
    assert a._compiled is not None and b._compiled is None
    assert a == b and hash(a) == hash(b) and repr(a).endswith(".Edge(id='e', when='x')")
    assert a != Edge("f", "x") and field_names(Edge) == ("id", "when", "_compiled")
