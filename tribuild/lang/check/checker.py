"""The checker's entry points: generic checks of items, and checks of layer instances.

Terms:
- *generic check* (``check_item``): an item checked once for all its uses: an int
  construction parameter ``c`` is the symbolic dim ``c`` (so ``c`` and ``2*c`` differ), other
  parameters are values of their type whose value is unknown.
- *instance*: a stateful layer with concrete construction arguments, named by an
  ``InstanceKey``. Checking one is two steps: ``evaluate_members`` evaluates its members
  (``Members``), then ``check_instance`` checks `forward` with them. The steps are apart so a
  body edit re-runs the second only; ``Members`` carries the run's state across (diagnostics
  so far, the work bound left, the fresh-name counter), so the two steps together say exactly
  what one run would. ``children`` lists the user-layer instances among the members, by
  *member path* (``layer2[0]``), which the query layer checks in turn.
- Diagnostics about the declared parameter and return types come from ``signature_of``;
  the functions here do not repeat them.
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.diagnostics import Diagnostic, Label, Loc
from tribuild.lang import dims
from tribuild.lang.check.body import Body, bind_dim_names, check_declared, resolve, run
from tribuild.lang.check.calls import CallArgs, bind, bind_params, new_ctx, subst_type
from tribuild.lang.check.codes import (
    EXAMPLE_INPUT,
    NO_FORWARD,
    RETURN_MISMATCH,
    UNTYPED_FORWARD,
    Sink,
)
from tribuild.lang.check.consteval import POISON, Ctx, evaluate
from tribuild.lang.check.env import Env, ItemRef
from tribuild.lang.check.type_names import check_type_names, unknown_type
from tribuild.lang.check.unify import Unifier
from tribuild.lang.check.values import (
    InstanceKey,
    LayerV,
    Sym,
    TensorV,
    Unk,
    Value,
    describe_instance,
    is_concrete,
    normalise,
)
from tribuild.lang.signature import ParamSig, Signature, forward_of
from tribuild.lang.syntax import ast
from tribuild.lang.types import ScalarT, TensorT, Type, lower_type

__all__ = [
    "CheckedInstance",
    "Members",
    "check_item",
    "check_instance",
    "check_target_input",
    "const_value_of",
    "describe_instance",
    "evaluate_members",
    "instance_key",
]


@record
class Members:
    """The members of one instance, evaluated, and the state of the run that evaluated them."""

    diagnostics: tuple[Diagnostic, ...]
    members: tuple[tuple[str, Value], ...]
    scope: tuple[tuple[str, Value], ...]  # parameters, members, dim names their types bound
    children: tuple[tuple[str, InstanceKey], ...]
    work: int  # ``Ctx.work`` left
    exhausted: bool  # ``Ctx.exhausted``
    fresh: int  # fresh names used


@record
class CheckedInstance:
    key: InstanceKey
    diagnostics: tuple[Diagnostic, ...]
    children: tuple[tuple[str, InstanceKey], ...]
    members: tuple[tuple[str, Value], ...]
    inputs: tuple[Type | None, ...]
    output: Type | None


def _symbolic(p: ParamSig, env: Env) -> Value:
    if isinstance(p.type, ScalarT) and p.type.dtype.startswith("int"):
        return Sym(dims.sym(p.name))
    return Unk(p.type) if p.type is not None and not unknown_type(p.type, env) else POISON


def _inputs_scope(params: tuple[ParamSig, ...], scope: dict[str, Value], ctx: Ctx) -> None:
    """Add a body's inputs to its scope: tensors by their resolved type, others symbolically."""
    tensors: list[TensorT | None] = []
    for p in params:
        if isinstance(p.type, TensorT):
            resolved = resolve(p.type, scope, ctx)
            tensors.append(resolved)
            scope[p.name] = TensorV(resolved)
        else:
            tensors.append(None)
            scope[p.name] = _symbolic(p, ctx.env)
    for p, t in zip(
        params, tensors, strict=True
    ):  # a tensor type resolved again, every input in scope, names the same dims
        bind_dim_names(t if t is not None else resolve(p.type, scope, ctx), scope)
    if ctx.trace is not None:
        ctx.trace.extend((None, p.name, scope[p.name]) for p in params)


