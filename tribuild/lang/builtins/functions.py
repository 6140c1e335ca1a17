"""Built-in functions: their parameters and typing/shape rules.

Terms:
- *FnSpec*: the parameters in order as ``(name, default)`` (``REQUIRED`` for none) and the
  rule ``(args, site) -> value`` over evaluated arguments.
- *reduction*: `mean`/`sum`/`max` over ``dims`` (an int, a list, or absent for all dims),
  dropping them or, with ``keepdim``, keeping them as 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tribuild.lang import dims
from tribuild.lang.builtins.layers import REQUIRED, Required
from tribuild.lang.builtins.shapes import (
    Site,
    axis,
    expect_dim,
    float_dtype,
    pool2d,
    product,
    tensor_of,
    window,
)
from tribuild.lang.check.codes import (
    BAD_TYPE,
    CONCAT_MISMATCH,
    CONST_TYPE,
    DIM_MISMATCH,
    DIVISIBILITY,
    NOT_TRIT,
    OUT_OF_RANGE,
    RESHAPE,
    TYPE_MISMATCH,
)
from tribuild.lang.check.ops import matmul
from tribuild.lang.check.unify import definitely_different
from tribuild.lang.check.values import (
    POISON,
    TensorV,
    Trit,
    Unk,
    Value,
    as_dim,
    from_dim,
    is_bool,
    is_int,
    is_number,
    is_poison,
    kind_of,
)
from tribuild.lang.dims import ANY
from tribuild.lang.syntax import ast
from tribuild.lang.types import DTYPES, FLOATS, ScalarT, TensorT, canonical_dtype

Args = dict[str, Value]


class FnSpec:
    """``names``: the parameter names, in order; ``required``: those without a default;
    ``defaults``: the defaults of the others."""

    __slots__ = ("params", "rule", "names", "required", "defaults")

    def __init__(
        self, params: tuple[tuple[str, Value | Required], ...], rule: Callable[[Args, Site], Value]
    ) -> None:
        self.params, self.rule = params, rule
        self.names = tuple(p for p, _ in params)
        self.required = frozenset(p for p, d in params if d is REQUIRED)
        self.defaults = {p: d for p, d in params if not isinstance(d, Required)}


def _elementwise(args: Args, site: Site) -> Value:
    x = args["x"]
    t = tensor_of(x, site)
    if t is None:
        return POISON
    if t.dtype in FLOATS and not t.ternary:
        return x  # the same type: the same value (and object, which later lookups by identity keep)
    return TensorV(TensorT(float_dtype(t), t.dims))


def _scalar_or_tensor(name: str) -> Callable[[Args, Site], Value]:
    def rule(args: Args, site: Site) -> Value:
        if isinstance(args["x"], TensorV):
            return _elementwise(args, site)
        return _scalar_function(name, args["x"], site)

    return rule


def _scalar_function(name: str, v: Value, site: Site) -> Value:
    """`sqrt`/`exp` of a construction-time number."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if name == "sqrt" and v < 0:
            return _const_error(site, f"sqrt of a negative number ({v})")
        try:
            return {"sqrt": math.sqrt, "exp": math.exp}[name](v)
        except OverflowError:
            return _const_error(site, f"{name}({v}) overflows a float")
    if is_number(v):
        return Unk(ScalarT("float32"))
    return (
        POISON
        if is_poison(v)
        else _const_error(site, f"`{name}` expects a number or a tensor, found {kind_of(v)}")
    )


def _const_error(site: Site, message: str) -> Value:
    site.ctx.sink.error(CONST_TYPE, site.span, message)
    return POISON


def _softmax(args: Args, site: Site) -> Value:
    t = tensor_of(args["x"], site, min_rank=1)
    if t is None or axis(args["dim"], None if t.dims is None else len(t.dims), site) is None:
        return POISON
    return TensorV(TensorT(float_dtype(t), t.dims))


def _flatten(args: Args, site: Site) -> Value:
    t = tensor_of(args["x"], site)
    if t is None or t.dims is None:
        return POISON if t is None else TensorV(TensorT(t.dtype, None))
    if not t.dims:
        return TensorV(TensorT(t.dtype, (dims.const(1),)))
    start = axis(args["start_dim"], len(t.dims), site)
    if start is None:
        return POISON
    return TensorV(TensorT(t.dtype, t.dims[:start] + (product(t.dims[start:]),)))


def _int_list(v: Value, site: Site, what: str) -> tuple[Value, ...] | None:
    items = (v,) if is_int(v) else v
    if not isinstance(items, tuple) or not all(is_int(x) for x in items):
        if not is_poison(v) and not (isinstance(items, tuple) and POISON in items):
            site.error(TYPE_MISMATCH, f"expected {what} (a list of ints), found {kind_of(v)}")
        return None
    return items


