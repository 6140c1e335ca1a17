"""Lowering a checked layer instance's `forward` (or a `fn` body) to the graph IR.

Terms:
- *lowering*: walking the body once, in the checker's own terms: construction-time
  expressions are evaluated by ``consteval.evaluate``, and every tensor operation gets its
  result type from the checker's rules (``consteval.arith``/``unary``, ``check_calls.call``)
  applied to the operands' types, so the IR's shapes are exactly the checker's. `for` loops
  over construction-time lists are unrolled and `if`s on construction-time values resolved.
- *Lowered*: what an expression lowers to: its checker value (``TensorV`` for tensors), the
  node id(s) holding it (None for a construction-time value; a tuple for a list of tensors),
  and, for a layer value, its *member path* (``("stages", 3)``).
- *Unsupported*: a construct the checker accepts but codegen cannot express (a layer built
  inside `forward`, a non-tensor `forward` input, a stateful layer's functional root...);
  it carries a message and a span (and, where the cause is elsewhere, that place's label,
  a label at the use and a help), and becomes a build problem, never a crash.
- *generic lowering* (``lower_generic``): a layer lowered with its construction parameters
  symbolic, as the generic check checks it, so `check` finds what codegen refuses in a layer
  no target or default instance reaches. What depends on the parameters' values (a
  condition, a loop's length, a weight's shape, a symbolic operand) is *undecided*
  (``Undecided``): the generic lowering stops there and reports nothing, as any instance
  may be fine.
- *fn bodies*: a user `fn` (or functional layer) called from a body is lowered in place, on
  the argument types of that call, as a ``fn_call`` node holding its own graph.
- *functional entry*: a functional layer built as a target's instance. Its *data input* is
  its last non-ternary tensor parameter (as ``check.check_target_input`` reads it); every
  other parameter is a *weight*, a ``param`` node with attr ``weight=True`` that the
  generated module holds as state. Weights need a fixed shape, and every parameter must
  be a tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tribuild.base.record import fields, is_record, record, replace
from tribuild.diagnostics import register
from tribuild.ir.builder import Builder
from tribuild.ir.graph import Graph, In, InList, MemberPath, node, sequential_layers
from tribuild.lang import (
    FUNCTIONS,
    REQUIRED,
    CallArgs,
    Callee,
    Choice,
    Ctx,
    Env,
    InstanceKey,
    ItemRef,
    LayerV,
    ParamSig,
    Signature,
    Sink,
    Sym,
    TensorT,
    TensorV,
    Trit,
    Unk,
    UnkList,
    Value,
    arith,
    ast,
    bind,
    bind_dim_names,
    call,
    dims,
    elements,
    evaluate,
    forward_of,
    new_ctx,
    resolve,
    unary,
)

UNSUPPORTED = register("E0601", "a construct that code generation cannot express")
FnItem = Callable[[ItemRef], "tuple[ast.Fn | ast.Layer, Signature]"]


MAX_FN_NESTING = 32  # fn calls inside fn calls; real programs nest a few levels
MAX_FORKS = 32  # branches a generic lowering follows on conditions it cannot decide


class Unsupported(Exception):
    """``span`` is the cause; ``label`` its label; ``uses`` (span, label) where it shows."""

    def __init__(
        self,
        message: str,
        span: ast.Span,
        label: str = "",
        uses: tuple[tuple[ast.Span, str], ...] = (),
        help: str | None = None,
        quote: ast.Span | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.span = span
        self.label = label
        self.uses = uses
        self.help = help
        self.quote = quote  # the source text of this span replaces ``QUOTE`` in ``help``


QUOTE = "{quote}"


class Undecided(Unsupported):
    """A construct codegen refuses for some values only, met with symbolic ones."""


class _TooDeep(Unsupported):
    """fn calls nest past ``MAX_FN_NESTING``: each call is lowered into a graph inside the
    caller's (inlined later), so the depth of the calls is the depth of the graph, which
    every later stage walks, the store's codec too. Raised where the limit is passed, its
    span replaced by the outermost call's (a span in the instance's own file)."""


@record
class Lowered:
    value: Value
    ref: int | tuple[int, ...] | None = None
    path: MemberPath | None = None


def lower_instance(
    item: ast.Layer,
    sig: Signature,
    key: InstanceKey,
    members: tuple[tuple[str, Value], ...],
    env: Env,
    fn_item: FnItem,
) -> Graph:
    """The graph of one stateful layer instance's `forward`; raises Unsupported."""
    forward = forward_of(item)
    if item.body is not None:
        return _lower_functional(item, sig, key, env, fn_item)
    if forward is None:
        raise Unsupported(f"`{item.name}` has no `forward`", item.name_span)
    body = _Body(new_ctx(Sink(key.path, key.item_id), env), fn_item)
    body.scope.update(key.args)
    for name, value in members:
        body.scope[name] = value
        body.paths[name] = (name,)
    for p in sig.inputs:
        if not isinstance(p.type, TensorT):
            raise Unsupported(f"`forward` input `{p.name}` is not a tensor", forward.name_span)
        body.param(p, TensorV(_resolve_tensor(p.type, body)))
    return body.run_all(forward.body, forward.name_span)


