"""The `.tri` parser: one item's (kind, text) tokens -> its tree and its diagnostics.

Items: ``import "p"``, ``from "p" import A, B``, ``let NAME[: T] = value``,
``fn name(params) [-> T] { statements }``, a functional ``layer Name(params) -> T { statements }``
and a stateful ``layer Name(params) { let members; fn methods }``. A *param* is
``name[: T][= default]``. Spans are token indices relative to the item's first token
(see ``tribuild.lang.syntax.ast``). The entry points never raise: they return a tree, with
ErrorExpr/ErrorItem where nothing could be read, and every diagnostic of the item.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.diagnostics import Diagnostic, register
from tribuild.lang.syntax import ast
from tribuild.lang.syntax.cursor import E_UNEXPECTED, ParserState, describe
from tribuild.lang.syntax.expressions import expr, unescape
from tribuild.lang.syntax.statements import block, entries, let, statement
from tribuild.lang.syntax.tokens import BREAKS
from tribuild.lang.syntax.types import type_expr

E_EXPECTED_ITEM = register("E0104", "expected an item")
E_LAYER_STATEMENT = register("E0109", "statement in a stateful layer body")

Toks = tuple[tuple[str, str], ...]


def parse_item(toks: Toks, path: str, item_id: str) -> tuple[ast.Item, tuple[Diagnostic, ...]]:
    """Parse one item (the tokens ``split_items`` gave it)."""
    return _run(toks, path, item_id, _item)


def parse_expr(toks: Toks, path: str, item_id: str) -> tuple[ast.Expr, tuple[Diagnostic, ...]]:
    """Parse ``toks`` as one expression."""
    return _run(toks, path, item_id, expr)


def parse_type(toks: Toks, path: str, item_id: str) -> tuple[ast.TypeExpr, tuple[Diagnostic, ...]]:
    """Parse ``toks`` as one type."""
    return _run(toks, path, item_id, type_expr)


def _run(toks: Toks, path: str, item_id: str, parse: Callable[[ParserState], object]):
    p = ParserState(toks, path, item_id)
    p.report_lexer_errors()
    result = parse(p)
    p.skip_breaks()
    if not p.at("eof"):
        p.unexpected("end of item")
    diags = sorted(p.diags, key=lambda d: d.primary.loc.span)
    return result, tuple(diags)


def _item(p: ParserState) -> ast.Item:
    read = _fn if _python_def(p) else _ITEMS.get(p.kinds[0], _error_item)
    node = read(p)
    if node is None or isinstance(node, ast.ErrorItem):  # reported; the rest is unreadable
        p.pos = p.n
        return ast.ErrorItem((0, p.n))
    return node


def _const(p: ParserState) -> ast.Const | None:
    node = let(p)
    if node is None:
        return None
    return ast.Const(node.name, node.type, node.value, node.span, node.name_span)


def _python_def(p: ParserState) -> bool:
    """At `def NAME`, Python's keyword for `fn`: report that alone (the one root cause, not the
    errors that reading on would give) and let the caller read the rest as an `fn`."""
    if not (
        p.kinds[p.pos] == "ident" and p.texts[p.pos] == "def" and p.kinds[p.pos + 1] == "ident"
    ):
        return False
    p.report(
        E_UNEXPECTED,
        "use `fn` to define a function: `def` is Python's keyword",
        (p.pos, p.pos + 1),
        label="write `fn` here",
        help=f"`fn {p.texts[p.pos + 1]}(x: Tensor<...>) -> Tensor<...> {{ ... }}`",
        hard=False,
    )
    return True


def _error_item(p: ParserState) -> ast.ErrorItem:
    line_end = next((i for i, k in enumerate(p.kinds) if k in BREAKS or k == "eof"))
    if p.kinds[0] != "error":
        found = describe(p.kinds[0], p.texts[0])
        p.report(
            E_EXPECTED_ITEM,
            f"expected an item, found {found}",
            (0, max(line_end, 1)),
            label="expected `import`, `from`, `let`, `fn` or `layer`",
            help="a file holds imports, `let` constants, `fn`s and `layer`s; "
            "statements belong inside a body",
        )
    return ast.ErrorItem((0, p.n))


def _import(p: ParserState) -> ast.Import | None:
    from_form = p.kinds[0] == "from"
    p.pos = 1
    if not p.at("string"):
        p.unexpected("an import path string")
        return None
    path = unescape(p.texts[1])
    p.pos = 2
    names = None
    if from_form:
        listed: list[ast.ImportName] = []
        if p.expect("import"):
            while True:
                start = p.pos
                name = p.expect_name()
                if name is None:
                    break
                listed.append(ast.ImportName(name, (start, p.pos)))
                if not p.accept(","):
                    break
        names = tuple(listed)
    return ast.Import(path, names, (0, p.pos), (1, 2))


def _header(p: ParserState) -> tuple[str, tuple[int, int], tuple[ast.Param, ...]] | None:
    """``fn``/``layer`` name and parameters; None (reported) when the name is missing."""
    p.pos += 1
    name = p.expect_name()
    if name is None:
        return None
    name_span = (p.pos - 1, p.pos)
    params = _params(p)
    if p.panic:  # a broken parameter list: resume at the body
        p.skip_to("{")
    return name, name_span, params


def _params(p: ParserState) -> tuple[ast.Param, ...]:
    open_pos = p.pos
    params: list[ast.Param] = []
    if not p.expect("("):
        return ()
    while not p.at(")"):
        start = p.pos
        name = p.expect_name()
        if name is None:
            break
        annotation = type_expr(p) if p.accept(":") else None
        default = expr(p) if p.accept("=") else None
        params.append(ast.Param(name, annotation, default, (start, p.pos)))
        if not p.accept(","):
            break
    p.expect_close(")", open_pos)
    return tuple(params)


def _fn(p: ParserState) -> ast.Fn | None:
    start = p.pos
    header = _header(p)
    if header is None:
        p.sync()
        return None
    name, name_span, params = header
    ret = type_expr(p) if p.accept("->") else None
    body = block(p)
    return ast.Fn(name, params, ret, body, (start, p.pos), name_span)


def _layer(p: ParserState) -> ast.Layer | None:
    header = _header(p)
    if header is None:
        return None
    name, name_span, params = header
    if p.accept("->"):
        ret = type_expr(p)
        return ast.Layer(name, params, ret, block(p), (), (), (0, p.pos), name_span)
    members: list[ast.Let] = []
    methods: list[ast.Fn] = []
    entries(p, lambda q: _member(q, members, methods))
    return ast.Layer(
        name, params, None, None, tuple(members), tuple(methods), (0, p.pos), name_span
    )


def _member(p: ParserState, members: list[ast.Let], methods: list[ast.Fn]) -> None:
    kind, start = p.kinds[p.pos], p.pos
    if kind == "let":
        node = let(p)
        if node is not None:
            members.append(node)
    elif kind == "fn" or _python_def(p):
        method = _fn(p)
        if method is not None:
            methods.append(method)
    else:
        statement(p)
        p.report(
            E_LAYER_STATEMENT,
            "expected a `let` member or an `fn` in a layer body, "
            f"found {describe(kind, p.texts[start])}",
            (start, max(p.pos, start + 1)),
            label="not a member",
            hard=False,
            help="statements inside a layer body must be `let` members or `fn`; "
            "put computation in `fn forward`",
        )


_ITEMS = {"import": _import, "from": _import, "let": _const, "fn": _fn, "layer": _layer}
