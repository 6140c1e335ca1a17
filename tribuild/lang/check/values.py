"""Values the checker computes: construction-time values and abstract tensors.

Terms:
- *concrete value*: Python ``int``, ``float``, ``bool``, ``str``, a ``tuple`` (a `.tri`
  list) of concrete values, a ``Trit``, a default (``None``), or a ``LayerV`` whose arguments
  are concrete.
- *symbolic value* (generic checking, where construction parameters are not known):
  ``Sym`` (an integer known only as a ``Dim`` over parameter names), ``Unk`` (a value of a
  known type but unknown value), ``UnkList`` (a list of unknown length; ``elem`` is what any
  element looks like), ``Choice`` (one of several values, picked by an unknown condition).
- *abstract tensor*: ``TensorV``, a tensor known only by its type (dtype and shape).
- *layer value*: ``LayerV``, a built-in layer (``ref`` None) or a user layer instance, with
  its evaluated construction arguments (defaults applied, in parameter order).
- *default*: ``None``, an argument of a built-in left to its default that is not a value of
  its own (a pool's ``stride``: the kernel size, as in PyTorch; a reduction's ``dims``: all).
- *callee*: ``Callee``, a name that can be called: a built-in function or constructor, or a
  user item (``ref``).
- *InstanceKey*: the canonical, hashable name of one instantiation of a user layer.
- *POISON*: the value of an expression that already produced an error; every operation on
  it yields POISON without reporting again, so one mistake gives one diagnostic. A POISON
  decoded from the persistent store is a different object that compares equal, so tests
  for it compare (``is_poison``), they do not rely on identity.
- *trackable dim*: a ``Dim`` of at most ``DIM_SIZE_LIMIT`` atoms (quotients counted with their
  operands) whose coefficients fit in int64. Repeated squaring or flooring (``k = k * k`` in
  a loop, pooling 100 times) would otherwise grow symbolic values without bound; past the
  limit a value is only known to be an integer (``?`` as a dim), which is never wrong.
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.lang import dims
from tribuild.lang.check.env import ItemRef
from tribuild.lang.dims import DimLike
from tribuild.lang.types import FLOATS, NamedT, ScalarT, TensorT, Type


@record
class Trit:
    value: int


@record
class Sym:
    dim: dims.Dim


@record
class Unk:
    type: Type


@record
class UnkList:
    elem: Value | None


@record
class Choice:
    options: tuple[Value, ...]


@record
class RangeV:
    start: Value
    end: Value


@record
class TensorV:
    type: TensorT


@record
class LayerV:
    name: str
    args: tuple[tuple[str, Value], ...]
    ref: ItemRef | None = None


@record
class Callee:
    name: str
    ref: ItemRef | None = None


Value = (
    int
    | float
    | bool
    | str
    | tuple
    | Trit
    | Sym
    | Unk
    | UnkList
    | Choice
    | RangeV
    | TensorV
    | LayerV
    | Callee
    | None
)


@record
class InstanceKey:
    path: str
    item_id: str
    name: str
    args: tuple[tuple[str, Value], ...]


POISON = Unk(NamedT("<error>"))
_INTS = frozenset({ScalarT("int64"), ScalarT("int32"), ScalarT("int8")})
_BOOL, _TRIT = Unk(ScalarT("bool")), Unk(ScalarT("trit"))


def is_poison(v: Value) -> bool:
    """``v == POISON``, without calling ``__eq__`` of values that are not even an ``Unk``."""
    return type(v) is Unk and v.type == POISON.type


def is_int(v: Value) -> bool:
    """An integer at construction time, known or symbolic (``bool`` is not an int here)."""
    return type(v) is int or type(v) is Sym or (type(v) is Unk and v.type in _INTS)


def is_bool(v: Value) -> bool:
    return type(v) is bool or (type(v) is Unk and v == _BOOL)


def is_float(v: Value) -> bool:
    return type(v) is float or (
        type(v) is Unk and isinstance(v.type, ScalarT) and v.type.dtype in FLOATS
    )


def is_number(v: Value) -> bool:
    return is_int(v) or is_float(v) or type(v) is Trit or (type(v) is Unk and v == _TRIT)


def is_concrete(v: Value) -> bool:
    if v is None or isinstance(v, (bool, int, float, str, Trit)):
        return True
    if isinstance(v, tuple):
        return all(is_concrete(x) for x in v)
    if isinstance(v, LayerV):
        return all(is_concrete(x) for _, x in v.args)
    return False


def as_dim(v: Value) -> DimLike:
    """An integer value as a dim; anything unknown is ``?``."""
    if type(v) is int:
        return dims.const(v)
    if isinstance(v, Sym):
        return v.dim
    return dims.ANY


def from_dim(d: DimLike) -> Value:
    """A dim as an integer value: ``int`` when constant, ``Sym`` when trackable, else unknown."""
    n = dims.as_int(d)
    if n is not None:
        return n
    d = trackable(d)
    return Unk(ScalarT("int64")) if isinstance(d, dims.AnyDim) else Sym(d)


DIM_SIZE_LIMIT = 64
INT64_MAX = 2**63 - 1


def trackable(d: DimLike) -> DimLike:
    """``d`` if it is a trackable dim (or a constant), else ``?``. Never recurses, so it is safe
    on a dim of any depth."""
    if isinstance(d, dims.AnyDim) or dims.as_int(d) is not None:
        return d
    size, pending = 0, [d]
    while pending:
        for mono, coeff in pending.pop().terms:
            size += 1 + len(mono)
            if size > DIM_SIZE_LIMIT or not -INT64_MAX <= coeff <= INT64_MAX:
                return dims.ANY
            for atom in mono:
                if atom.__class__ is dims.Quot:
                    pending += (atom.num, atom.den)
    return d


def normalise(v: object) -> Value:
    """A user-supplied argument (lists, ints...) in canonical form: lists become tuples."""
    if isinstance(v, list | tuple):
        return tuple(normalise(x) for x in v)
    return v  # type: ignore[return-value]


def format_value(v: Value) -> str:
    """`.tri` spelling of a value, for messages and instance descriptions."""
    match v:
        case bool():
            return "true" if v else "false"
        case int() | float() | str():
            return repr(v) if isinstance(v, str) else str(v)
        case tuple():
            return "[" + ", ".join(format_value(x) for x in v) + "]"
        case Trit(value=t):
            return f"trit({t})"
        case Sym(dim=d):
            return dims.format_dim(d)
        case Unk(type=t):
            return f"<some {t}>"
        case UnkList(elem=e):
            return f"[{format_value(e) if e is not None else ''}...]"
        case Choice(options=opts):
            return " or ".join(format_value(o) for o in opts)
        case RangeV(start=a, end=b):
            return f"{format_value(a)}..{format_value(b)}"
        case TensorV(type=t):
            return str(t)
        case LayerV(name=name, args=args):
            return f"{name}(" + ", ".join(f"{k}={format_value(x)}" for k, x in args) + ")"
        case Callee(name=name):
            return name
    return repr(v)


def describe_instance(key: InstanceKey) -> str:
    """``BasicBlock cin=64 cout=128 stride=2``."""
    return " ".join([key.name] + [f"{k}={format_value(v)}" for k, v in key.args])


def kind_of(v: Value) -> str:
    """A short description of what a value is, for "expected X, found Y" messages."""
    match v:
        case bool():
            return "bool"
        case int() | Sym():
            return "int"
        case float():
            return "float"
        case str():
            return "string"
        case tuple() | UnkList():
            return "list"
        case Trit():
            return "trit"
        case Unk(type=t):
            return str(t)
        case TensorV(type=t):
            return str(t)
        case LayerV(name=name):
            return f"layer {name}"
        case Callee(name=name):
            return f"`{name}`"
        case RangeV():
            return "range"
        case Choice(options=opts):
            return " or ".join(dict.fromkeys(kind_of(o) for o in opts))
    return type(v).__name__
