"""Checking a body (`forward`, a `fn`, a functional layer) statement by statement.

Terms:
- *Body*: the state of one body being checked: its scope, the declared return type, and a
  ``Unifier`` whose flexible symbols are the dim names first written in a `let` or return
  annotation (bound at first use, unified afterwards).
- *resolving* a declared type: substituting the integers in scope (construction
  parameters, int inputs, constants) for the dim names they name.
- *unknown condition*: during generic checking an `if` may depend on a parameter; both
  branches are checked (the `then` branch assuming the condition's `a == b` equalities),
  and every local afterwards is the join of what the branches left.
- A `for` over a list of unknown length checks its body once and joins, likewise. A `for`
  over a known list skips an element equal to the one before it when the state it meets is
  equal too (``_loop_state``): a repeat of a checked iteration.
"""

from __future__ import annotations

from tribuild.lang import dims
from tribuild.lang.check.calls import cast_help, conform, mismatch, subst_type
from tribuild.lang.check.codes import BAD_ASSIGN, DATA_DEPENDENT, RETURN_MISMATCH
from tribuild.lang.check.consteval import POISON, Ctx, condition, elements, evaluate
from tribuild.lang.check.type_names import unknown_type
from tribuild.lang.check.unify import Unifier, join
from tribuild.lang.check.values import (
    Sym,
    TensorV,
    UnkList,
    Value,
    as_dim,
    from_dim,
    is_int,
    is_poison,
)
from tribuild.lang.syntax import ast
from tribuild.lang.types import TensorT, Type, lower_type, type_symbols

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import overload


class Body:
    """``locals``: the names this body declared (and its parameters); ``returned``: the values
    of the `return`s checked so far."""

    __slots__ = ("ctx", "scope", "ret", "ret_span", "locals", "unifier", "returned")

    def __init__(
        self,
        ctx: Ctx,
        scope: dict[str, Value],
        ret: Type | None,
        ret_span: ast.Span | None,
        locals: set[str] | None = None,
        unifier: Unifier | None = None,
    ) -> None:
        self.ctx, self.scope, self.ret, self.ret_span = ctx, scope, ret, ret_span
        self.locals = set() if locals is None else locals
        self.unifier = Unifier() if unifier is None else unifier
        self.returned: list[Value] = []


_BY_TYPE: dict[int, tuple[Type, frozenset[str], dict]] = {}
"""id(t) -> (t, the dim symbols of t, mapping -> t resolved with it): the types resolved are
mostly those of a memoized signature or AST, resolved again for each instance; looked up by
identity, they are not hashed each time (``t`` is held, so its id is not reused). Small: a
check resolves few distinct types, and a new value of a signature brings new objects."""
_BY_TYPE_LIMIT = 1024
_RESOLVED: dict[tuple, Type | None] = {}


if TYPE_CHECKING:  # a tensor type stays a tensor type, and None stays None

    @overload
    def resolve(t: TensorT, scope: dict[str, Value], ctx: Ctx) -> TensorT: ...
    @overload
    def resolve(t: Type, scope: dict[str, Value], ctx: Ctx) -> Type: ...
    @overload
    def resolve(t: Type | None, scope: dict[str, Value], ctx: Ctx) -> Type | None: ...


def resolve(t: Type | None, scope: dict[str, Value], ctx: Ctx) -> Type | None:
    """``t`` with every dim name that names an integer in scope or a constant replaced."""
    if t is None:
        return None
    entry = _BY_TYPE.get(id(t))
    if entry is None or entry[0] is not t:
        entry = dims.keep(_BY_TYPE, id(t), (t, type_symbols(t), {}), _BY_TYPE_LIMIT)
    mapping: list[tuple[str, Value]] = []  # the int values themselves: cheaper to hash than dims
    for name in entry[1]:
        value = scope.get(name)
        if value is None:
            ref = ctx.env.lookup(name)
            value = ctx.env.const_value(ref) if ref is not None and ref.kind == "const" else None
        if value is not None and is_int(value):
            mapping.append((name, value))
    if not mapping:
        return t
    key = tuple(mapping)
    resolved = entry[2].get(key)
    if resolved is None:
        resolved = entry[2][key] = dims.memo(_RESOLVED, (t, key), _substituted)
    return resolved


def _substituted(key: tuple[Type, tuple[tuple[str, Value], ...]]) -> Type | None:
    t, mapping = key
    return subst_type(t, {name: as_dim(value) for name, value in mapping})


