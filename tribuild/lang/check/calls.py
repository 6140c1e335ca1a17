"""Calls: building layers, calling functions, and applying layers to tensors.

Terms:
- *CallArgs*: evaluated arguments with their spans, positional then keyword.
- *binding*: matching CallArgs to parameter names (arity, unknown or repeated keywords).
- *conform*: checking one value against a declared semantic type; a plain -1/0/1 becomes a
  ``Trit`` where a trit is expected; tensor types are unified (``Unifier``).
- *applying a signature*: how a caller types a call of a user fn, functional layer or layer
  instance from the callee's ``Signature`` alone: integer bindings (construction arguments,
  int inputs) are substituted into the declared types, the remaining dim names are renamed
  apart and become flexible, the inputs are unified, and the return type is resolved.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.diagnostics import did_you_mean
from tribuild.lang import dims
from tribuild.lang.builtins.functions import FUNCTIONS
from tribuild.lang.builtins.layers import LAYERS
from tribuild.lang.builtins.shapes import Site
from tribuild.lang.check.codes import (
    ARITY,
    BAD_KEYWORD,
    NO_FORWARD,
    NOT_CALLABLE,
    NOT_CONST,
    NOT_TRIT,
    TYPE_MISMATCH,
    Sink,
)
from tribuild.lang.check.consteval import WORK_LIMIT, Ctx, evaluate
from tribuild.lang.check.env import Env, ItemRef
from tribuild.lang.check.unify import Unifier, join
from tribuild.lang.check.values import (
    POISON,
    Callee,
    Choice,
    LayerV,
    TensorV,
    Trit,
    Unk,
    UnkList,
    Value,
    as_dim,
    is_bool,
    is_int,
    is_number,
    is_poison,
    kind_of,
)
from tribuild.lang.signature import ParamSig, Signature
from tribuild.lang.syntax import ast
from tribuild.lang.types import ListT, NamedT, ScalarT, TensorT, Type, type_symbols

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import overload

Span = ast.Span


class CallArgs:
    """A plain class: one is made per call checked."""

    __slots__ = ("positional", "keywords")

    def __init__(
        self,
        positional: tuple[tuple[Value, Span], ...],
        keywords: tuple[tuple[str, Value, Span], ...] = (),
    ):
        self.positional, self.keywords = positional, keywords


def call_expr(node: ast.Call, scope: dict[str, Value], ctx: Ctx) -> Value:
    func = evaluate(node.func, scope, ctx)
    args = CallArgs(
        tuple([(evaluate(a, scope, ctx), a.span) for a in node.args]),
        tuple([(k.name, evaluate(k.value, scope, ctx), k.span) for k in node.kwargs]),
    )
    if node.func.__class__ is ast.Name:
        what, origin = node.func.id, ctx.origins.get(node.func.id)
    else:
        what, origin = "call", None
    if type(func) is LayerV and what != func.name:
        what = f"{what} ({func.name})"
    return call(func, args, node.span, ctx, what, origin)


def call(
    func: Value, args: CallArgs, span: Span, ctx: Ctx, what: str, origin: Span | None = None
) -> Value:
    if is_poison(func):
        return POISON
    for v, _ in args.positional:
        if is_poison(v):
            return POISON
    if type(func) is LayerV:
        return apply_layer(func, args, span, ctx, what, origin)
    if type(func) is Callee:
        name, ref = func.name, func.ref
        if ref is None:
            return (
                construct_builtin(name, args, span, ctx)
                if name in LAYERS
                else call_function(name, args, span, ctx)
            )
        if ref.kind == "layer":
            return construct_user(name, ref, args, span, ctx)
        if ref.kind in ("fn", "functional"):
            sig = ctx.env.signature(ref)
            return apply_signature(sig.inputs, sig.ret, {}, args, span, ctx, name)
    elif type(func) is Choice:
        results = [call(o, args, span, ctx, what, origin) for o in func.options]
        if any(is_poison(r) for r in results):
            return POISON
        out = results[0]
        for r in results[1:]:
            out = join(out, r)
        return out
    ctx.sink.error(
        NOT_CALLABLE,
        span,
        f"`{what}` is {kind_of(func)}, which cannot be called",
        label="expected a function or a layer",
    )
    return POISON


def bind(
    names: tuple[str, ...],
    required: frozenset[str],
    args: CallArgs,
    span: Span,
    ctx: Ctx,
    what: str,
) -> dict[str, tuple[Value, Span]] | None:
    """Match arguments to parameter names; None (reported) on an arity or keyword error."""
    if len(args.positional) > len(names):
        extra = args.positional[len(names)][1]
        ctx.sink.error(
            ARITY,
            extra,
            f"`{what}` takes at most {len(names)} argument(s), found {len(args.positional)}",
            label="unexpected argument",
        )
        return None
    bound = {n: a for n, a in zip(names, args.positional, strict=False)}
    for name, value, kspan in args.keywords:
        if name not in names or name in bound:
            problem = "repeats the argument" if name in bound else "is not a parameter of"
            ctx.sink.error(
                BAD_KEYWORD,
                kspan,
                f"keyword `{name}` {problem} `{what}`",
                label=f"expected one of {', '.join(names)}" if name not in names else "",
                help=did_you_mean(name, names) if name not in names else None,
            )
            return None
        bound[name] = (value, kspan)
    missing = [n for n in names if n in required and n not in bound]
    if missing:
        ctx.sink.error(
            ARITY,
            span,
            f"`{what}` is missing argument(s) {', '.join(f'`{m}`' for m in missing)}",
            label=f"expected {len(required)} required argument(s)",
        )
        return None
    return bound


_KIND_OK: dict[str, Callable[[Value], bool]] = {
    "int": is_int,
    "float": is_number,
    "bool": is_bool,
    "str": lambda x: isinstance(x, str) or isinstance(x, Unk),
    "layers": lambda x: isinstance(x, (tuple, UnkList)) or isinstance(x, Unk),
}
"""Whether a value fits a built-in layer parameter of each kind (``LayerSpec.params``)."""


def construct_builtin(name: str, args: CallArgs, span: Span, ctx: Ctx) -> Value:
    spec = LAYERS[name]
    bound = bind(spec.names, spec.required, args, span, ctx, name)
    if bound is None:
        return POISON
    values: dict[str, Value] = {}
    for pname, kind, _ in spec.params:
        value, vspan = bound[pname] if pname in bound else (spec.defaults[pname], span)
        if is_poison(value):
            return POISON
        if isinstance(value, TensorV):
            _not_const(pname, name, vspan, ctx)
            return POISON
        if value is not None and not _KIND_OK[kind](value):
            ctx.sink.error(
                TYPE_MISMATCH,
                vspan,
                f"argument `{pname}` of {name}: expected {kind}, found {kind_of(value)}",
            )
            return POISON
        values[pname] = value
    spec.check(values, Site(ctx, span, span, name))
    return LayerV(name, tuple(values.items()))


def _not_const(param: str, what: str, span: Span, ctx: Ctx) -> None:
    ctx.sink.error(
        NOT_CONST,
        span,
        f"argument `{param}` of {what} must be a construction-time value, found a tensor",
        label="known only when the model runs",
        help="layer arguments are built from parameters, constants and literals",
    )


def call_function(name: str, args: CallArgs, span: Span, ctx: Ctx) -> Value:
    spec = FUNCTIONS[name]
    bound = bind(spec.names, spec.required, args, span, ctx, name)
    if bound is None or any(is_poison(v) for v, _ in bound.values()):
        return POISON
    values = {p: bound[p][0] if p in bound else spec.defaults[p] for p in spec.names}
    arg_span = args.positional[0][1] if args.positional else span
    return spec.rule(values, Site(ctx, span, arg_span, name))


def conform(value: Value, t: Type | None, unifier: Unifier) -> tuple[Value, str | None, str]:
    """``(converted value, problem or None, code)`` for ``value`` against declared type ``t``."""
    if t is None or is_poison(value) or isinstance(value, Choice) and not isinstance(t, NamedT):
        return value, None, ""
    match t:
        case TensorT():
            if not isinstance(value, TensorV):
                return value, f"expected {t}, found {kind_of(value)}", TYPE_MISMATCH
            problem = unifier.tensor(t, value.type)
            return value, None if problem is None else problem[1], problem[0] if problem else ""
        case ScalarT(dtype="trit"):
            if (
                isinstance(value, Trit)
                or value == Unk(t)
                or (is_int(value) and type(value) is not int)
            ):
                return value, None, ""
            if type(value) is int and value in (-1, 0, 1):
                return Trit(value), None, ""
            shown = value if type(value) is int else kind_of(value)
            return (
                value,
                f"{shown} is not a trit: expected -1, 0 or 1 (or trit(-1), trit(0), trit(1))",
                NOT_TRIT,
            )
        case ScalarT(dtype=dtype):
            ok = (
                is_bool(value)
                if dtype == "bool"
                else is_int(value)
                if dtype.startswith("int")
                else is_number(value)
            )
            return value, None if ok else f"expected {dtype}, found {kind_of(value)}", TYPE_MISMATCH
        case ListT(elem=elem):
            if isinstance(value, (UnkList, Unk)):
                return value, None, ""
            if not isinstance(value, tuple):
                return value, f"expected {t}, found {kind_of(value)}", TYPE_MISMATCH
            items = [conform(v, elem, unifier) for v in value]
            bad = next((p for p in items if p[1] is not None), None)
            return (
                (tuple(i[0] for i in items), None, "") if bad is None else (value, bad[1], bad[2])
            )
        case NamedT(name="<error>"):  # the parser already reported this type
            return value, None, ""
        case NamedT(name=name):
            ok = isinstance(value, (LayerV, Choice)) and name in kind_of(value)
            return (
                value,
                None if ok else f"expected layer {name}, found {kind_of(value)}",
                TYPE_MISMATCH,
            )
    return value, None, ""


def mismatch(formal: Type | None, shown: str, value: Value, problem: str) -> str:
    """What a failed ``conform`` says: a tensor's unification problem after what was expected
    and found; any other problem says both already."""
    if isinstance(formal, TensorT) and isinstance(value, TensorV):
        return f"expected {shown}, found {kind_of(value)}: {problem}"
    return problem


def cast_help(formal: Type | None, value: Value) -> str | None:
    """The fix for a tensor of the right shape in another dtype: the `cast` built-in."""
    if (
        isinstance(formal, TensorT)
        and isinstance(value, TensorV)
        and not formal.ternary
        and not value.type.ternary
        and formal.dtype != value.type.dtype
    ):
        return f'convert it: cast(..., "{formal.dtype}")'
    return None


if TYPE_CHECKING:  # a tensor type stays a tensor type, and None stays None

    @overload
    def subst_type(t: TensorT, mapping: dict[str, dims.DimLike]) -> TensorT: ...
    @overload
    def subst_type(t: Type, mapping: dict[str, dims.DimLike]) -> Type: ...
    @overload
    def subst_type(t: Type | None, mapping: dict[str, dims.DimLike]) -> Type | None: ...


def subst_type(t: Type | None, mapping: dict[str, dims.DimLike]) -> Type | None:
    if isinstance(t, TensorT) and t.dims is not None:
        return TensorT(
            t.dtype, tuple([dims.substitute(d, mapping) or dims.ANY for d in t.dims]), t.ternary
        )
    return t


def construct_user(name: str, ref: ItemRef, args: CallArgs, span: Span, ctx: Ctx) -> Value:
    sig = ctx.env.signature(ref)
    bound = bind(
        tuple(p.name for p in sig.params),
        frozenset(p.name for p in sig.params if p.default is None),
        args,
        span,
        ctx,
        name,
    )
    if bound is None:
        return POISON
    values = bind_params(sig, ref, bound, span, ctx)
    return POISON if values is None else LayerV(name, values, ref)


def bind_params(
    sig: Signature, ref: ItemRef, bound: dict[str, tuple[Value, Span]], span: Span, ctx: Ctx
) -> tuple[tuple[str, Value], ...] | None:
    """Construction arguments in parameter order, checked, with defaults evaluated where
    the callee is defined."""
    values: dict[str, Value] = {}
    for p in sig.params:
        if p.name in bound:
            value, vspan = bound[p.name]
        else:
            value, vspan = _default(sig, p, values, ref, span, ctx), span
        if is_poison(value):
            return None
        if isinstance(value, TensorV):
            _not_const(p.name, sig.name, vspan, ctx)
            return None
        value, problem, code = conform(value, p.type, Unifier())
        if problem is not None:
            ctx.sink.error(code, vspan, f"argument `{p.name}` of {sig.name}: {problem}")
            return None
        values[p.name] = value
    return tuple(values.items())


def _default(
    sig: Signature, p: ParamSig, earlier: dict[str, Value], ref: ItemRef, span: Span, ctx: Ctx
) -> Value:
    assert p.default is not None  # bind reported the argument missing
    inner = new_ctx(Sink(ref.path, ref.item_id), ctx.env.scope_of(ref), ctx.work)
    value = evaluate(p.default, dict(earlier), inner)
    ctx.work = inner.work
    if inner.sink.diags:
        first = inner.sink.diags[0]
        ctx.sink.error(
            first.code,
            span,
            f"the default of `{p.name}` in {sig.name} cannot be evaluated here: {first.message}",
        )
        return POISON
    return value


_APPLIED: dict[tuple, Value] = {}
"""(built-in layer name, its arguments, input tensor type) -> output, for the applications of
pure built-ins (``LayerSpec.pure``) that reported nothing: the same block applied in several
instances, or checked again after an edit, looks its shapes up. Bounded, like ``dims.memo``."""
_APPLIED_AT: dict[tuple[int, int], tuple[LayerV, Type, Value]] = {}
"""The same by the identity of the layer value and the input type (both held, so their ids
are not reused): members and the types flowing through a body are mostly the same objects
from one check to the next, and identities hash without walking the dims."""
_APPLIED_LIMIT = 1 << 14


def apply_layer(
    layer: LayerV, args: CallArgs, span: Span, ctx: Ctx, what: str, origin: Span | None = None
) -> Value:
    if layer.ref is None:
        if len(args.positional) != 1 or args.keywords:
            ctx.sink.error(
                ARITY,
                span,
                f"`{what}` takes 1 input tensor, found "
                f"{len(args.positional) + len(args.keywords)} argument(s)",
            )
            return POISON
        x, arg_span = args.positional[0]
        spec = LAYERS[layer.name]
        if not spec.pure or x.__class__ is not TensorV:
            return spec.apply(dict(layer.args), x, Site(ctx, span, arg_span, what, origin))
        held = _APPLIED_AT.get((id(layer), id(x.type)))
        if held is not None and held[0] is layer and held[1] is x.type:
            return held[2]
        key = (layer.name, layer.args, x.type)
        out = _APPLIED.get(key)
        if out is None:
            reported = len(ctx.sink.diags)
            out = spec.apply(dict(layer.args), x, Site(ctx, span, arg_span, what, origin))
            if len(ctx.sink.diags) > reported:
                return out
            dims.keep(_APPLIED, key, out, _APPLIED_LIMIT)
        dims.keep(_APPLIED_AT, (id(layer), id(x.type)), (layer, x.type, out), _APPLIED_LIMIT)
        return out
    sig = ctx.env.signature(layer.ref)
    if not sig.inputs and sig.ret is None:
        ctx.sink.error(
            NO_FORWARD, span, f"`{what}` cannot be called: layer {layer.name} has no `fn forward`"
        )
        return POISON
    return apply_signature(sig.inputs, sig.ret, dict(layer.args), args, span, ctx, what)


_SIGNED: dict[tuple, tuple[tuple[ParamSig, ...], Type | None, Value, int]] = {}
"""Calls typed from a signature that reported nothing: (identity of the signature's inputs and
return type, bindings and arguments, each with its class) -> (inputs, return type, result,
fresh names used). The blocks of a stage are mostly alike, so most of its calls are lookups;
a hit uses up the same fresh names, so later messages name the same symbols."""


def apply_signature(
    inputs: tuple[ParamSig, ...],
    ret: Type | None,
    bindings: dict[str, Value],
    args: CallArgs,
    span: Span,
    ctx: Ctx,
    what: str,
) -> Value:
    key = (
        id(inputs),
        id(ret),
        tuple((k, _tagged(v)) for k, v in bindings.items()),
        tuple(_tagged(v) for v, _ in args.positional),
        tuple((k, _tagged(v)) for k, v, _ in args.keywords),
    )
    held = _SIGNED.get(key)
    if held is not None and held[0] is inputs and held[1] is ret:
        ctx.fresh[0] += held[3]
        return held[2]
    reported, fresh = len(ctx.sink.diags), ctx.fresh[0]
    out = _apply_signature(inputs, ret, bindings, args, span, ctx, what)
    if len(ctx.sink.diags) == reported:
        dims.keep(_SIGNED, key, (inputs, ret, out, ctx.fresh[0] - fresh), _APPLIED_LIMIT)
    return out


def _tagged(v: Value) -> tuple:
    """``v`` with its class, and its elements' if a list: ``true`` and ``1`` (or ``[true]``
    and ``[1]``) are equal in Python, not to the checker."""
    if v.__class__ is tuple:
        return tuple, tuple(_tagged(x) for x in v)
    return v.__class__, v


def _apply_signature(
    inputs: tuple[ParamSig, ...],
    ret: Type | None,
    bindings: dict[str, Value],
    args: CallArgs,
    span: Span,
    ctx: Ctx,
    what: str,
) -> Value:
    bound = bind(
        tuple(p.name for p in inputs),
        frozenset(p.name for p in inputs if p.default is None),
        args,
        span,
        ctx,
        what,
    )
    if bound is None:
        return POISON
    values = dict(bindings)
    values.update(
        {
            p.name: bound[p.name][0]
            for p in inputs
            if p.name in bound and not isinstance(p.type, TensorT)
        }
    )
    mapping: dict[str, dims.DimLike] = {n: as_dim(v) for n, v in values.items()}
    free = frozenset().union(
        *(type_symbols(t) for t in [p.type for p in inputs] + [ret] if t is not None)
    )
    renamed = {s: ctx.fresh_name(s) for s in free - set(mapping)}
    mapping.update({s: dims.sym(f) for s, f in renamed.items()})
    unifier = Unifier(set(renamed.values()))
    for p in inputs:
        if p.name not in bound:
            continue
        value, vspan = bound[p.name]
        formal = subst_type(p.type, mapping)
        _, problem, code = conform(value, formal, unifier)
        if problem is not None:
            shown = unifier.describe(formal) if isinstance(formal, TensorT) else str(formal)
            ctx.sink.error(
                code,
                vspan,
                f"argument `{p.name}` of {what}: {mismatch(formal, shown, value, problem)}",
                label=f"expected {shown}",
                help=cast_help(formal, value),
            )
            return POISON
    out = subst_type(ret, mapping)
    if isinstance(out, TensorT):
        return TensorV(unifier.resolve_type(out))
    return POISON if out is None else Unk(out)


def apply_chain(layers: Value, x: Value, site: Site) -> Value:
    """Sequential: each layer applied to the previous output."""
    if isinstance(layers, UnkList):
        once = x if layers.elem is None else _apply_one(layers.elem, x, site, f"{site.what}[i]")
        return POISON if is_poison(once) else join(x, once)
    if not isinstance(layers, tuple):
        return TensorV(x.type) if isinstance(x, TensorV) else POISON
    for i, layer in enumerate(layers):
        x = _apply_one(layer, x, site, f"{site.what}[{i}]")
        if is_poison(x):
            return POISON
    return x


def _apply_one(layer: Value, x: Value, site: Site, what: str) -> Value:
    if isinstance(layer, LayerV):
        what = f"{what} ({layer.name})"
    return call(layer, CallArgs(((x, site.arg_span),)), site.span, site.ctx, what)


def new_ctx(sink: Sink, env: Env, work: int = WORK_LIMIT) -> Ctx:
    """A checking run's context, with this module's call evaluators."""
    return Ctx(sink, env, call_expr, apply_chain, work)