def lower_generic(
    item: ast.Layer,
    sig: Signature,
    path: str,
    item_id: str,
    scope: tuple[tuple[str, Value], ...],
    members: tuple[tuple[str, Value], ...],
    env: Env,
    fn_item: FnItem,
) -> Graph:
    """``lower_instance`` with the construction parameters symbolic: ``scope`` and ``members``
    are the generic check's (``Members``). Raises Unsupported for what codegen refuses
    whatever the arguments, Undecided where it depends on them."""
    key = InstanceKey(path, item_id, item.name, ())
    if item.body is not None:
        return _lower_functional(item, sig, key, env, fn_item, scope)
    forward = forward_of(item)
    if forward is None:
        raise Unsupported(f"`{item.name}` has no `forward`", item.name_span)
    body = _Body(new_ctx(Sink(path, item_id), env), fn_item, symbolic=True)
    body.scope.update(scope)
    for name, _ in members:
        body.paths[name] = (name,)
    for p in sig.inputs:
        if not isinstance(p.type, TensorT):
            raise Unsupported(f"`forward` input `{p.name}` is not a tensor", forward.name_span)
        body.param(p, TensorV(_resolve_tensor(p.type, body)))
    return body.run_all(forward.body, forward.name_span)


def _lower_functional(
    item: ast.Layer,
    sig: Signature,
    key: InstanceKey,
    env: Env,
    fn_item: FnItem,
    generic: tuple[tuple[str, Value], ...] | None = None,
) -> Graph:
    body = _Body(new_ctx(Sink(key.path, key.item_id), env), fn_item, symbolic=generic is not None)
    body.scope.update(key.args if generic is None else generic)
    data = [p for p in sig.inputs if isinstance(p.type, TensorT) and not p.type.ternary]
    for p in sig.inputs:
        if not isinstance(p.type, TensorT):
            raise Unsupported(
                f"parameter `{p.name}` of the functional layer `{item.name}` is not a tensor",
                item.name_span,
            )
        t = _resolve_tensor(p.type, body)
        weight = not data or p is not data[-1]
        if weight and (t.dims is None or any(dims.as_int(d) is None for d in t.dims)):
            raise (Undecided if body.symbolic else Unsupported)(
                f"weight `{p.name}` of `{item.name}` has no fixed shape ({t})", item.name_span
            )
        body.param(p, TensorV(t), weight)
    if not data:
        raise Unsupported(f"the functional layer `{item.name}` takes no data input", item.name_span)
    assert item.body is not None  # lower_instance's test: the layer is functional
    return body.run_all(item.body, item.name_span)


