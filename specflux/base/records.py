"""Value classes for the everyday commands, without `dataclasses`.

`dataclasses` imports `inspect`, which imports `ast`, `dis`, `tokenize`, `linecache` and more: on a
2-core machine ~6 ms of every `show`, `context` and `list` (whose floors, a Python process reading
one file or all of them, are ~20 ms and ~95 ms). `record` writes the same `__init__`, `__repr__`
and `__eq__` (and, for a frozen class, `__hash__` and a `__setattr__` that refuses) from the class's
annotations, as `dataclass` does for the options these classes use; `as_dict` is `asdict`.

    @record(frozen=True)
    class Edit:
        start: int
        end: int
        text: str = ""
        notes: list[str] = Factory(list)   # dataclasses' field(default_factory=list)

Fields are the class's own annotations, in order, but `ClassVar`s (no inheritance of fields, no
InitVar: none of these classes has them); `field_names(cls)` lists them, as `dataclasses.fields`.
A field whose name starts with `_` (a cache, where it came from) is set by `__init__` like any
other but left out of `==`, the hash and the repr, as `field(compare=False, repr=False)` would.
A worker's way to its first agent makes ~40 of these classes: `record` writes one method with
`exec` where `dataclass` writes five, ~0.05 ms a class against ~0.4. Modules off the everyday
paths and the run's way use `dataclasses`.
"""

from __future__ import annotations

from typing import Any, Callable


class FrozenError(AttributeError):
    """Setting a field of a frozen record (as dataclasses.FrozenInstanceError)."""


class Factory:
    """A default made fresh for each instance: `Factory(list)`."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]):
        self.make = make


_MISSING = object()


def record(cls: type | None = None, *, frozen: bool = False, kw_only: bool = False) -> Any:
    """Give `cls` an `__init__`, `__repr__`, `__eq__` (and when frozen `__hash__` and a refusing
    `__setattr__`) for its annotated fields; see the module's docstring."""

    def wrap(cls: type) -> type:
        _build(cls, frozen, kw_only)
        return cls

    return wrap if cls is None else wrap(cls)


def _build(cls: type, frozen: bool, kw_only: bool) -> None:
    names = [name for name, kind in cls.__dict__.get("__annotations__", {}).items()
             if not str(kind).startswith(("ClassVar", "typing.ClassVar"))]  # (a class constant, not a field)
    defaults: dict[str, Any] = {}
    params, body = [], []
    set_ = "object.__setattr__(self, {0!r}, {1})" if frozen else "self.{0} = {1}"
    for name in names:
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, Factory):
            defaults[f"_f_{name}"] = value.make
            params.append(f"{name}=_MISSING")
            body.append(set_.format(name, f"_f_{name}() if {name} is _MISSING else {name}"))
            delattr(cls, name)
        elif value is not _MISSING:
            defaults[f"_d_{name}"] = value
            params.append(f"{name}=_d_{name}")
            body.append(set_.format(name, name))
        else:
            if not kw_only and defaults:
                raise TypeError(f"non-default field {name!r} follows a default one in {cls.__name__}")
            params.append(name)
            body.append(set_.format(name, name))
    signature = ", ".join((["*"] if kw_only and params else []) + params)
    source = f"def __init__(self, {signature}):\n    " + ("\n    ".join(body) or "pass") + "\n"
    namespace: dict[str, Any] = {"_MISSING": _MISSING, **defaults}
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), namespace)  # as dataclasses does
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    cls._record_fields = tuple(names)  # type: ignore[attr-defined]
    fields = tuple(n for n in names if not n.startswith("_"))  # compared, hashed and shown

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in fields) + ")"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in fields)

    cls.__repr__ = __repr__
    cls.__eq__ = __eq__
    if frozen:
        def __setattr__(self, name: str, value: Any) -> None:
            raise FrozenError(f"cannot assign to field {name!r}")

        def __delattr__(self, name: str) -> None:
            raise FrozenError(f"cannot delete field {name!r}")

        def __hash__(self) -> int:
            return hash(tuple(getattr(self, n) for n in fields))

        cls.__setattr__ = __setattr__
        cls.__delattr__ = __delattr__
        cls.__hash__ = __hash__
    else:
        cls.__hash__ = None  # mutable and compared by value: unhashable, as a dataclass


def field_names(cls: type) -> tuple[str, ...]:
    """The fields of a record class, in order."""
    return cls._record_fields  # type: ignore[attr-defined]


def as_dict(value: Any) -> Any:
    """`dataclasses.asdict`: a record's fields as a dict, records, lists, tuples and dicts within
    converted too."""
    fields = getattr(type(value), "_record_fields", None)
    if fields is not None:
        return {n: as_dict(getattr(value, n)) for n in fields}
    if isinstance(value, list):
        return [as_dict(v) for v in value]
    if isinstance(value, tuple):
        return type(value)(as_dict(v) for v in value) if not hasattr(value, "_fields") else type(value)(*(as_dict(v) for v in value))
    if isinstance(value, dict):
        return {as_dict(k): as_dict(v) for k, v in value.items()}
    return value