def _check_body(
    stmts: tuple[ast.Stmt, ...],
    fn: ast.Fn | ast.Layer,
    inputs: tuple[ParamSig, ...],
    ret: Type | None,
    scope: dict[str, Value],
    ctx: Ctx,
) -> Body:
    scope = dict(scope)
    _inputs_scope(inputs, scope, ctx)
    body = Body(
        ctx,
        scope,
        ret,
        fn.ret.span if fn.ret is not None else None,
        locals={p.name for p in inputs},
        unifier=Unifier(),
    )
    run(stmts, body)
    if ret is not None and not body.returned:
        ctx.sink.error(
            RETURN_MISMATCH,
            fn.name_span,
            f"`{fn.name}` ends without returning a {ret}",
            label="missing `return`",
        )
    return body


def _defaults(
    params: tuple[ast.Param, ...],
    sig_params: tuple[ParamSig, ...],
    scope: dict[str, Value],
    ctx: Ctx,
) -> None:
    """Check the parameter defaults of an item against their declared types."""
    for p, sp in zip(params, sig_params, strict=True):
        if p.default is None:
            continue
        value = evaluate(p.default, scope, ctx)
        if sp.type is not None:
            check_declared(
                Body(ctx, scope, None, None),
                sp.type,
                value,
                p.default.span,
                "",
                f"default of `{p.name}`",
            )


def _members(
    members: tuple[ast.Let, ...], scope: dict[str, Value], ctx: Ctx
) -> tuple[tuple[str, Value], ...]:
    out = []
    for member in members:
        value = evaluate(member.value, scope, ctx)
        if member.type is not None:
            value = check_declared(
                Body(ctx, scope, None, None),
                _lower(member.type, ctx),
                value,
                member.value.span,
                "",
                f"member `{member.name}`",
            )
        scope[member.name] = value
        ctx.origins[member.name] = member.span
        out.append((member.name, value))
    return tuple(out)


def _lower(t: ast.TypeExpr, ctx: Ctx) -> Type:
    return lower_type(t, ctx.sink.report)


def _methods(item: ast.Layer, sig: Signature, scope: dict[str, Value], ctx: Ctx) -> None:
    """Check the methods of a stateful layer, its members in ``scope``."""
    forward = forward_of(item)
    if forward is None:
        ctx.sink.error(
            NO_FORWARD,
            item.name_span,
            f"layer `{item.name}` has no `fn forward`",
            label="expected `fn forward(x: Tensor<...>) -> Tensor<...>` among its members",
        )
        return
    for method in item.methods:
        inputs = (
            sig.inputs
            if method is forward
            else tuple(
                ParamSig(p.name, _lower(p.type, ctx) if p.type else None) for p in method.params
            )
        )
        ret = sig.ret if method is forward else (_lower(method.ret, ctx) if method.ret else None)
        _check_body(method.body, method, inputs, ret, scope, ctx)


def check_item(
    item: ast.Item,
    sig: Signature,
    path: str,
    item_id: str,
    env: Env,
    members: Members | None = None,
    trace: list | None = None,
) -> tuple[Diagnostic, ...]:
    """The generic check of one item; for a stateful layer, ``members`` are its members as
    ``evaluate_generic_members`` gives them (evaluated here when not given). ``trace``: see
    ``Ctx``."""
    ctx = new_ctx(Sink(path, item_id), env)
    ctx.trace = trace
    check_type_names(item, env, ctx.sink)
    match item:
        case ast.Const(value=e):
            value = evaluate(e, {}, ctx)
            if sig.ret is not None:
                check_declared(
                    Body(ctx, {}, None, None), sig.ret, value, e.span, "", f"constant `{item.name}`"
                )
        case ast.Fn(body=body) | ast.Layer(body=tuple() as body):
            _defaults(item.params, sig.inputs, {}, ctx)
            _check_body(body, item, sig.inputs, sig.ret, {}, ctx)
        case ast.Layer():
            if members is None:
                members = evaluate_generic_members(
                    item.params, item.members, sig, path, item_id, env
                )
            _resume(members, item, ctx)
            _forward_types(item, sig, ctx.sink)
            _methods(item, sig, dict(members.scope), ctx)
    return ctx.sink.result()


