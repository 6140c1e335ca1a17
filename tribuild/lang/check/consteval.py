"""Evaluation of expressions: construction-time values, and abstract tensors in `forward`.

Terms:
- *Ctx*: what one checking run carries: the diagnostic ``Sink``, the ``Env``, and the
  *work bound* (``Ctx.work``): every evaluated node costs one unit, and a comprehension
  costs its length up front, so an enormous construction is an error (E0504), not a hang.
- *scope*: the local names (construction parameters, members, `forward` locals) and their
  values. Names not in scope are user items (through the Env), then built-ins.
- *POISON* (``values.POISON``): the value of an expression that already produced an error;
  every operation on it yields POISON without reporting again, so one mistake gives one
  diagnostic.

Integer arithmetic goes through ``dims``, so symbolic integers (generic checking) follow
the same algebra as shapes; `/` between integers is floor division, as in shape formulas.
Operations involving a tensor are delegated to ``ops``. Calls are evaluated by ``calls``,
which evaluates its arguments here: so this module cannot import it, and a ``Ctx`` is
handed the call evaluators when it is made (``calls.new_ctx``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tribuild.diagnostics import did_you_mean
from tribuild.lang import dims
from tribuild.lang.builtins.table import BUILTIN_NAMES
from tribuild.lang.check.codes import (
    BUDGET,
    CONST_TYPE,
    DATA_DEPENDENT,
    DIV_ZERO,
    INDEX_RANGE,
    UNKNOWN_NAME,
    Sink,
)
from tribuild.lang.check.env import Env
from tribuild.lang.check.ops import tensor_binary, tensor_unary
from tribuild.lang.check.unify import join
from tribuild.lang.check.values import (
    INT64_MAX,
    POISON,
    Callee,
    Choice,
    RangeV,
    TensorV,
    Trit,
    Unk,
    UnkList,
    Value,
    as_dim,
    from_dim,
    is_bool,
    is_float,
    is_int,
    is_number,
    is_poison,
    kind_of,
)
from tribuild.lang.syntax import ast
from tribuild.lang.types import ListT, ScalarT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.lang.builtins.shapes import Site

__all__ = [
    "POISON",
    "Ctx",
    "arith",
    "condition",
    "elements",
    "evaluate",
    "is_bool",
    "is_float",
    "is_number",
    "unary",
]

_MISSING: Any = object()
WORK_LIMIT = 1_000_000
BOOL, FLOAT, INT = ScalarT("bool"), ScalarT("float32"), ScalarT("int64")


class Ctx:
    """``origins``: member name -> the span of its `let`; ``fresh``: the fresh-name counter,
    in a list so runs that share it count on. ``evaluate_call`` evaluates an ``ast.Call``
    and ``apply_chain`` applies a list of layers in turn (``Sequential``): both live in
    ``calls``, which imports this module. ``trace``: None, or a list that each binding of a
    body (parameter, `let`, assignment, loop variable) is appended to as ``(span of the name
    or None for a parameter, name, value)``: what an editor's hover shows, asked for apart
    from the build's checks."""

    __slots__ = (
        "sink",
        "env",
        "work",
        "exhausted",
        "fresh",
        "origins",
        "evaluate_call",
        "apply_chain",
        "trace",
    )

    def __init__(
        self,
        sink: Sink,
        env: Env,
        evaluate_call: Callable[[ast.Call, dict[str, Value], Ctx], Value],
        apply_chain: Callable[[Value, Value, Site], Value],
        work: int = WORK_LIMIT,
    ) -> None:
        self.sink, self.env, self.work = sink, env, work
        self.evaluate_call, self.apply_chain = evaluate_call, apply_chain
        self.exhausted = False
        self.fresh = [0]
        self.origins: dict[str, ast.Span] = {}
        self.trace: list[tuple[ast.Span | None, str, Value]] | None = None

    def spend(self, units: int, span: ast.Span) -> bool:
        """Charge ``units`` of work; False (after reporting once) when the bound is exceeded."""
        self.work -= units
        if self.work >= 0:
            return True
        self.over_budget(span)
        return False

    def over_budget(self, span: ast.Span) -> None:
        """Report, once per run, that the work bound is exceeded."""
        if not self.exhausted:
            self.exhausted = True
            self.sink.error(
                BUDGET,
                span,
                f"construction-time evaluation needs more than {WORK_LIMIT} steps",
                help="build fewer or smaller layers",
            )

    def fresh_name(self, base: str) -> str:
        self.fresh[0] += 1
        return f"{base}'{self.fresh[0]}"