def lower_fn(
    item: ast.Fn | ast.Layer,
    sig: Signature,
    args: dict[str, Value],
    env: Env,
    fn_item: FnItem,
    depth: int = 1,
) -> Graph:
    """The graph of a `fn` body called with ``args`` (tensors as ``TensorV``, others as values)
    ``depth`` calls deep."""
    body = _Body(new_ctx(Sink("", item.name), env), fn_item, depth)
    for p in sig.inputs:
        if p.name not in args:
            raise Unsupported(
                f"a call of `{sig.name}` that leaves `{p.name}` to its default", item.name_span
            )
        value = args[p.name]
        if isinstance(value, TensorV):
            body.param(p, value)
        else:
            body.scope[p.name] = value
    return body.run_all(item.body or (), item.name_span)


def _resolve_tensor(t: TensorT, body: _Body) -> TensorT:
    """``resolve`` of a tensor type in ``body``'s scope: a tensor type too."""
    resolved = resolve(t, body.scope, body.ctx)
    assert isinstance(resolved, TensorT), resolved
    return resolved


def _single_symbol(d: dims.DimLike) -> str | None:
    if (
        isinstance(d, dims.Dim)
        and len(d.terms) == 1
        and d.terms[0][1] == 1
        and len(d.terms[0][0]) == 1
    ):
        atom = d.terms[0][0][0]
        return atom if isinstance(atom, str) else None
    return None


def _unknown(value: object) -> bool:
    """A value the generic check leaves open: a symbol, or a value known by its type only."""
    if isinstance(value, tuple):
        return any(_unknown(v) for v in value)
    return isinstance(value, (Sym, Unk, UnkList, Choice))