def bind_dim_names(t: Type | None, scope: dict[str, Value]) -> None:
    """Make the dim names of a parameter type usable as integers (`reshape(x, [N, T, d])`)."""
    for name in type_symbols(t) if t is not None else ():
        scope.setdefault(name, Sym(dims.sym(name)))


def check_declared(
    body: Body,
    declared: Type,
    value: Value,
    span: ast.Span,
    code: str,
    what: str,
    secondary: tuple[tuple[ast.Span, str], ...] = (),
) -> Value:
    """Unify ``value`` with a declared type, binding names seen here first; POISON when the
    type is unknown (already reported). ``secondary``: labels for a mismatch."""
    if not isinstance(declared, TensorT) and unknown_type(declared, body.ctx.env):
        return POISON
    declared = resolve(declared, body.scope, body.ctx)
    new = type_symbols(declared) - set(body.scope) - set(body.unifier.subst)
    body.unifier.flexible |= new
    converted, problem, pcode = conform(value, declared, body.unifier)
    for name in new:  # names bound here are usable as integers from now on
        body.scope.setdefault(name, from_dim(body.unifier.resolve(dims.sym(name))))
    if problem is not None:
        shown = _show(body, declared)
        message = mismatch(declared, shown, value, problem)
        body.ctx.sink.error(
            code or pcode,
            span,
            f"{what}: {message}" if what else message,
            label=f"expected {shown}",
            secondary=secondary,
            help=cast_help(declared, value),
        )
        return POISON
    return converted


def _show(body: Body, t: Type) -> str:
    return body.unifier.describe(t) if isinstance(t, TensorT) else str(t)


def run(stmts: tuple[ast.Stmt, ...], body: Body) -> None:
    for stmt in stmts:
        if body.returned:
            return
        statement(stmt, body)


def statement(stmt: ast.Stmt, body: Body) -> None:
    ctx = body.ctx
    match stmt:
        case ast.Let(name=name, type=t, value=e):
            value = evaluate(e, body.scope, ctx)
            if t is not None:
                value = check_declared(
                    body, lower_type(t, ctx.sink.report), value, e.span, "", f"`{name}`"
                )
            body.scope[name] = value
            body.locals.add(name)
            if ctx.trace is not None:
                ctx.trace.append((stmt.name_span, name, value))
        case ast.Assign(name=name, value=e):
            value = evaluate(e, body.scope, ctx)
            if name not in body.locals:
                what = "is not declared" if name not in body.scope else "is not a local variable"
                ctx.sink.error(
                    BAD_ASSIGN,
                    stmt.span,
                    f"cannot assign to `{name}`: it {what}",
                    label="expected a variable declared with `let` or a parameter",
                    help=f"declare it first: `let {name} = ...`",
                )
            else:
                body.scope[name] = value
                if ctx.trace is not None:
                    ctx.trace.append(((stmt.span[0], stmt.span[0] + 1), name, value))
        case ast.Return(value=e):
            _return(stmt, e, body)
        case ast.ExprStmt(value=e):
            evaluate(e, body.scope, ctx)
        case ast.For():
            _for(stmt, body)
        case ast.If():
            _if(stmt, body)


def _return(stmt: ast.Return, e: ast.Expr | None, body: Body) -> None:
    if e is None:
        if body.ret is not None:
            body.ctx.sink.error(
                RETURN_MISMATCH, stmt.span, f"`return` without a value, expected {body.ret}"
            )
        body.returned.append(POISON)
        return
    value = evaluate(e, body.scope, body.ctx)
    if body.ret is not None and not is_poison(value):
        value = check_declared(
            body, body.ret, value, e.span, RETURN_MISMATCH, "returned value", _made_by(e, body)
        )
    body.returned.append(value)


def _made_by(e: ast.Expr, body: Body) -> tuple[tuple[ast.Span, str], ...]:
    """For a returned value that a member computes (`return fc2(h)`): a label at the member's
    construction, where its output's dims are set (as E0401 labels a member it applies)."""
    if not (isinstance(e, ast.Call) and isinstance(e.func, ast.Name)):
        return ()
    origin = body.ctx.origins.get(e.func.id)
    if origin is None or e.func.id in body.locals:
        return ()
    return ((origin, f"`{e.func.id}`, whose output is returned, is built here"),)