def lookup(name: str, span: ast.Span, scope: dict[str, Value], ctx: Ctx) -> Value:
    if name in scope:
        return scope[name]
    ref = ctx.env.lookup(name)
    if ref is not None and ref.kind == "unresolved":
        return POISON  # a failed import promised it; that import's error explains it
    if ref is not None:
        return ctx.env.const_value(ref) if ref.kind == "const" else Callee(name, ref)
    if name in BUILTIN_NAMES:
        return Callee(name)
    visible = sorted(set(scope) | set(ctx.env.visible_names()) | BUILTIN_NAMES)
    ctx.sink.error(
        UNKNOWN_NAME,
        span,
        f"unknown name `{name}`",
        label="not found in this scope",
        help=did_you_mean(name, visible),
    )
    return POISON


def evaluate(e: ast.Expr, scope: dict[str, Value], ctx: Ctx) -> Value:
    """The value of ``e`` in ``scope``; errors are reported and give POISON.

    Dispatch tests the node's class, most frequent kinds first; the bodies stay inline so a
    deep chain (``a + b + ...``, ``- - x``, ``a[0][0]``) takes one Python frame per level."""
    ctx.work -= 1  # ``ctx.spend(1, e.span)``, inlined: every node pays it
    if ctx.work < 0:
        ctx.over_budget(e.span)
        return POISON
    node: Any = e  # narrowed by its class below, which mypy cannot follow
    kind = e.__class__
    if kind is ast.Name:
        value = scope.get(node.id, _MISSING)
        return lookup(node.id, node.span, scope, ctx) if value is _MISSING else value
    if kind is ast.Call:
        return ctx.evaluate_call(node, scope, ctx)
    if kind is ast.IntLit or kind is ast.FloatLit or kind is ast.BoolLit or kind is ast.StringLit:
        return node.value
    if kind is ast.Binary:
        if node.op in ("&&", "||"):
            return binary(node, scope, ctx)
        return arith(
            node.op, evaluate(node.left, scope, ctx), evaluate(node.right, scope, ctx), node, ctx
        )
    if kind is ast.Conditional:
        return conditional(node, scope, ctx)
    if kind is ast.Unary:
        return unary(node.op, evaluate(node.operand, scope, ctx), node, ctx)
    if kind is ast.ListLit:
        return tuple(evaluate(x, scope, ctx) for x in node.elems)
    if kind is ast.Index:
        return index(evaluate(node.value, scope, ctx), evaluate(node.index, scope, ctx), node, ctx)
    if kind is ast.Unknown:
        return -1  # `?` in a shape list: the dimension `reshape` infers
    if kind is ast.Range:
        return make_range(
            evaluate(node.start, scope, ctx), evaluate(node.end, scope, ctx), node, ctx
        )
    if kind is ast.ListComp:
        return comprehension(node, scope, ctx)
    if kind is ast.Attr:
        value = evaluate(node.value, scope, ctx)
        if not is_poison(value):
            ctx.sink.error(
                CONST_TYPE,
                node.span,
                f"{kind_of(value)} has no attribute `{node.name}`",
                help=_shape_help(value, node.name),
            )
        return POISON
    return POISON  # ErrorExpr: the parser reported it


def _shape_help(value: Value, attr: str) -> str | None:
    """`x.shape[0]`, a PyTorch habit: a tensor's dims are values under the names its type
    gives them."""
    if attr not in ("shape", "size") or not isinstance(value, TensorV):
        return None
    shape = value.type.dims
    if not shape:
        return (
            "a tensor's dims are named in its type: `x: Tensor<float32, [N, C]>` makes `N` a value"
        )
    names = ", ".join(f"dim {i} is `{dims.format_dim(d)}`" for i, d in enumerate(shape))
    return f"a tensor's dims are values under the names its type gives them: {names}"


def type_error(ctx: Ctx, span: ast.Span, message: str, *operands: Value) -> Value:
    if POISON not in operands:
        ctx.sink.error(CONST_TYPE, span, message)
    return POISON


