"""Shared pieces of the built-ins' shape rules.

Terms:
- *Site*: where a built-in is applied: the checking context, the span of the whole call
  (primary label of errors) and the span of the tensor argument; every rule reports through it.
- *window size*: the output length of a convolution or pooling window,
  ``(size + 2*padding - kernel) // stride + 1``; zero or less is an error (E0408).
- Dims the rules compute are kept *trackable* (``values.trackable``): pooling a symbolic size
  in a long loop gives `?` rather than an ever deeper quotient.
"""

from __future__ import annotations

from tribuild.lang import dims
from tribuild.lang.check.codes import (
    BAD_AXIS,
    DIM_MISMATCH,
    DIV_ZERO,
    EMPTY_OUTPUT,
    RANK_MISMATCH,
    TYPE_MISMATCH,
)
from tribuild.lang.check.unify import definitely_different
from tribuild.lang.check.values import (
    POISON,
    TensorV,
    Value,
    as_dim,
    is_poison,
    kind_of,
    trackable,
)
from tribuild.lang.dims import ANY, AnyDim, Dim, DimLike
from tribuild.lang.syntax import ast
from tribuild.lang.types import FLOATS, TensorT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.lang.check.consteval import Ctx


class Site:
    """``what``: the built-in's name as the user wrote it, e.g. "conv1 (TernaryConv2d)";
    ``origin``: where the applied layer was constructed, if a member. A plain class: one is
    made per call checked."""

    __slots__ = ("ctx", "span", "arg_span", "what", "origin")

    def __init__(
        self,
        ctx: Ctx,
        span: ast.Span,
        arg_span: ast.Span,
        what: str,
        origin: ast.Span | None = None,
    ) -> None:
        self.ctx, self.span, self.arg_span, self.what, self.origin = (
            ctx,
            span,
            arg_span,
            what,
            origin,
        )

    def error(self, code: str, message: str, label: str = "") -> Value:
        secondary: tuple[tuple[ast.Span, str], ...] = (
            ((self.arg_span, "this argument"),) if self.arg_span != self.span else ()
        )
        if self.origin is not None:
            secondary += ((self.origin, "constructed here"),)
        self.ctx.sink.error(
            code, self.span, f"{self.what}: {message}", label=label, secondary=secondary
        )
        return POISON


def tensor_of(v: Value, site: Site, rank: int | None = None, min_rank: int = 0) -> TensorT | None:
    """The type of a tensor argument of the given rank; None (after reporting) otherwise."""
    if is_poison(v):
        return None
    if not isinstance(v, TensorV):
        site.error(TYPE_MISMATCH, f"expected a tensor, found {kind_of(v)}")
        return None
    t = v.type
    if t.dims is None:
        return t
    if rank is not None and len(t.dims) != rank:
        site.error(RANK_MISMATCH, f"expected a rank-{rank} tensor, found {t} (rank {len(t.dims)})")
        return None
    if len(t.dims) < min_rank:
        site.error(RANK_MISMATCH, f"expected a tensor of rank {min_rank} or more, found {t}")
        return None
    return t


def float_dtype(t: TensorT) -> str:
    """The dtype a floating-point op on ``t`` produces."""
    return t.dtype if t.dtype in FLOATS else "float32"


def expect_dim(found: DimLike, expected: Value, site: Site, what: str) -> bool:
    """Report E0401 when dim ``found`` definitely differs from the integer ``expected``."""
    if type(expected) is int and found.__class__ is Dim and dims.as_int(found) == expected:
        return True  # the common case, decided without arithmetic
    e = as_dim(expected)
    if isinstance(found, AnyDim) or isinstance(e, AnyDim) or not definitely_different(found, e):
        return True
    site.error(
        DIM_MISMATCH,
        f"expected {what} {dims.format_dim(e)}, found {dims.format_dim(found)}",
        label=f"expected {dims.format_dim(e)}",
    )
    return False


def axis(a: Value, rank: int | None, site: Site) -> int | None:
    """A dim index normalised to 0..rank-1; None (reported) when out of range or unknown."""
    if type(a) is not int:
        if not is_poison(a):
            site.error(TYPE_MISMATCH, f"expected a constant dim index, found {kind_of(a)}")
        return None
    if rank is None:
        return a
    if not -rank <= a < rank:
        site.error(
            BAD_AXIS,
            f"dim {a} is out of range for a rank-{rank} tensor",
            label=f"expected a dim in {-rank}..{rank - 1}",
        )
        return None
    return a % rank


_WINDOWS: dict[tuple, DimLike | None] = {}
"""Window sizes by ``(size, kernel, stride, padding)``, the last three as the values given
(int-kind values: never a bool or float that would equal an int key)."""


def _window_size(key: tuple[DimLike, Value, Value, Value]) -> DimLike | None:
    """The window size for ``(size, kernel, stride, padding)``, trackable; None when stride is 0."""
    size, kernel, stride, padding = key[0], as_dim(key[1]), as_dim(key[2]), as_dim(key[3])
    out = dims.floordiv(dims.sub(dims.add(size, dims.scale(padding, 2)), kernel), stride)
    return None if out is None else trackable(dims.add(out, dims.const(1)))


def window(size: DimLike, kernel: Value, stride: Value, padding: Value, site: Site) -> DimLike:
    """The output length of a window; errors give `?`."""
    out = dims.memo(_WINDOWS, (size, kernel, stride, padding), _window_size)
    if out is None:
        site.error(DIV_ZERO, "stride is 0")
        return ANY
    n = dims.as_int(out)
    if n is not None and n <= 0:
        site.error(
            EMPTY_OUTPUT,
            f"input size {dims.format_dim(size)} with kernel {dims.format_dim(as_dim(kernel))}, "
            f"padding {dims.format_dim(as_dim(padding))} "
            f"and stride {dims.format_dim(as_dim(stride))} "
            f"gives an output of size {n}",
            label="expected an output size of 1 or more",
        )
        return ANY
    return out


def pool2d(t: TensorT, kernel: Value, stride: Value, padding: Value, site: Site) -> Value:
    """Shape rule of 2-D pooling over the last two dims (rank 3 or 4)."""
    if t.dims is None:
        return TensorV(t)
    if len(t.dims) not in (3, 4):
        return site.error(RANK_MISMATCH, f"expected a rank-4 [N, C, H, W] tensor, found {t}")
    stride = kernel if stride is None else stride
    h, w = (window(d, kernel, stride, padding, site) for d in t.dims[-2:])
    return TensorV(TensorT(t.dtype, t.dims[:-2] + (h, w)))


def product(shape: tuple[DimLike, ...]) -> DimLike:
    out: DimLike = dims.const(1)
    for d in shape:
        out = trackable(dims.mul(out, d))
    return out
