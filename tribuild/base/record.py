"""Records: the compiler's immutable value classes, cheap to define.

A *record* is a class decorated with ``@record``. Its *fields* are the names it annotates, in
order, each with an optional default. The decorator returns a slotted copy of the class with
an ``__init__`` taking the fields, field-wise ``__eq__`` (equal only to the same class) and
``__hash__`` and a ``__repr__`` (each unless the class writes its own), ``__match_args__``, and
``__setattr__``/``__delattr__`` that raise ``FrozenInstanceError``: what
``@dataclass(frozen=True, slots=True)`` gives, without ``field()``, ``__post_init__`` or
inheritance (records need none of them).

Why not dataclasses: they compile every generated method from source, about 0.9 ms per
class; importing the compiler spent 108 of its 172 ms there. A record compiles nothing: its
``__init__`` is a copy of a *template*, the code of an ``__init__`` with placeholder fields
``_0, _1, ...`` compiled once per field count, with the placeholders renamed to the class's
fields (compiling one ``__init__`` per class still cost 12 ms of every build's start-up);
the other methods are shared functions reading the fields through a per-class
``operator.attrgetter``. ``fields`` and ``replace`` serve records as their dataclasses
namesakes serve dataclasses.
"""

from __future__ import annotations

from functools import cache
from operator import attrgetter
from types import CodeType, FunctionType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar, dataclass_transform

    _Class = TypeVar("_Class", bound=type)
    _Record = TypeVar("_Record")
else:

    def dataclass_transform(**_):
        """Type checkers read ``record`` as a frozen dataclass maker; at run time a no-op."""
        return lambda function: function


class FrozenInstanceError(AttributeError):
    """Assigning to or deleting a field of a record (``dataclasses`` has its own, alike; that
    module is not imported here: it costs ~6 ms of CPU per process)."""


@dataclass_transform(frozen_default=True, eq_default=True)
def record(cls: _Class) -> _Class:
    """The record made from ``cls`` (see the module docstring)."""
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
    body = {
        k: v
        for k, v in cls.__dict__.items()
        if k not in defaults and k not in ("__dict__", "__weakref__")
    }
    shared = {
        "__init__": _init(cls.__qualname__, names, defaults),
        "__eq__": _eq,
        "__hash__": _hash,
        "__repr__": _repr,
        "__setattr__": _setattr,
        "__delattr__": _delattr,
        "__reduce__": _reduce,
    }
    for method, function in shared.items():
        body.setdefault(method, function)
    body["__slots__"] = names
    body["__match_args__"] = names
    body["__record_fields__"] = names
    body["_record_key"] = attrgetter(*names) if names else staticmethod(_no_fields)
    return type(cls)(cls.__name__, cls.__bases__, body)


def _init(qualname: str, names: tuple[str, ...], defaults: dict) -> FunctionType:
    if tuple(defaults) != names[len(names) - len(defaults) :]:
        raise TypeError(f"{qualname}: a field without a default follows one with a default")
    template = _template(len(names))
    renamed = {f"_{i}": name for i, name in enumerate(names)}
    code = template.replace(
        co_qualname=f"{qualname}.__init__",
        co_varnames=("self", *names),
        co_consts=tuple(renamed.get(c, c) for c in template.co_consts),
    )
    return FunctionType(code, _GLOBALS, "__init__", tuple(defaults.values()) or None)


_GLOBALS = {"_set": object.__setattr__}


@cache
def _template(count: int) -> CodeType:
    """The code of ``__init__(self, _0, ..., _{count-1})`` storing each argument as its field."""
    params = "".join(f", _{i}" for i in range(count))
    sets = "".join(f"\n    _set(self, '_{i}', _{i})" for i in range(count)) or "\n    pass"
    namespace: dict = {}
    exec(f"def __init__(self{params}):{sets}", namespace)
    return namespace["__init__"].__code__


def _no_fields(obj) -> tuple:
    return ()


def _eq(self, other):
    if other.__class__ is self.__class__:
        return self._record_key(self) == other._record_key(other)
    return NotImplemented


def _hash(self):
    return hash(self._record_key(self))


def _repr(self):
    shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__record_fields__)
    return f"{self.__class__.__qualname__}({shown})"


def _setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _reduce(self):
    return (self.__class__, tuple(getattr(self, n) for n in self.__record_fields__))


def is_record(obj: object) -> bool:
    """Whether ``obj`` is a record class or an instance of one."""
    return hasattr(obj, "__record_fields__")


def fields(obj: object) -> tuple[str, ...]:
    """The field names of a record class or instance, in order."""
    return obj.__record_fields__  # type: ignore[attr-defined, no-any-return]


def replace(obj: _Record, **changes: object) -> _Record:
    """A copy of the record ``obj`` with the given fields changed."""
    values = {n: getattr(obj, n) for n in fields(obj)}
    values.update(changes)
    return obj.__class__(**values)  # type: ignore[call-arg]
