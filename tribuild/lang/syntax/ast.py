"""The syntax tree of one `.tri` item.

Terms:
- *item*: a top-level unit of a file (import, constant, fn, layer). Items are parsed one at
  a time from their own tokens, so each tree is independent of where the item sits in the file.
- *span*: ``(start, end)``, a half-open range of token indices *relative to the item's first
  token*. Token indices (not character offsets) make every tree position-independent and
  insensitive to whitespace and comments: editing a comment anywhere in a file leaves every
  tree equal, which is what lets the engine cut the rebuild off right after the lexer.
  ``tribuild.lang.syntax.locate`` turns a span back into line and column for messages.

All nodes are records (``tribuild.base.record``: frozen, slotted) holding tuples, so trees are
hashable, compare by value (the engine backdates on equality) and serialise through the engine's
codec.
"""

from __future__ import annotations

from tribuild.base.record import record

Span = tuple[int, int]


# --- expressions -----------------------------------------------------------------------


@record
class IntLit:
    value: int
    span: Span


@record
class FloatLit:
    value: float
    span: Span


@record
class BoolLit:
    value: bool
    span: Span


@record
class StringLit:
    value: str
    span: Span


@record
class Name:
    id: str
    span: Span


@record
class Unknown:
    """`?` in a dimension list: a dimension nobody knows."""

    span: Span


@record
class Unary:
    op: str  # "-", "+", "!"
    operand: Expr
    span: Span


@record
class Binary:
    op: str  # one of + - * / // % ** @ == != < <= > >= && ||
    left: Expr
    right: Expr
    span: Span


@record
class Conditional:
    """`cond ? then : otherwise`."""

    cond: Expr
    then: Expr
    otherwise: Expr
    span: Span


@record
class Keyword:
    name: str
    value: Expr
    span: Span


@record
class Call:
    func: Expr
    args: tuple[Expr, ...]
    kwargs: tuple[Keyword, ...]
    span: Span


@record
class Index:
    value: Expr
    index: Expr
    span: Span


@record
class Attr:
    value: Expr
    name: str
    span: Span


@record
class ListLit:
    elems: tuple[Expr, ...]
    span: Span


@record
class Range:
    """`start..end`, half-open; only meaningful at construction time."""

    start: Expr
    end: Expr
    span: Span


@record
class ListComp:
    """`[elem for var in iterable]`."""

    elem: Expr
    var: str
    iterable: Expr
    span: Span


@record
class ErrorExpr:
    """Stands where the parser could not read an expression (a diagnostic was emitted)."""

    span: Span


Expr = (
    IntLit
    | FloatLit
    | BoolLit
    | StringLit
    | Name
    | Unknown
    | Unary
    | Binary
    | Conditional
    | Call
    | Index
    | Attr
    | ListLit
    | Range
    | ListComp
    | ErrorExpr
)


# --- types -----------------------------------------------------------------------------


@record
class ScalarType:
    name: str  # as written: trit bool int int8 int32 int64 float float16 bfloat16 float32
    span: Span


@record
class TensorType:
    """`Tensor<dtype, [dims]>`, `TernaryTensor<trit, [dims]>` and the older short forms.

    ``ternary`` is True for TernaryTensor. ``dtype`` is None when not written (bare
    `TernaryTensor`). ``dims`` is None when the rank is not given (`Tensor[float16]`,
    bare `TernaryTensor`); otherwise each dim is an expression over IntLit, Name, Unknown
    and Binary/Unary arithmetic.
    """

    ternary: bool
    dtype: str | None
    dims: tuple[Expr, ...] | None
    span: Span


@record
class ListType:
    """`[int]`: a construction-time list."""

    elem: TypeExpr
    span: Span


@record
class NamedType:
    """Any other type name (an unknown one, or a layer used as a type); checked later."""

    name: str
    span: Span


TypeExpr = ScalarType | TensorType | ListType | NamedType


# --- statements ------------------------------------------------------------------------


@record
class Let:
    name: str
    type: TypeExpr | None
    value: Expr
    span: Span
    name_span: Span


@record
class Assign:
    name: str
    value: Expr
    span: Span


@record
class Return:
    value: Expr | None
    span: Span


@record
class For:
    var: str
    iterable: Expr
    body: tuple[Stmt, ...]
    span: Span


@record
class If:
    cond: Expr
    then: tuple[Stmt, ...]
    otherwise: tuple[Stmt, ...] | None  # `else if` is an If inside otherwise
    span: Span


@record
class ExprStmt:
    value: Expr
    span: Span


Stmt = Let | Assign | Return | For | If | ExprStmt


# --- items -----------------------------------------------------------------------------


@record
class Param:
    name: str
    type: TypeExpr | None
    default: Expr | None
    span: Span


@record
class ImportName:
    name: str
    span: Span


@record
class Import:
    """`import "path"` (names is None: every public item) or `from "path" import A, B`."""

    path: str
    names: tuple[ImportName, ...] | None
    span: Span
    path_span: Span


@record
class Const:
    """Top-level `let NAME: Type = value`."""

    name: str
    type: TypeExpr | None
    value: Expr
    span: Span
    name_span: Span


@record
class Fn:
    name: str
    params: tuple[Param, ...]
    ret: TypeExpr | None
    body: tuple[Stmt, ...]
    span: Span
    name_span: Span


@record
class Layer:
    """A layer, in one of two forms.

    Functional (``body`` is set, ``members``/``methods`` empty): every parameter is explicit,
    TernaryTensor parameters are weights, ``ret`` is the output type.
    Stateful (``body`` is None): parameters are construction-time values, ``members`` are the
    `let` sub-layers and weights, ``methods`` holds `fn forward` (and any helper fns).
    """

    name: str
    params: tuple[Param, ...]
    ret: TypeExpr | None
    body: tuple[Stmt, ...] | None
    members: tuple[Let, ...]
    methods: tuple[Fn, ...]
    span: Span
    name_span: Span


@record
class ErrorItem:
    """Top-level tokens that start no item; the parser reported them."""

    span: Span


Item = Import | Const | Fn | Layer | ErrorItem