def _reshape(args: Args, site: Site) -> Value:
    t = tensor_of(args["x"], site)
    shape = _int_list(args["shape"], site, "a shape")
    if t is None or shape is None:
        return POISON
    inferred = [i for i, d in enumerate(shape) if d == -1]
    if len(inferred) > 1:
        return site.error(RESHAPE, f"at most one dim may be -1 or ?, found {len(inferred)}")
    out = [as_dim(d) for d in shape]
    if t.dims is None:
        return TensorV(
            TensorT(t.dtype, tuple(ANY if i in inferred else d for i, d in enumerate(out)))
        )
    total, known = (
        product(t.dims),
        product(tuple(d for i, d in enumerate(out) if i not in inferred)),
    )
    if inferred:
        quotient = dims.floordiv(total, known)
        n_total, n_known = dims.as_int(total), dims.as_int(known)
        if quotient is None or (n_total is not None and n_known is not None and n_total % n_known):
            return site.error(
                RESHAPE,
                f"cannot reshape {t} to {args['shape']!r}: "
                f"{dims.format_dim(total)} elements are not a multiple of {dims.format_dim(known)}",
            )
        out[inferred[0]] = quotient
    elif definitely_different(total, known):
        return site.error(
            RESHAPE,
            f"cannot reshape {t} ({dims.format_dim(total)} elements) to a shape "
            f"of {dims.format_dim(known)} elements",
            label="expected the same number of elements",
        )
    return TensorV(TensorT(t.dtype, tuple(out)))


def _transpose(args: Args, site: Site) -> Value:
    t = tensor_of(args["x"], site)
    if t is None or t.dims is None:
        return POISON if t is None else TensorV(t)
    a, b = axis(args["dim0"], len(t.dims), site), axis(args["dim1"], len(t.dims), site)
    if a is None or b is None:
        return POISON
    out = list(t.dims)
    out[a], out[b] = out[b], out[a]
    return TensorV(TensorT(t.dtype, tuple(out)))


def _permute(args: Args, site: Site) -> Value:
    t = tensor_of(args["x"], site)
    order = _int_list(args["dims"], site, "a permutation")
    if t is None or order is None or t.dims is None:
        return POISON if t is None or order is None else TensorV(t)
    found = [axis(a, len(t.dims), site) for a in order]
    axes = [a for a in found if a is not None]
    if len(axes) != len(found):
        return POISON
    if sorted(axes) != list(range(len(t.dims))):
        return site.error(
            TYPE_MISMATCH, f"expected a permutation of 0..{len(t.dims) - 1}, found {list(order)}"
        )
    return TensorV(TensorT(t.dtype, tuple(t.dims[a] for a in axes)))


def _concat(args: Args, site: Site) -> Value:
    xs = args["xs"]
    if not isinstance(xs, tuple) or not xs:
        return site.error(
            TYPE_MISMATCH, f"expected a non-empty list of tensors, found {kind_of(xs)}"
        )
    types = [tensor_of(x, site) for x in xs]
    tensors = [t for t in types if t is not None]
    if len(tensors) != len(types):
        return POISON
    dtype = tensors[0].dtype
    shapes = [t.dims for t in tensors if t.dims is not None]
    if len(shapes) != len(tensors):
        return TensorV(TensorT(dtype, None))
    first = shapes[0]
    d = axis(args["dim"], len(first), site)
    if d is None:
        return POISON
    out = list(first)
    for k, shape in enumerate(shapes[1:], 1):
        if len(shape) != len(first):
            return site.error(
                CONCAT_MISMATCH,
                f"tensor {k} has rank {len(shape)}, expected rank {len(first)}",
            )
        for i, (x, y) in enumerate(zip(first, shape, strict=True)):
            if i != d and definitely_different(x, y):
                return site.error(
                    CONCAT_MISMATCH,
                    f"tensor {k} has {dims.format_dim(y)} at dim {i}, "
                    f"expected {dims.format_dim(x)} (only dim {d} may differ)",
                )
        out[d] = dims.add(out[d], shape[d])
    return TensorV(TensorT(dtype, tuple(out)))


def _reduce(args: Args, site: Site) -> Value:
    t = tensor_of(args["x"], site)
    if t is None or t.dims is None:
        return POISON if t is None else TensorV(t)
    which = range(len(t.dims)) if args["dims"] is None else _int_list(args["dims"], site, "dims")
    if which is None or not is_bool(args["keepdim"]):
        return POISON if which is None else site.error(TYPE_MISMATCH, "expected a bool for keepdim")
    axes = {axis(a, len(t.dims), site) for a in which}
    if None in axes:
        return POISON
    keep = args["keepdim"] is True
    out = tuple(
        dims.const(1) if i in axes else d for i, d in enumerate(t.dims) if keep or i not in axes
    )
    return TensorV(TensorT(t.dtype, out))


