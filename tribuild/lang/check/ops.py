"""Operators on abstract tensors: elementwise arithmetic with broadcasting, comparisons, `@`.

Terms:
- *broadcasting* (NumPy's rule): shapes are aligned on their last dims; a pair of dims is
  compatible when equal or when one is 1 (or `?`); missing leading dims count as 1.
- *result dtype*: ``types.promote`` of the operands' dtypes; a Python-like scalar operand
  leaves a tensor's dtype alone, except that a float scalar or `/` makes an integer tensor
  ``float32``; comparisons give ``bool``; ``@`` with a ternary operand gives ``float32``.
"""

from __future__ import annotations

from tribuild.lang import dims
from tribuild.lang.check.codes import BAD_OPERANDS, BROADCAST, MATMUL, RANK_MISMATCH
from tribuild.lang.check.unify import definitely_different
from tribuild.lang.check.values import POISON, TensorV, Trit, Value, is_float, is_number, kind_of
from tribuild.lang.dims import AnyDim, DimLike
from tribuild.lang.syntax import ast
from tribuild.lang.types import FLOATS, TensorT, format_shape, promote

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.lang.check.consteval import Ctx

_ARITH = ("+", "-", "*", "/", "//", "%", "**")
_COMPARE = ("==", "!=", "<", "<=", ">", ">=")


def broadcast_dim(a: DimLike, b: DimLike) -> DimLike | None:
    """The broadcast of two dims, None when they are definitely incompatible."""
    if a == b or dims.as_int(b) == 1:
        return a
    if dims.as_int(a) == 1:
        return b
    if isinstance(a, AnyDim):
        return b
    if isinstance(b, AnyDim):
        return a
    return None if definitely_different(a, b) else a


def broadcast(a: tuple[DimLike, ...], b: tuple[DimLike, ...]) -> tuple[DimLike, ...] | int:
    """The broadcast shape, or the index (from the end, 1-based) of the first clash."""
    n = max(len(a), len(b))
    pa = (dims.const(1),) * (n - len(a)) + a
    pb = (dims.const(1),) * (n - len(b)) + b
    out = []
    for i, (x, y) in enumerate(zip(pa, pb, strict=True)):
        d = broadcast_dim(x, y)
        if d is None:
            return n - i
        out.append(d)
    return tuple(out)


def _operand_labels(node: ast.Expr, a: Value, b: Value) -> tuple[tuple[ast.Span, str], ...]:
    if isinstance(node, ast.Binary):
        return ((node.left.span, kind_of(a)), (node.right.span, kind_of(b)))
    return ()


def tensor_unary(op: str, v: TensorV, node: ast.Expr, ctx: Ctx) -> Value:
    if op in "+-":
        return v if v.type.dtype != "bool" else _bad(op, v, v, node, ctx)
    return (
        TensorV(TensorT("bool", v.type.dims))
        if v.type.dtype == "bool"
        else _bad(op, v, v, node, ctx)
    )


def _bad(op: str, a: Value, b: Value, node: ast.Expr, ctx: Ctx) -> Value:
    ctx.sink.error(
        BAD_OPERANDS,
        node.span,
        f"`{op}` is not defined for {kind_of(a)} and {kind_of(b)}",
        secondary=_operand_labels(node, a, b),
    )
    return POISON


def _scalar_result_dtype(op: str, tensor: TensorT, scalar: Value) -> str:
    dtype = "float32" if tensor.ternary else tensor.dtype
    if dtype not in FLOATS and (is_float(scalar) or op == "/"):
        return "float32"
    return dtype


def tensor_binary(op: str, a: Value, b: Value, node: ast.Expr, ctx: Ctx) -> Value:
    """``a op b`` where at least one operand is a tensor."""
    if op == "@":
        if isinstance(a, TensorV) and isinstance(b, TensorV):
            return matmul(a.type, b.type, node, ctx)
        return _bad(op, a, b, node, ctx)
    if op not in _ARITH + _COMPARE:
        return _bad(op, a, b, node, ctx)
    if not (isinstance(a, TensorV) and isinstance(b, TensorV)):
        tensor, scalar = (a, b) if isinstance(a, TensorV) else (b, a)
        assert isinstance(tensor, TensorV)  # the caller's promise: one operand is a tensor
        if not (is_number(scalar) or isinstance(scalar, Trit)):
            return _bad(op, a, b, node, ctx)
        dtype = "bool" if op in _COMPARE else _scalar_result_dtype(op, tensor.type, scalar)
        return TensorV(TensorT(dtype, tensor.type.dims))
    ta, tb = a.type, b.type
    dtype = "bool" if op in _COMPARE else promote(ta.dtype, tb.dtype)
    if op == "/" and dtype not in FLOATS:
        dtype = "float32"
    if ta.dims is None or tb.dims is None:
        return TensorV(TensorT(dtype, None))
    shape = broadcast(ta.dims, tb.dims)
    if isinstance(shape, int):
        x = ta.dims[-shape] if shape <= len(ta.dims) else dims.const(1)
        y = tb.dims[-shape] if shape <= len(tb.dims) else dims.const(1)
        ctx.sink.error(
            BROADCAST,
            node.span,
            f"operands of `{op}` do not broadcast: {format_shape(ta.dims)} and "
            f"{format_shape(tb.dims)} (dim -{shape} is {dims.format_dim(x)} on the left and "
            f"{dims.format_dim(y)} on the right)",
            label="expected equal dims or 1",
            secondary=_operand_labels(node, a, b),
        )
        return POISON
    return TensorV(TensorT(dtype, shape))


def matmul(a: TensorT, b: TensorT, node: ast.Expr, ctx: Ctx) -> Value:
    """Batched matrix product with NumPy's rules for 1-D operands and batch broadcasting."""
    dtype = promote(a.dtype, b.dtype)
    if a.ternary or b.ternary:
        other = b if a.ternary else a
        dtype = other.dtype if other.dtype in FLOATS else "float32"
    if a.dims is None or b.dims is None:
        return TensorV(TensorT(dtype, None))
    if not a.dims or not b.dims:
        ctx.sink.error(
            RANK_MISMATCH,
            node.span,
            "`@` needs tensors of rank 1 or more, found a rank-0 tensor",
            secondary=_operand_labels(node, TensorV(a), TensorV(b)),
        )
        return POISON
    left = a.dims if len(a.dims) > 1 else (dims.const(1),) + a.dims
    right = b.dims if len(b.dims) > 1 else b.dims + (dims.const(1),)
    k1, k2 = left[-1], right[-2]
    if not isinstance(k1, AnyDim) and not isinstance(k2, AnyDim) and definitely_different(k1, k2):
        ctx.sink.error(
            MATMUL,
            node.span,
            f"`@` inner dims differ: the left operand {format_shape(a.dims)} has "
            f"{dims.format_dim(k1)} columns, the right {format_shape(b.dims)} has "
            f"{dims.format_dim(k2)} rows",
            label="expected equal inner dims",
            secondary=_operand_labels(node, TensorV(a), TensorV(b)),
        )
        return POISON
    batch = broadcast(left[:-2], right[:-2])
    if isinstance(batch, int):
        ctx.sink.error(
            BROADCAST,
            node.span,
            f"`@` batch dims {format_shape(left[:-2])} and "
            f"{format_shape(right[:-2])} cannot be broadcast",
            secondary=_operand_labels(node, TensorV(a), TensorV(b)),
        )
        return POISON
    out = (
        batch + ((left[-2],) if len(a.dims) > 1 else ()) + ((right[-1],) if len(b.dims) > 1 else ())
    )
    return TensorV(TensorT(dtype, out))
