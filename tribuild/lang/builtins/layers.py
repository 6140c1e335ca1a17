"""Built-in layers: their construction parameters and shape rules.

Terms:
- *spec*: ``LayerSpec``: the parameters in order, each ``(name, kind, default)`` where kind is
  ``int``, ``float``, ``bool``, ``str`` or ``layers`` and ``REQUIRED`` marks a parameter with no
  default; ``check`` validates evaluated arguments (ranges, then divisibility); ``apply`` is
  the shape rule ``(args, input type, site) -> output value``.
- *range*: the values PyTorch accepts for a parameter (sizes at least 1, padding at least 0,
  ``eps`` above 0, a dropout probability in [0, 1]). A symbolic value is checked where it
  becomes concrete, in an instance.
- ``None`` as a default of a pool's ``stride`` means "equal to the kernel", as in PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.lang import dims
from tribuild.lang.builtins.shapes import Site, expect_dim, float_dtype, pool2d, tensor_of, window
from tribuild.lang.check.codes import DIVISIBILITY, OUT_OF_RANGE, TYPE_MISMATCH
from tribuild.lang.check.values import POISON, TensorV, Value, as_dim
from tribuild.lang.types import INTEGERS, TensorT


class Required:
    """The class of ``REQUIRED``, the default of a parameter that has none (``bind`` reports the
    argument missing, so this default is never read)."""

    __slots__ = ()


REQUIRED = Required()
Args = dict[str, Value]


class LayerSpec:
    """``names``: the parameter names, in order; ``required``: those without a default;
    ``defaults``: the defaults of the others; ``pure``: whether ``apply`` depends on its
    arguments and input type alone (the site only places its errors): true unless the layer
    holds layers, which it applies in turn."""

    __slots__ = ("params", "apply", "check", "names", "required", "defaults", "pure")

    def __init__(
        self,
        params: tuple[tuple[str, str, Value | Required], ...],
        apply: Callable[[Args, Value, Site], Value],
        check: Callable[[Args, Site], object] | None = None,
    ) -> None:
        self.params, self.apply, self.check = params, apply, check or _in_range
        self.names = tuple(p for p, _, _ in params)
        self.required = frozenset(p for p, _, d in params if d is REQUIRED)
        self.defaults = {p: d for p, _, d in params if not isinstance(d, Required)}
        self.pure = all(kind != "layers" for _, kind, _ in params)


def _same(args: Args, x: Value, site: Site) -> Value:
    return x if tensor_of(x, site) is not None else POISON


def _linear(args: Args, x: Value, site: Site) -> Value:
    t = tensor_of(x, site, min_rank=1)
    if t is None or t.dims is None:
        return TensorV(TensorT(float_dtype(t), None)) if t else POISON
    if not expect_dim(t.dims[-1], args["in_features"], site, "input features (last dim)"):
        return POISON
    return TensorV(TensorT(float_dtype(t), t.dims[:-1] + (as_dim(args["out_features"]),)))


def _embedding(args: Args, x: Value, site: Site) -> Value:
    """Integer ids ``[...]`` to float32 vectors ``[..., dim]``."""
    t = tensor_of(x, site)
    if t is None:
        return POISON
    if t.dtype not in INTEGERS:
        return site.error(
            TYPE_MISMATCH,
            f"expected a tensor of integer token ids (int8, int32 or int64), found {t}",
            label="expected an integer tensor",
        )
    dim = as_dim(args["dim"])
    return TensorV(TensorT("float32", None if t.dims is None else t.dims + (dim,)))


def _conv(args: Args, x: Value, site: Site) -> Value:
    t = tensor_of(x, site, rank=4)
    if t is None or t.dims is None:
        return TensorV(TensorT(float_dtype(t), None)) if t else POISON
    if not expect_dim(t.dims[1], args["in_channels"], site, "input channels (dim 1)"):
        return POISON
    h, w = (window(d, args["kernel"], args["stride"], args["padding"], site) for d in t.dims[2:])
    return TensorV(TensorT(float_dtype(t), (t.dims[0], as_dim(args["out_channels"]), h, w)))


_AT_LEAST = {
    "in_features": 1,
    "out_features": 1,
    "in_channels": 1,
    "out_channels": 1,
    "kernel": 1,
    "stride": 1,
    "padding": 0,
    "groups": 1,
    "features": 1,
    "d": 1,
    "heads": 1,
    "vocab": 1,
    "dim": 1,
}


def _in_range(args: Args, site: Site) -> bool:
    """Report the first argument outside its range; True when all are inside."""
    for name, value in args.items():
        problem = _range_problem(name, value)
        if problem:
            site.error(OUT_OF_RANGE, f"{name} = {value!r} {problem}", label="argument out of range")
            return False
    return True


def _range_problem(name: str, value: Value) -> str | None:
    if name in _AT_LEAST:
        n = dims.as_int(as_dim(value))
        return (
            f"must be at least {_AT_LEAST[name]}" if n is not None and n < _AT_LEAST[name] else None
        )
    if type(value) is not int and type(value) is not float:
        return None
    if name == "eps" and value <= 0:
        return "must be greater than 0"
    if name == "p" and not 0 <= value <= 1:
        return "must be between 0 and 1"
    return None


def _check_groups(args: Args, site: Site) -> None:
    if not _in_range(args, site):
        return
    if args["groups"] == 1 and type(args["groups"]) is int:
        return  # every channel count is a multiple of 1
    groups = as_dim(args["groups"])
    for name in ("in_channels", "out_channels"):
        rest = dims.mod(as_dim(args[name]), groups)
        if rest is None or (dims.as_int(rest) or 0) != 0:
            site.error(
                DIVISIBILITY,
                f"{name} = {dims.format_dim(as_dim(args[name]))} is not divisible by "
                f"groups = {dims.format_dim(groups)}",
                label="expected a multiple of groups",
            )
            return


def _channel_norm(
    dim: int, what: str, rank: int | None = None
) -> Callable[[Args, Value, Site], Value]:
    def apply(args: Args, x: Value, site: Site) -> Value:
        t = tensor_of(x, site, rank=rank, min_rank=1)
        if t is None:
            return POISON
        if t.dims is not None and not expect_dim(t.dims[dim], args["features"], site, what):
            return POISON
        return x

    return apply


def _pool(args: Args, x: Value, site: Site) -> Value:
    t = tensor_of(x, site)
    return POISON if t is None else pool2d(t, args["kernel"], args["stride"], args["padding"], site)


def _attention(args: Args, x: Value, site: Site) -> Value:
    t = tensor_of(x, site, rank=3)
    if t is None:
        return POISON
    if t.dims is not None and not expect_dim(t.dims[2], args["d"], site, "model width (dim 2)"):
        return POISON
    return TensorV(TensorT(float_dtype(t), t.dims))


def _check_heads(args: Args, site: Site) -> None:
    if not _in_range(args, site):
        return
    rest = dims.mod(as_dim(args["d"]), as_dim(args["heads"]))
    if rest is None or (dims.as_int(rest) or 0) != 0:
        site.error(
            DIVISIBILITY,
            f"d = {dims.format_dim(as_dim(args['d']))} is not divisible by "
            f"heads = {dims.format_dim(as_dim(args['heads']))}",
            label="expected d % heads == 0",
        )


def _sequential(args: Args, x: Value, site: Site) -> Value:
    return site.ctx.apply_chain(args["layers"], x, site)


_CONV = (
    ("in_channels", "int", REQUIRED),
    ("out_channels", "int", REQUIRED),
    ("kernel", "int", REQUIRED),
    ("stride", "int", 1),
    ("padding", "int", 0),
    ("groups", "int", 1),
)
_LINEAR = (("in_features", "int", REQUIRED), ("out_features", "int", REQUIRED))
_POOL = (("kernel", "int", REQUIRED), ("stride", "int", None), ("padding", "int", 0))
_SCALE = ("scale", "str", "tensor")

LAYERS: dict[str, LayerSpec] = {
    "TernaryLinear": LayerSpec(_LINEAR + (("bias", "bool", False), _SCALE), _linear),
    "Linear": LayerSpec(_LINEAR + (("bias", "bool", True),), _linear),
    "TernaryConv2d": LayerSpec(_CONV + (("bias", "bool", False), _SCALE), _conv, _check_groups),
    "Conv2d": LayerSpec(_CONV + (("bias", "bool", True),), _conv, _check_groups),
    "BatchNorm2d": LayerSpec(
        (("features", "int", REQUIRED), ("eps", "float", 1e-5)),
        _channel_norm(1, "channel dim 1", rank=4),
    ),
    "LayerNorm": LayerSpec(
        (("features", "int", REQUIRED), ("eps", "float", 1e-5)), _channel_norm(-1, "last dim")
    ),
    "RMSNorm": LayerSpec(
        (("features", "int", REQUIRED), ("eps", "float", 1e-6)), _channel_norm(-1, "last dim")
    ),
    "Dropout": LayerSpec((("p", "float", 0.5),), _same),
    "Embedding": LayerSpec((("vocab", "int", REQUIRED), ("dim", "int", REQUIRED)), _embedding),
    "MaxPool2d": LayerSpec(_POOL, _pool),
    "AvgPool2d": LayerSpec(_POOL, _pool),
    "Sequential": LayerSpec((("layers", "layers", REQUIRED),), _sequential),
    "MultiHeadAttention": LayerSpec(
        (("d", "int", REQUIRED), ("heads", "int", REQUIRED)), _attention, _check_heads
    ),
    **{
        name: LayerSpec((), _same)
        for name in ("ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid", "Tanh", "Identity")
    },
}