def _branch(stmts: tuple[ast.Stmt, ...], body: Body, scope: dict[str, Value]) -> Body:
    inner = Body(body.ctx, scope, body.ret, body.ret_span, set(body.locals), body.unifier)
    run(stmts, inner)
    return inner


def _merge(body: Body, branches: list[Body]) -> None:
    """Locals after alternative paths: joined over the paths that did not return."""
    live = [b for b in branches if not b.returned]
    body.returned.extend(v for b in branches for v in b.returned if len(live) == 0)
    for name in body.locals:
        values = [b.scope[name] for b in live if name in b.scope]
        if values:
            merged = values[0]
            for v in values[1:]:
                merged = POISON if is_poison(merged) or is_poison(v) else join(merged, v)
            body.scope[name] = merged


def _for(stmt: ast.For, body: Body) -> None:
    iterable = evaluate(stmt.iterable, body.scope, body.ctx)
    if isinstance(iterable, TensorV):
        body.ctx.sink.error(
            DATA_DEPENDENT,
            stmt.iterable.span,
            f"`for` over tensor data ({iterable.type})",
            help="loop over a construction-time list of layers or a range `a..b`",
        )
        return
    items = elements(iterable, stmt.iterable.span, body.ctx)
    if items is None:
        return
    body.locals.add(stmt.var)
    if isinstance(items, UnkList):
        before = dict(body.scope)
        once = _branch(stmt.body, body, {**body.scope, stmt.var: items.elem or POISON})
        _merge(body, [Body(body.ctx, before, body.ret, body.ret_span), once])
        return
    previous = None  # the last element checked, with the state before it
    for item in items:
        state = (item, _loop_state(body, stmt.var))
        if state == previous:
            continue  # the same element from the same state: the iteration before, again
        previous = state
        body.scope[stmt.var] = item
        if body.ctx.trace is not None:
            body.ctx.trace.append(((stmt.span[0] + 1, stmt.span[0] + 2), stmt.var, item))
        run(stmt.body, body)
        if body.ctx.exhausted or body.returned:
            return


def _loop_state(body: Body, var: str) -> tuple:
    """What an iteration's outcome depends on besides its element: the scope (less the loop
    variable, which the iteration sets), the locals and the unifier's bindings. Checking is a
    function of these, so an element equal to the one before, met in an equal state, leaves
    that state as it was and reports what was reported (``Sink`` drops repeats): a loop over
    the 36 alike blocks of a ResNet-152 stage is checked twice, not 36 times."""
    scope = {name: value for name, value in body.scope.items() if name != var}
    unifier = body.unifier
    return scope, frozenset(body.locals), dict(unifier.subst), frozenset(unifier.flexible)


def _if(stmt: ast.If, body: Body) -> None:
    cond = evaluate(stmt.cond, body.scope, body.ctx)
    known = condition(cond, stmt.cond.span, body.ctx)
    otherwise = stmt.otherwise or ()
    if known is not None:
        run(stmt.then if known else otherwise, body)
        return
    assumed = (
        _assume(stmt.cond, body.scope, body.ctx) if not isinstance(cond, TensorV) else body.scope
    )
    _merge(body, [_branch(stmt.then, body, assumed), _branch(otherwise, body, dict(body.scope))])


def _assume(cond: ast.Expr, scope: dict[str, Value], ctx: Ctx) -> dict[str, Value]:
    """The scope under the `a == b` conjuncts of a condition whose value is unknown."""
    mapping: dict[str, dims.DimLike] = {}
    pending = [cond]
    while pending:
        e = pending.pop()
        if isinstance(e, ast.Binary) and e.op == "&&":
            pending += [e.left, e.right]
        elif isinstance(e, ast.Binary) and e.op == "==" and isinstance(e.left, ast.Name):
            left, right = scope.get(e.left.id), evaluate(e.right, scope, ctx)
            if isinstance(left, Sym) and len(dims.symbols(left.dim)) == 1 and is_int(right):
                mapping[next(iter(dims.symbols(left.dim)))] = as_dim(right)
    return {name: _substitute(v, mapping) for name, v in scope.items()} if mapping else dict(scope)


def _substitute(v: Value, mapping: dict[str, dims.DimLike]) -> Value:
    if isinstance(v, TensorV):
        return TensorV(subst_type(v.type, mapping))
    if isinstance(v, Sym):
        out = dims.substitute(v.dim, mapping)
        return v if out is None else from_dim(out)
    return v