def _adaptive_pool(args: Args, site: Site) -> Value:
    t = tensor_of(args["x"], site)
    size = _int_list(args["size"], site, "an output size")
    if t is None or size is None:
        return POISON
    h, w = (size * 2)[:2] if len(size) == 1 else size[:2]
    return TensorV(
        TensorT(t.dtype, None if t.dims is None else t.dims[:-2] + (as_dim(h), as_dim(w)))
    )


def _pool_fn(args: Args, site: Site) -> Value:
    t = tensor_of(args["x"], site)
    return POISON if t is None else pool2d(t, args["kernel"], args["stride"], args["padding"], site)


def _conv2d(args: Args, site: Site) -> Value:
    x, w = tensor_of(args["x"], site, rank=4), tensor_of(args["w"], site, rank=4)
    if x is None or w is None:
        return POISON
    dtype = float_dtype(x)
    if x.dims is None or w.dims is None:
        return TensorV(TensorT(dtype, None))
    groups = args["groups"]
    channels = from_dim(dims.mul(w.dims[1], as_dim(groups)))
    if not expect_dim(x.dims[1], channels, site, "input channels (w dim 1 * groups)"):
        return POISON
    rest = dims.mod(w.dims[0], as_dim(groups))
    if rest is None or (dims.as_int(rest) or 0) != 0:
        return site.error(
            DIVISIBILITY,
            f"{dims.format_dim(w.dims[0])} output channels are not divisible by "
            f"groups = {dims.format_dim(as_dim(groups))}",
        )
    h, wd = (
        window(d, from_dim(k), args["stride"], args["padding"], site)
        for d, k in zip(x.dims[2:], w.dims[2:], strict=True)
    )
    return TensorV(TensorT(dtype, (x.dims[0], w.dims[0], h, wd)))


def _rope(args: Args, site: Site) -> Value:
    """Rotary position embeddings over ``[..., T, D]``: positions along dim -2, pairs
    ``(i, i + D/2)`` of the last dim rotated (LLaMA's rotate-half form), so D must be even."""
    t = tensor_of(args["x"], site, min_rank=2)
    theta = args["theta"]
    if t is None:
        return POISON
    if not is_number(theta) or is_bool(theta):
        return site.error(TYPE_MISMATCH, f"expected a number for theta, found {kind_of(theta)}")
    if (type(theta) is int or type(theta) is float) and theta <= 0:
        return site.error(
            OUT_OF_RANGE, f"theta = {theta!r} must be greater than 0", label="argument out of range"
        )
    if t.dims is not None:
        rest = dims.mod(t.dims[-1], dims.const(2))
        if rest is not None and (dims.as_int(rest) or 0) != 0:
            return site.error(
                DIVISIBILITY,
                f"rotary embeddings rotate pairs of the last dim, which is odd "
                f"({dims.format_dim(t.dims[-1])})",
                label="expected an even head width",
            )
    return TensorV(TensorT(float_dtype(t), t.dims))


def _attention(args: Args, site: Site) -> Value:
    """Scaled dot-product attention ``softmax(q k^T / sqrt(D)) v`` with grouped-query heads:
    ``q [N, H, T, D]``, ``k [N, Hkv, S, D]``, ``v [N, Hkv, S, Dv]`` with ``Hkv`` dividing ``H``
    (query head ``h`` reads key/value head ``h / (H / Hkv)``) -> ``[N, H, T, Dv]``; with
    ``causal``, position ``t`` sees keys up to its own (``S - T + t``)."""
    q, k, v = (tensor_of(args[n], site, rank=4) for n in ("q", "k", "v"))
    if q is None or k is None or v is None:
        return POISON
    if not is_bool(args["causal"]):
        return site.error(
            TYPE_MISMATCH, f"expected a bool for causal, found {kind_of(args['causal'])}"
        )
    dtype = float_dtype(q)
    if q.dims is None or k.dims is None or v.dims is None:
        return TensorV(TensorT(dtype, None))
    pairs = (
        (k.dims[0], q.dims[0], "batch (k dim 0, as q)"),
        (v.dims[0], q.dims[0], "batch (v dim 0, as q)"),
        (k.dims[3], q.dims[3], "head width (k dim 3, as q)"),
        (v.dims[1], k.dims[1], "key/value heads (v dim 1, as k)"),
        (v.dims[2], k.dims[2], "key positions (v dim 2, as k)"),
    )
    for found, expected, what in pairs:
        if definitely_different(found, expected):
            return site.error(
                DIM_MISMATCH,
                f"expected {what} {dims.format_dim(expected)}, found {dims.format_dim(found)}",
                label=f"expected {dims.format_dim(expected)}",
            )
    rest = dims.mod(q.dims[1], k.dims[1])
    if rest is None or (dims.as_int(rest) or 0) != 0:
        return site.error(
            DIVISIBILITY,
            f"{dims.format_dim(k.dims[1])} key/value heads do not divide "
            f"{dims.format_dim(q.dims[1])} query heads",
            label="expected query heads % key/value heads == 0",
        )
    return TensorV(TensorT(dtype, (q.dims[0], q.dims[1], q.dims[2], v.dims[3])))