def _forward_types(item: ast.Layer, sig: Signature, sink: Sink) -> None:
    """A stateful layer's `forward` declares tensor types for its inputs and its result: the
    generated module takes tensors, and a caller's result type is the declared one."""
    forward = forward_of(item)
    if forward is None:
        return
    for p, ps in zip(forward.params, sig.inputs, strict=True):
        if ps.type is None or not isinstance(ps.type, TensorT):
            found = "has no type" if ps.type is None else f"is {ps.type}, not a tensor"
            sink.error(
                UNTYPED_FORWARD,
                p.span,
                f"input `{p.name}` of `{item.name}.forward` {found}",
                label="expected a tensor type",
                help=f"declare it: `{p.name}: Tensor<float32, [N, ...]>`",
            )
    if forward.ret is None:
        sink.error(
            UNTYPED_FORWARD,
            forward.name_span,
            f"`{item.name}.forward` declares no result type",
            label="expected `-> Tensor<...>` after the parameters",
            help="callers of the layer are typed from it: add `-> Tensor<dtype, [dims]>`",
        )


def evaluate_generic_members(
    params: tuple[ast.Param, ...],
    members: tuple[ast.Let, ...],
    sig: Signature,
    path: str,
    item_id: str,
    env: Env,
) -> Members:
    """The first step of the generic check of a stateful layer: its parameter defaults checked
    and its members evaluated, construction parameters symbolic."""
    ctx = new_ctx(Sink(path, item_id), env)
    _defaults(params, sig.params, {}, ctx)
    return _evaluated(members, {p.name: _symbolic(p, env) for p in sig.params}, ctx)


def _evaluated(members: tuple[ast.Let, ...], scope: dict[str, Value], ctx: Ctx) -> Members:
    """Evaluate ``members`` in ``scope`` (which they extend)."""
    values = _members(members, scope, ctx)
    children = tuple(c for name, v in values for c in _children(name, v))
    return Members(
        ctx.sink.result(),
        values,
        tuple(scope.items()),
        children,
        ctx.work,
        ctx.exhausted,
        ctx.fresh[0],
    )


def _resume(members: Members, layer: ast.Layer, ctx: Ctx) -> None:
    """Go on, in ``ctx``, with the run that evaluated ``members``."""
    ctx.sink.diags.extend(members.diagnostics)
    ctx.work, ctx.exhausted, ctx.fresh = members.work, members.exhausted, [members.fresh]
    ctx.origins = {m.name: m.span for m in layer.members}


def const_value_of(item: ast.Const, sig: Signature, path: str, item_id: str, env: Env) -> Value:
    """The value of a top-level constant (its mistakes are reported by ``check_item``)."""
    ctx = new_ctx(Sink(path, item_id), env)
    value = evaluate(item.value, {}, ctx)
    if sig.ret is not None:
        value = check_declared(Body(ctx, {}, None, None), sig.ret, value, item.value.span, "", "")
    return value


CANNOT_INSTANTIATE = "cannot instantiate"  # how the problem of arguments that do not fit starts


def instance_key(
    path: str, item_id: str, sig: Signature, args: dict | tuple, env: Env
) -> InstanceKey:
    """The canonical key of an instance; ``env`` is the Env of the layer's own file, where its
    defaults are evaluated. Raises ValueError naming the problem when ``args`` do not fit."""
    given = args.items() if isinstance(args, dict) else ()
    positional = tuple((normalise(v), (0, 0)) for v in args) if isinstance(args, tuple) else ()
    call_args = CallArgs(positional, tuple((k, normalise(v), (0, 0)) for k, v in given))
    ctx = new_ctx(Sink(path, item_id), env)
    bound = bind(
        tuple(p.name for p in sig.params),
        frozenset(p.name for p in sig.params if p.default is None),
        call_args,
        (0, 0),
        ctx,
        sig.name,
    )
    values = (
        None
        if bound is None
        else bind_params(sig, ItemRef(path, item_id, "layer"), bound, (0, 0), ctx)
    )
    if values is None or not all(is_concrete(v) for _, v in values):
        problems = (
            "; ".join(d.message + (f" ({d.help})" if d.help else "") for d in ctx.sink.diags)
            or "arguments are not concrete"
        )
        raise ValueError(f"{CANNOT_INSTANTIATE} {sig.name}: {problems}")
    return InstanceKey(path, item_id, sig.name, values)


def _children(path: str, value: Value) -> list[tuple[str, InstanceKey]]:
    if isinstance(value, LayerV) and value.ref is not None and is_concrete(value):
        return [(path, InstanceKey(value.ref.path, value.ref.item_id, value.name, value.args))]
    if isinstance(value, LayerV) and value.name == "Sequential":
        return _children(path, dict(value.args)["layers"])
    if isinstance(value, tuple):
        return [c for i, v in enumerate(value) for c in _children(f"{path}[{i}]", v)]
    return []


