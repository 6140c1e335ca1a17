"""Semantic types of `.tri` values, dtype promotion, and lowering from syntax.

Terms:
- *dtype*: one of ``DTYPES`` in canonical spelling (``int`` is ``int64``, ``float`` is
  ``float32``).
- *semantic type*: a span-free value (``ScalarT``, ``TensorT``, ``ListT``, ``NamedT``) that
  compares equal whenever two written types mean the same thing, whatever their position.
  ``TensorT.dims`` is None for "any rank"; ``TensorT.dtype`` is never None after lowering.
- *promotion*: the dtype of an elementwise arithmetic result (``promote``): floats beat
  integers, the wider of two floats or two integers wins, ``float16`` with ``bfloat16``
  gives ``float32``, and ``bool``/``trit`` with each other give ``int8``.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.base.record import record
from tribuild.lang import dims
from tribuild.lang.check.codes import BAD_DIM, BAD_TYPE, DIV_ZERO
from tribuild.lang.dims import DimLike
from tribuild.lang.syntax import ast

ALIASES = {"int": "int64", "float": "float32"}
DTYPES = ("bool", "trit", "int8", "int32", "int64", "float16", "bfloat16", "float32")
FLOATS = frozenset({"float16", "bfloat16", "float32"})
INTEGERS = frozenset({"int8", "int32", "int64"})
_RANK = {
    "bool": 0,
    "trit": 1,
    "int8": 2,
    "int32": 3,
    "int64": 4,
    "float16": 5,
    "bfloat16": 5,
    "float32": 6,
}


def canonical_dtype(name: str) -> str | None:
    """The canonical spelling of a dtype name, None if it is not one."""
    name = ALIASES.get(name, name)
    return name if name in DTYPES else None


def promote(a: str, b: str) -> str:
    """Dtype of an arithmetic result of operands with dtypes ``a`` and ``b``."""
    if a == b:
        return "int8" if a in ("bool", "trit") else a
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"
    if {a, b} <= {"bool", "trit"}:
        return "int8"
    return a if _RANK[a] > _RANK[b] else b


@record
class ScalarT:
    dtype: str

    def __str__(self) -> str:
        """``int`` for ``int64``: the spelling scalar parameters are written in (it is the
        same type), so a message quotes back what the user wrote."""
        return "int" if self.dtype == "int64" else self.dtype


@record
class TensorT:
    dtype: str
    dims: tuple[DimLike, ...] | None
    ternary: bool = False

    def __str__(self) -> str:
        head = "TernaryTensor" if self.ternary else "Tensor"
        if self.dims is None:
            return f"{head}<{self.dtype}>"
        return f"{head}<{self.dtype}, {format_shape(self.dims)}>"


@record
class ListT:
    elem: Type

    def __str__(self) -> str:
        return f"[{self.elem}]"


@record
class NamedT:
    """A type written as a name: a layer used as a type."""

    name: str

    def __str__(self) -> str:
        return self.name


Type = ScalarT | TensorT | ListT | NamedT


def format_shape(shape: tuple[DimLike, ...]) -> str:
    return "[" + ", ".join(dims.format_dim(d) for d in shape) + "]"


Report = Callable[[str, ast.Span, str], None]
"""``report(code, span, message)``: how lowering tells its caller about a mistake."""


def lower_dim(expr: ast.Expr, report: Report) -> DimLike:
    """A dim expression (integers, names, `?`, + - * / // %, unary -) as a ``Dim``."""
    match expr:
        case ast.IntLit(value=v):
            return dims.const(v)
        case ast.Name(id=name):
            return dims.sym(name)
        case ast.Unknown():
            return dims.ANY
        case ast.Unary(op="-", operand=inner):
            return dims.scale(lower_dim(inner, report), -1)
        case ast.Unary(op="+", operand=inner):
            return lower_dim(inner, report)
        case ast.Binary(op=op, left=l, right=r) if op in dims.BINARY_OPS:
            out = dims.BINARY_OPS[op](lower_dim(l, report), lower_dim(r, report))
            if out is None:
                report(DIV_ZERO, expr.span, "division by zero in a dimension")
                return dims.ANY
            return out
        case ast.ErrorExpr():
            return dims.ANY
    report(
        BAD_DIM,
        expr.span,
        "expected a dimension (an integer, a name, `?` or arithmetic "
        f"over them), found {type(expr).__name__.lower()}",
    )
    return dims.ANY


def lower_type(t: ast.TypeExpr, report: Report) -> Type:
    """The semantic type of a written type; mistakes go to ``report``."""
    match t:
        case ast.ScalarType(name=name):
            dtype = canonical_dtype(name)
            if dtype is None:
                report(BAD_TYPE, t.span, f"expected a scalar type, found `{name}`")
                return ScalarT("float32")
            return ScalarT(dtype)
        case ast.TensorType(ternary=ternary, dtype=written, dims=shape):
            dtype = canonical_dtype(written) if written else ("trit" if ternary else "float32")
            if dtype is None:
                report(
                    BAD_TYPE, t.span, f"expected a dtype ({', '.join(DTYPES)}), found `{written}`"
                )
                dtype = "trit" if ternary else "float32"
            if ternary and dtype != "trit":
                report(BAD_TYPE, t.span, f"a TernaryTensor holds `trit`, found `{dtype}`")
                dtype = "trit"
            lowered = None if shape is None else tuple(lower_dim(d, report) for d in shape)
            return TensorT(dtype, lowered, ternary)
        case ast.ListType(elem=elem):
            return ListT(lower_type(elem, report))
        case ast.NamedType(name=name):
            dtype = canonical_dtype(name)
            return ScalarT(dtype) if dtype else NamedT(name)
    raise TypeError(f"not a type node: {t!r}")


_TYPE_SYMBOLS: dict[TensorT, frozenset[str]] = {}


def _tensor_symbols(t: TensorT) -> frozenset[str]:
    return frozenset().union(*[dims.symbols(d) for d in t.dims or ()])


def type_symbols(t: Type) -> frozenset[str]:
    """Every dim symbol a type mentions."""
    if isinstance(t, TensorT) and t.dims is not None:
        return dims.memo(_TYPE_SYMBOLS, t, _tensor_symbols)
    if isinstance(t, ListT):
        return type_symbols(t.elem)
    return frozenset()