def condition(value: Value, span: ast.Span, ctx: Ctx) -> bool | None:
    """A construction-time condition: True/False, None when unknown (generic) or wrong."""
    if type(value) is bool:
        return value
    if isinstance(value, TensorV):
        ctx.sink.error(
            DATA_DEPENDENT,
            span,
            f"condition depends on tensor data ({value.type})",
            label="a tensor, known only when the model runs",
            help="conditions must be construction-time values (parameters, constants); "
            "use arithmetic such as `relu` or a mask multiply instead of branching",
        )
    elif not is_bool(value):
        type_error(ctx, span, f"expected a bool condition, found {kind_of(value)}", value)
    return None


def unary(op: str, v: Value, node: ast.Unary, ctx: Ctx) -> Value:
    if isinstance(v, TensorV):
        return tensor_unary(op, v, node, ctx)
    if op == "!":
        return (
            (not v)
            if type(v) is bool
            else v
            if is_bool(v)
            else type_error(ctx, node.span, f"`!` expects a bool, found {kind_of(v)}", v)
        )
    if isinstance(v, Trit):
        v = v.value
    if is_int(v) and op in "+-":
        return from_dim(dims.scale(as_dim(v), -1 if op == "-" else 1))
    if is_float(v) and op in "+-":
        return (-v if op == "-" else v) if type(v) is float else v
    return type_error(ctx, node.span, f"`{op}` expects a number, found {kind_of(v)}", v)


def binary(node: ast.Binary, scope: dict[str, Value], ctx: Ctx) -> Value:
    """`&&` and `||`, short-circuiting on known values."""
    left = evaluate(node.left, scope, ctx)
    lc = condition(left, node.left.span, ctx)
    if lc is not None and lc == (node.op == "||"):
        return lc
    right = evaluate(node.right, scope, ctx)
    rc = condition(right, node.right.span, ctx)
    if lc is not None and rc is not None:
        return rc
    if rc is not None and rc == (node.op == "||"):
        return rc
    return Unk(BOOL) if POISON not in (left, right) else POISON


_COMPARE = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def arith(op: str, a: Value, b: Value, node: ast.Expr, ctx: Ctx) -> Value:
    """A binary operator other than `&&`/`||` on evaluated operands."""
    if is_poison(a) or is_poison(b):
        return POISON
    if isinstance(a, TensorV) or isinstance(b, TensorV):
        return tensor_binary(op, a, b, node, ctx)
    a, b = (x.value if isinstance(x, Trit) else x for x in (a, b))
    if op in _COMPARE:
        return compare(op, a, b, node, ctx)
    if is_int(a) and is_int(b) and op in dims.BINARY_OPS:
        out = dims.BINARY_OPS[op](as_dim(a), as_dim(b))
        if out is None:
            ctx.sink.error(
                DIV_ZERO,
                node.span,
                "division by zero at construction time",
                label="the divisor is 0",
            )
            return POISON
        return int64(op, from_dim(out), node, ctx)
    if is_number(a) and is_number(b) and op in ("+", "-", "*", "/", "//", "%", "**"):
        return float_arith(op, a, b, node, ctx)
    return type_error(
        ctx, node.span, f"`{op}` is not defined for {kind_of(a)} and {kind_of(b)}", a, b
    )


def float_arith(op: str, a: Value, b: Value, node: ast.Expr, ctx: Ctx) -> Value:
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return Unk(INT) if is_int(a) and is_int(b) else Unk(FLOAT)
    if (
        op == "**"
        and type(a) is int
        and type(b) is int
        and b > 0
        and b * (abs(a).bit_length() - 1) >= 63
    ):
        return type_error(
            ctx, node.span, "`**` gives an integer beyond int64"
        )  # not computed: 10 ** 10 ** 10
    try:
        out = {
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "/": lambda: a / b,
            "//": lambda: a // b,
            "%": lambda: a % b,
            "**": lambda: a**b,
        }[op]()
    except ZeroDivisionError:
        ctx.sink.error(
            DIV_ZERO, node.span, "division by zero at construction time", label="the divisor is 0"
        )
        return POISON
    except OverflowError:
        return type_error(ctx, node.span, f"`{op}` overflows a float")
    if isinstance(out, complex):
        return type_error(
            ctx, node.span, f"`{op}` of a negative number to a fractional power has no real value"
        )
    if type(out) is float and not math.isfinite(out):  # `1e308 * 10.0`: as the literal 1e999
        return type_error(ctx, node.span, f"`{op}` overflows a float: it would be infinity")
    return int64(op, out, node, ctx)