class _Body:
    """``symbolic``: lowering with symbolic construction parameters (``lower_generic``);
    ``built``: a `let` in this body whose value is a layer -> the `let`'s span and the span
    of the layer expression, for E0601 at the construction."""

    def __init__(self, ctx: Ctx, fn_item: FnItem, depth: int = 0, symbolic: bool = False):
        self.ctx = ctx
        self.fn_item = fn_item
        self.depth = depth  # fn calls around this body
        self.symbolic = symbolic
        self.forks = [0]  # copies made by ``both``, shared with the copies
        self.built: dict[str, tuple[ast.Span, ast.Span]] = {}
        self.b = Builder()
        self.scope: dict[str, Value] = {}
        self.refs: dict[str, int | tuple[int, ...]] = {}
        self.paths: dict[str, MemberPath | None] = {}
        self.symbols: dict[str, tuple[int, int]] = {}
        self.output: int | None = None

    def param(self, p: ParamSig, value: TensorV, weight: bool = False) -> None:
        index = len(self.b.nodes)
        extra = {"weight": True} if weight else {}
        ref = self.refs[p.name] = self.b.add(
            node("param", (), value.type, p.name, index=index, **extra)
        )
        self.scope[p.name] = value
        for axis, d in enumerate(value.type.dims or ()):
            name = _single_symbol(d)
            if name is not None and name not in self.symbols:
                self.symbols[name] = (ref, axis)
        declared = resolve(p.type, self.scope, self.ctx)
        bind_dim_names(declared, self.scope)
        for axis, d in enumerate(declared.dims or () if isinstance(declared, TensorT) else ()):
            name = _single_symbol(d)
            if name is not None and name not in self.symbols:
                self.symbols[name] = (ref, axis)

    def run_all(self, stmts: tuple[ast.Stmt, ...], span: ast.Span) -> Graph:
        self.run(stmts)
        if self.output is None:
            raise Unsupported("the body returns no tensor", span)
        symbols = tuple((name, p, axis) for name, (p, axis) in sorted(self.symbols.items()))
        return Graph(tuple(self.b.nodes), self.output, symbols)

    # -- statements ---------------------------------------------------------------------

    def run(self, stmts: tuple[ast.Stmt, ...]) -> None:
        for i, stmt in enumerate(stmts):
            if self.output is not None:
                return
            if self.symbolic and isinstance(stmt, ast.If) and self.undecided(stmt.cond):
                self.both(stmt, stmts[i + 1 :])  # raises
            self.statement(stmt)

    def undecided(self, cond: ast.Expr) -> bool:
        value = self.expr(cond).value
        return type(value) is not bool and _unknown(value)

    def both(self, stmt: ast.If, rest: tuple[ast.Stmt, ...]) -> None:
        """An `if` on construction parameters, lowered symbolically: each branch, then what
        follows it in this block, on a copy of the body (the nodes are shared: a generic
        graph is never used). Raises what a branch refuses, else Undecided, as what follows
        the block depends on the branch taken. At most ``MAX_FORKS`` copies per body."""
        self.forks[0] += 2
        if self.forks[0] > MAX_FORKS:
            raise Undecided("too many conditions on construction parameters", stmt.cond.span)
        for branch in (stmt.then, stmt.otherwise or ()):
            fork = _Body(self.ctx, self.fn_item, self.depth, symbolic=True)
            fork.b, fork.forks, fork.symbols = self.b, self.forks, self.symbols
            fork.scope, fork.refs = dict(self.scope), dict(self.refs)
            fork.paths, fork.built = dict(self.paths), dict(self.built)
            try:
                fork.run(branch + rest)
            except Undecided:
                pass
        raise Undecided("a condition on construction parameters", stmt.cond.span)

    def statement(self, stmt: ast.Stmt) -> None:
        match stmt:
            case ast.Let(name=name, value=e) | ast.Assign(name=name, value=e):
                value = self.expr(e)
                self.bind(name, value)
                self.built.pop(name, None)
                if isinstance(value.value, LayerV) and value.path is None:
                    self.built[name] = (stmt.span, e.span)
            case ast.Return(value=e):
                out = self.expr(e) if e is not None else None
                if out is None or not isinstance(out.ref, int):
                    raise Unsupported("`return` of a value that is not a tensor", stmt.span)
                self.output = out.ref
            case ast.ExprStmt(value=e):
                self.expr(e)
            case ast.For(var=var, iterable=it, body=body):
                self._for(var, it, body)
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                self.run(then if self.const_bool(cond) else otherwise or ())

    def bind(self, name: str, value: Lowered) -> None:
        self.scope[name] = value.value
        self.paths[name] = value.path
        self.refs.pop(name, None)
        if value.ref is not None:
            self.refs[name] = value.ref
        if isinstance(value.ref, int) and not self.b.nodes[value.ref].name:
            self.b.nodes[value.ref] = replace(self.b.nodes[value.ref], name=name)

    def _for(self, var: str, iterable: ast.Expr, body: tuple[ast.Stmt, ...]) -> None:
        source = self.expr(iterable)
        items = elements(source.value, iterable.span, self.ctx)
        if source.ref is None and self.symbolic and not isinstance(items, tuple):
            raise Undecided("`for` over a list whose length is not known yet", iterable.span)
        if source.ref is not None or not isinstance(items, tuple):
            raise Unsupported(
                "`for` over something other than a construction-time list", iterable.span
            )
        for i, item in enumerate(items):
            self.bind(var, Lowered(item, None, source.path + (i,) if source.path else None))
            self.run(body)
            if self.output is not None:
                return

    def const_bool(self, cond: ast.Expr) -> bool:
        value = self.expr(cond).value
        if type(value) is not bool:
            if self.symbolic and _unknown(value):
                raise Undecided("a condition on construction parameters", cond.span)
            raise Unsupported("a condition that is not a construction-time bool", cond.span)
        return value

    # -- expressions --------------------------------------------------------------------

    def mentions_tensor(self, e: object) -> bool:
        if isinstance(e, ast.Name):
            return e.id in self.refs
        if isinstance(e, tuple):
            return any(self.mentions_tensor(x) for x in e)
        if is_record(e):
            return any(self.mentions_tensor(getattr(e, f)) for f in fields(e) if f != "span")
        return False

    def expr(self, e: ast.Expr) -> Lowered:
        if not self.mentions_tensor(e):
            return Lowered(evaluate(e, self.scope, self.ctx), None, self.path_of(e))
        match e:
            case ast.Name(id=name):
                return Lowered(self.scope[name], self.refs[name])
            case ast.Unary(op=op, operand=inner):
                x = self.expr(inner)
                return self.emit("unary", (x,), unary(op, x.value, e, self.ctx), op=op)
            case ast.Binary(op=op, left=left, right=right):
                a, b = self.expr(left), self.expr(right)
                return self.emit("binary", (a, b), arith(op, a.value, b.value, e, self.ctx), op=op)
            case ast.Conditional(cond=cond, then=then, otherwise=otherwise):
                return self.expr(then if self.const_bool(cond) else otherwise)
            case ast.ListLit(elems=elems):
                items = [self.expr(x) for x in elems]
                refs = tuple(x.ref for x in items if isinstance(x.ref, int))
                if len(refs) != len(items):
                    raise Unsupported("a list mixing tensors and other values", e.span)
                return Lowered(tuple(x.value for x in items), refs)
            case ast.Call():
                return self.call(e)
        raise Unsupported(f"{type(e).__name__.lower()} on a tensor", e.span)

    def path_of(self, e: ast.Expr) -> MemberPath | None:
        """The member path of a layer-valued expression: a member, a loop variable, `m[i]`."""
        if isinstance(e, ast.Name):
            return self.paths.get(e.id)
        if isinstance(e, ast.Index):
            base, i = self.path_of(e.value), evaluate(e.index, self.scope, self.ctx)
            value = evaluate(e.value, self.scope, self.ctx)
            if base is not None and type(i) is int and isinstance(value, tuple):
                return base + (i % len(value),)
            if base is not None and self.symbolic and (_unknown(i) or _unknown(value)):
                return base + (0,)  # some element of a member list: which one is undecided
        return None

    def operand(self, x: Lowered) -> int:
        if isinstance(x.ref, int):
            return x.ref
        value = x.value.value if isinstance(x.value, Trit) else x.value
        if self.symbolic and _unknown(value):
            raise Undecided("an operand whose value is not known yet", (0, 0))
        if isinstance(value, Sym) or not isinstance(value, (int, float, bool)):
            raise Unsupported(f"a {type(value).__name__} operand of a tensor operation", (0, 0))
        return self.b.const(value)

    def emit(
        self, kind: str, operands: tuple[Lowered, ...], value: Value, **attrs: object
    ) -> Lowered:
        if not isinstance(value, TensorV):
            if self.symbolic and _unknown(value):
                raise Undecided(f"`{kind}` whose result is not known yet", (0, 0))
            raise Unsupported(f"`{kind}` whose result is not a tensor", (0, 0))
        inputs = tuple(self.operand(x) for x in operands)
        return Lowered(value, self.b.add(node(kind, inputs, value.type, **attrs)))

    def call(self, e: ast.Call) -> Lowered:
        func = self.expr(e.func)
        lowered = {a.span: self.expr(a) for a in e.args}
        lowered.update({k.span: self.expr(k.value) for k in e.kwargs})
        args = CallArgs(
            tuple((lowered[a.span].value, a.span) for a in e.args),
            tuple((k.name, lowered[k.span].value, k.span) for k in e.kwargs),
        )
        what = e.func.id if isinstance(e.func, ast.Name) else "call"
        value = call(func.value, args, e.span, self.ctx, what)
        match func.value:
            case LayerV() as layer:
                if func.path is None:
                    raise self._not_a_member(e.func)
                x = lowered[e.args[0].span]
                if layer.name != "Sequential":
                    return self.emit("apply", (x,), value, path=func.path, layer=layer)
                steps = self.steps(sequential_layers(layer), x.value, e.span)
                return self.emit("apply", (x,), value, path=func.path, layer=layer, steps=steps)
            case Callee(name=name, ref=None) if name in FUNCTIONS:
                names = tuple(p for p, _ in FUNCTIONS[name].params)
                defaults = dict(FUNCTIONS[name].params)
                return self.builtin_call(name, names, defaults, args, lowered, value, e.span)
            case Callee(ref=ref) if ref is not None and ref.kind in ("fn", "functional"):
                return self.fn_call(ref, args, lowered, value, e.span)
        if self.symbolic and _unknown(func.value):
            raise Undecided(f"`{what}` is chosen by construction parameters", e.span)
        raise Unsupported(f"calling `{what}` on tensors", e.span)

    def _not_a_member(self, func: ast.Expr) -> Unsupported:
        """E0601 for a layer applied that is no member: at the `let` that built it in this
        body when there is one (the fix is there), the application as a second label."""
        message = "a layer applied in `forward` must be a member"
        built = self.built.get(func.id) if isinstance(func, ast.Name) else None
        if built is None:
            return Unsupported(message, func.span)
        let, value = built
        name = func.id if isinstance(func, ast.Name) else ""
        return Unsupported(
            message,
            let,
            f"`{name}` is built here, inside `forward`",
            ((func.span, "and applied here"),),
            f"make it a member: move `let {name} = {QUOTE}` into the layer's body, beside "
            "its other members",
            value,
        )

    def steps(self, layers: tuple[LayerV, ...], x: Value, span: ast.Span) -> tuple[TensorT, ...]:
        """The type after each layer of a Sequential applied to ``x``."""
        out = []
        for layer in layers:
            x = call(layer, CallArgs(((x, span),)), span, self.ctx, layer.name)
            if not isinstance(x, TensorV):
                raise Unsupported(
                    f"`{layer.name}` in a Sequential whose result is not a tensor", span
                )
            out.append(x.type)
        return tuple(out)

    def bound(
        self, names: tuple[str, ...], args: CallArgs, span: ast.Span, what: str
    ) -> dict[str, tuple[Value, ast.Span]]:
        out = bind(names, frozenset(), args, span, self.ctx, what)
        if out is None:
            raise Unsupported(f"the arguments of `{what}`", span)
        return out

    def builtin_call(
        self,
        name: str,
        names: tuple[str, ...],
        defaults: Mapping[str, object],
        args: CallArgs,
        lowered: dict[ast.Span, Lowered],
        value: Value,
        span: ast.Span,
    ) -> Lowered:
        bound = self.bound(names, args, span, name)
        inputs: list[int] = []
        spec: dict[str, object] = {}
        for pname in names:
            if pname not in bound:
                spec[pname] = None if defaults[pname] is REQUIRED else defaults[pname]
                continue
            arg = lowered[bound[pname][1]]
            if isinstance(arg.ref, int):
                spec[pname] = In(len(inputs))
                inputs.append(arg.ref)
            elif isinstance(arg.ref, tuple):
                spec[pname] = InList(tuple(range(len(inputs), len(inputs) + len(arg.ref))))
                inputs.extend(arg.ref)
            else:
                spec[pname] = arg.value
        if not isinstance(value, TensorV):
            raise Unsupported(f"`{name}` whose result is not a tensor", span)
        return Lowered(
            value,
            self.b.add(node("call", tuple(inputs), value.type, fn=name, args=tuple(spec.items()))),
        )

    def fn_call(
        self,
        ref: ItemRef,
        args: CallArgs,
        lowered: dict[ast.Span, Lowered],
        value: Value,
        span: ast.Span,
    ) -> Lowered:
        item, sig = self.fn_item(ref)
        bound = self.bound(tuple(p.name for p in sig.inputs), args, span, sig.name)
        values = {p: bound[p][0] for p in bound}
        if self.depth >= MAX_FN_NESTING:
            raise _TooDeep(f"fn calls nest more than {MAX_FN_NESTING} levels deep", span)
        try:
            body = lower_fn(
                item, sig, values, self.ctx.env.scope_of(ref), self.fn_item, self.depth + 1
            )
        except _TooDeep as err:
            if self.depth:
                raise
            raise Unsupported(
                f"{err.message} (the chain starts with this call of `{sig.name}`)", span
            ) from None
        refs = [
            lowered[bound[p.name][1]].ref
            for p in sig.inputs
            if isinstance(values.get(p.name), TensorV)
        ]
        inputs = tuple(i for i in refs if isinstance(i, int))
        if not isinstance(value, TensorV) or len(inputs) != len(refs):
            raise Unsupported(f"calling `{sig.name}`", span)
        return Lowered(
            value, self.b.add(node("fn_call", inputs, value.type, fn=sig.name, body=body))
        )