def evaluate_members(members: tuple[ast.Let, ...], key: InstanceKey, env: Env) -> Members:
    """The first step of checking an instance: its members (the ``let``s of a stateful layer,
    none for a functional one) evaluated with its arguments."""
    ctx = new_ctx(Sink(key.path, key.item_id), env)
    return _evaluated(members, dict(key.args), ctx)


def check_instance(
    item: ast.Layer,
    sig: Signature,
    key: InstanceKey,
    env: Env,
    members: Members | None = None,
    trace: list | None = None,
) -> CheckedInstance:
    """Check `forward` (or a functional layer's body) with the evaluated ``members`` (evaluated
    here when not given: both steps in one call). ``trace``: see ``Ctx``."""
    if members is None:
        members = evaluate_members(item.members, key, env)
    ctx = new_ctx(Sink(key.path, key.item_id), env)
    ctx.trace = trace
    _resume(members, item, ctx)
    args: dict[str, Value] = dict(key.args)
    inputs = tuple(resolve(p.type, args, ctx) for p in sig.inputs)
    output = resolve(sig.ret, args, ctx)
    if item.body is not None:
        _check_body(item.body, item, sig.inputs, sig.ret, args, ctx)
    else:
        _methods(item, sig, dict(members.scope), ctx)
    if (
        forward_of(item) is None
    ):  # a functional layer has no members, one without forward builds nothing
        return CheckedInstance(key, ctx.sink.result(), (), (), inputs, output)
    return CheckedInstance(
        key, ctx.sink.result(), members.children, members.members, inputs, output
    )


def _fit_input(
    expected: ParamSig, scope: dict[str, Value], input_shape: tuple[int, ...]
) -> tuple[TensorT, Unifier, tuple | None]:
    """Unify an example input of ``input_shape`` with the input ``expected``."""
    assert isinstance(expected.type, TensorT)  # the callers pick a tensor input
    formal = subst_type(
        expected.type, {k: dims.const(v) for k, v in scope.items() if type(v) is int}
    )
    found = TensorT(formal.dtype, tuple(dims.const(n) for n in input_shape))
    unifier = Unifier(set().union(*(dims.symbols(d) for d in formal.dims or ())))
    return formal, unifier, unifier.tensor(formal, found)


def example_input_dims(
    sig: Signature, key: InstanceKey, input_shape: tuple[int, ...]
) -> dict[str, dims.DimLike]:
    """The dim names of an instance's input that an example input of ``input_shape`` fixes
    (``{"N": 1, "H": 224, "W": 224}``); empty when it does not fit."""
    tensor_inputs = [p for p in sig.inputs if isinstance(p.type, TensorT) and not p.type.ternary]
    if not tensor_inputs:
        return {}
    expected = tensor_inputs[-1 if sig.kind == "functional" else 0]
    _, unifier, problem = _fit_input(expected, dict(key.args), input_shape)
    return {} if problem is not None else dict(unifier.subst)


def check_target_input(
    sig: Signature, key: InstanceKey, input_shape: tuple[int, ...]
) -> tuple[Diagnostic, ...]:
    """Does an example input of ``input_shape`` (float32) fit the instance's first tensor input?"""
    scope = {k: v for k, v in key.args}
    tensor_inputs = [p for p in sig.inputs if isinstance(p.type, TensorT) and not p.type.ternary]
    loc = Loc(key.path, key.item_id, (0, 1))
    if not tensor_inputs:
        return (
            Diagnostic(
                EXAMPLE_INPUT, f"{describe_instance(key)} takes no input tensor", Label(loc)
            ),
        )
    expected = tensor_inputs[-1 if sig.kind == "functional" else 0]
    formal, unifier, problem = _fit_input(expected, scope, input_shape)
    if problem is None:
        return ()
    return (
        Diagnostic(
            EXAMPLE_INPUT,
            f"the example input {list(input_shape)} does not fit `{expected.name}` of "
            f"{describe_instance(key)}: expected {formal}, {problem[1]}",
            Label(loc, "entry layer"),
            help=f"set the target's `input` in Tribuild.toml to a shape that matches {formal}",
        ),
    )