def _ternary_matmul(args: Args, site: Site) -> Value:
    x, w = tensor_of(args["x"], site), tensor_of(args["w"], site)
    if x is None or w is None:
        return POISON
    out = matmul(x, w, ast.ErrorExpr(site.span), site.ctx)
    if isinstance(out, TensorV):
        return TensorV(TensorT(float_dtype(x), out.type.dims))
    return out


def _trit(args: Args, site: Site) -> Value:
    v = args["x"]
    if type(v) is int and v in (-1, 0, 1):
        return Trit(v)
    if isinstance(v, Trit) or (is_int(v) and type(v) is not int):
        return v if isinstance(v, Trit) else Unk(ScalarT("trit"))
    if not is_poison(v):
        site.error(
            NOT_TRIT,
            f"expected -1, 0 or 1, found {kind_of(v)} {v!r}"
            if type(v) is int
            else f"expected -1, 0 or 1, found {kind_of(v)}",
            label="not a trit",
        )
    return POISON


def _cast(args: Args, site: Site) -> Value:
    """`cast(x, "float16")`: the same tensor in another dtype (arguments must match declared
    dtypes exactly, so this is how a float16 tensor meets a float32 parameter)."""
    t, dtype = tensor_of(args["x"], site), args["dtype"]
    if t is None or is_poison(dtype):
        return POISON
    if t.ternary:
        return site.error(TYPE_MISMATCH, f"cannot cast {t}: ternary weights stay trit")
    if type(dtype) is not str:
        return site.error(
            TYPE_MISMATCH, f"expected a dtype name such as \"float16\", found {kind_of(dtype)}"
        )
    target = canonical_dtype(dtype)
    if target is None or target == "trit":
        names = ", ".join(d for d in DTYPES if d != "trit")
        return site.error(BAD_TYPE, f"cannot cast to \"{dtype}\": expected one of {names}")
    return args["x"] if target == t.dtype else TensorV(TensorT(target, t.dims))


_X = (("x", REQUIRED),)
_POOL = _X + (("kernel", REQUIRED), ("stride", None), ("padding", 0))
_REDUCE = FnSpec(_X + (("dims", None), ("keepdim", False)), _reduce)

FUNCTIONS: dict[str, FnSpec] = {
    **{
        name: FnSpec(_X, _elementwise)
        for name in (
            "relu",
            "relu2",
            "relu6",
            "gelu",
            "silu",
            "sigmoid",
            "tanh",
            "quantize_activations",
        )
    },
    "sqrt": FnSpec(_X, _scalar_or_tensor("sqrt")),
    "exp": FnSpec(_X, _scalar_or_tensor("exp")),
    "softmax": FnSpec(_X + (("dim", REQUIRED),), _softmax),
    "flatten": FnSpec(_X + (("start_dim", 0),), _flatten),
    "reshape": FnSpec(_X + (("shape", REQUIRED),), _reshape),
    "transpose": FnSpec(_X + (("dim0", REQUIRED), ("dim1", REQUIRED)), _transpose),
    "permute": FnSpec(_X + (("dims", REQUIRED),), _permute),
    "concat": FnSpec((("xs", REQUIRED), ("dim", 0)), _concat),
    "mean": _REDUCE,
    "sum": _REDUCE,
    "max": _REDUCE,
    "adaptive_avg_pool2d": FnSpec(_X + (("size", REQUIRED),), _adaptive_pool),
    "max_pool2d": FnSpec(_POOL, _pool_fn),
    "avg_pool2d": FnSpec(_POOL, _pool_fn),
    "conv2d": FnSpec(_X + (("w", REQUIRED), ("stride", 1), ("padding", 0), ("groups", 1)), _conv2d),
    "ternary_matmul": FnSpec(_X + (("w", REQUIRED),), _ternary_matmul),
    "trit": FnSpec(_X, _trit),
    "rope": FnSpec(_X + (("theta", 10000.0),), _rope),
    "attention": FnSpec(
        (("q", REQUIRED), ("k", REQUIRED), ("v", REQUIRED), ("causal", False)), _attention
    ),
    "cast": FnSpec(_X + (("dtype", REQUIRED),), _cast),
}