def int64(op: str, v: Value, node: ast.Expr, ctx: Ctx) -> Value:
    """``v``, or an error when it is a known integer outside int64 (so no construction-time
    integer can grow without bound)."""
    if type(v) is int and not -INT64_MAX - 1 <= v <= INT64_MAX:
        return type_error(ctx, node.span, f"`{op}` gives an integer beyond int64")
    return v


def compare(op: str, a: Value, b: Value, node: ast.Expr, ctx: Ctx) -> Value:
    if is_int(a) and is_int(b):
        diff = dims.as_int(dims.sub(as_dim(a), as_dim(b)))
        return _COMPARE[op](diff, 0) if diff is not None else Unk(BOOL)
    if is_number(a) and is_number(b):
        return (
            _COMPARE[op](a, b)
            if isinstance(a, (int, float)) and isinstance(b, (int, float))
            else Unk(BOOL)
        )
    if op in ("==", "!=") and type(a) is type(b) and type(a) in (bool, str):
        return _COMPARE[op](a, b)
    if op in ("==", "!=") and is_bool(a) and is_bool(b):
        return Unk(BOOL)
    return type_error(ctx, node.span, f"cannot compare {kind_of(a)} with {kind_of(b)}", a, b)


def conditional(node: ast.Conditional, scope: dict[str, Value], ctx: Ctx) -> Value:
    known = condition(evaluate(node.cond, scope, ctx), node.cond.span, ctx)
    if known is not None:
        return evaluate(node.then if known else node.otherwise, scope, ctx)
    then, otherwise = evaluate(node.then, scope, ctx), evaluate(node.otherwise, scope, ctx)
    return POISON if is_poison(then) or is_poison(otherwise) else join(then, otherwise)


def make_range(a: Value, b: Value, node: ast.Expr, ctx: Ctx) -> Value:
    if is_int(a) and is_int(b):
        return RangeV(a, b)
    return type_error(
        ctx, node.span, f"a range needs int bounds, found {kind_of(a)}..{kind_of(b)}", a, b
    )


def elements(iterable: Value, span: ast.Span, ctx: Ctx) -> tuple[Value, ...] | UnkList | None:
    """The elements of a list or range, UnkList when their number is unknown, None on error."""
    if isinstance(iterable, RangeV):
        lo, hi = iterable.start, iterable.end
        if type(lo) is int and type(hi) is int:
            if not ctx.spend(max(0, hi - lo), span):
                return None
            return tuple(range(lo, hi))
        return UnkList(Unk(INT))
    if isinstance(iterable, tuple) or isinstance(iterable, UnkList):
        return iterable
    if isinstance(iterable, Unk) and isinstance(iterable.type, ListT):
        return UnkList(Unk(iterable.type.elem))
    if isinstance(iterable, Choice):
        return UnkList(None)
    type_error(ctx, span, f"expected a list or a range `a..b`, found {kind_of(iterable)}", iterable)
    return None


def comprehension(node: ast.ListComp, scope: dict[str, Value], ctx: Ctx) -> Value:
    items = elements(evaluate(node.iterable, scope, ctx), node.iterable.span, ctx)
    if items is None:
        return POISON
    if isinstance(items, UnkList):
        return UnkList(evaluate(node.elem, {**scope, node.var: items.elem or POISON}, ctx))
    out = []
    for item in items:
        if ctx.exhausted:
            return POISON
        out.append(evaluate(node.elem, {**scope, node.var: item}, ctx))
    return tuple(out)


def index(value: Value, i: Value, node: ast.Index, ctx: Ctx) -> Value:
    if is_poison(value) or is_poison(i):
        return POISON
    if not is_int(i):
        return type_error(ctx, node.index.span, f"an index must be an int, found {kind_of(i)}", i)
    if isinstance(value, tuple):
        if type(i) is not int:
            return _join_all(value) if value else POISON
        if not -len(value) <= i < len(value):
            ctx.sink.error(
                INDEX_RANGE,
                node.index.span,
                f"index {i} is out of range for a list of {len(value)} elements",
                label=f"expected an index in 0..{len(value)}",
            )
            return POISON
        return value[i]
    if isinstance(value, UnkList):
        return value.elem if value.elem is not None else POISON
    if isinstance(value, Unk) and isinstance(value.type, ListT):
        return Unk(value.type.elem)
    return type_error(
        ctx,
        node.span,
        f"only construction-time lists can be indexed, found {kind_of(value)}",
        value,
    )


def _join_all(values: tuple[Value, ...]) -> Value:
    out = values[0]
    for v in values[1:]:
        out = join(out, v)
    return out
