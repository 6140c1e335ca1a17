"""Statements and ``{ }`` bodies.

Terms:
- *body*: ``{`` entries separated by statement breaks ``}``; ``entries`` reads one with a
  given function and recovers at the next boundary when it fails.
- *statement*: ``let name[: T] = e``, ``name = e``, ``return [e]``, ``for x in e { }``,
  ``if c { } [else if ... | else { }]`` or an expression.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.diagnostics import register
from tribuild.lang.syntax import ast
from tribuild.lang.syntax.cursor import ParserState
from tribuild.lang.syntax.expressions import expr
from tribuild.lang.syntax.types import type_expr

E_ASSIGN_TARGET = register("E0108", "invalid assignment target")

_VALUE_END = frozenset(("newline", ";", "}", "eof"))


def entries(p: ParserState, read: Callable[[ParserState], None]) -> None:
    """Read a ``{ }`` body, calling ``read`` at the start of each entry; reports a missing brace."""
    open_pos = p.pos
    if not p.expect("{"):
        return
    p.panic = False  # a body is a fresh start
    while True:
        p.skip_breaks()
        if p.accept("}"):
            return
        if p.at("eof"):
            p.expect_close("}", open_pos)
            return
        read(p)
        p.end_statement()


def block(p: ParserState) -> tuple[ast.Stmt, ...]:
    """A ``{ }`` block of statements."""
    stmts = p.nested(_statements)
    if stmts is None:  # too deep: skip the whole block
        p.sync()
        return ()
    return stmts


def _statements(p: ParserState) -> tuple[ast.Stmt, ...]:
    stmts: list[ast.Stmt] = []
    entries(p, lambda q: stmts.append(statement(q)))
    return tuple(stmts)


def statement(p: ParserState) -> ast.Stmt:
    kind, start = p.kinds[p.pos], p.pos
    if kind == "let":
        return let(p) or ast.ExprStmt(ast.ErrorExpr((start, p.pos)), (start, p.pos))
    if kind == "return":
        p.pos += 1
        value = None if p.kinds[p.pos] in _VALUE_END else _value(p)
        return ast.Return(value, (start, p.pos))
    if kind == "for":
        p.pos += 1
        var = p.expect_name()
        if var is None or not p.expect("in"):
            return ast.ExprStmt(ast.ErrorExpr((start, p.pos)), (start, p.pos))
        iterable = expr(p)
        return ast.For(var, iterable, block(p), (start, p.pos))
    if kind == "if":
        return _if(p)
    return _expr_or_assign(p)


def let(p: ParserState) -> ast.Let | None:
    """``let name[: T] = value`` (at ``let``); None (reported) when the name is missing."""
    start = p.pos
    p.pos += 1
    name = p.expect_name()
    if name is None:
        return None
    name_span = (p.pos - 1, p.pos)
    annotation = type_expr(p) if p.accept(":") else None
    value = _value(p) if p.expect("=") else ast.ErrorExpr(p.here())
    return ast.Let(name, annotation, value, (start, p.pos), name_span)


def _value(p: ParserState) -> ast.Expr:
    """The value a statement binds or returns; an ErrorExpr when reading it hit a syntax
    error, so the checker does not report the half-read value again (no cascades)."""
    value = expr(p)
    return ast.ErrorExpr(value.span) if p.panic else value


def _if(p: ParserState) -> ast.If:
    start = p.pos
    p.pos += 1
    cond = expr(p)
    then = block(p)
    otherwise: tuple[ast.Stmt, ...] | None = None
    if p.accept("else"):
        if p.at("if"):
            nested = p.nested(_if)
            otherwise = () if nested is None else (nested,)
        else:
            otherwise = block(p)
    return ast.If(cond, then, otherwise, (start, p.pos))


def _expr_or_assign(p: ParserState) -> ast.Stmt:
    start = p.pos
    target = expr(p)
    if not p.at("="):
        return ast.ExprStmt(target, (start, p.pos))
    if not isinstance(target, ast.Name):
        p.report(
            E_ASSIGN_TARGET,
            "invalid assignment target: only a name can be assigned to",
            target.span,
            label="not a name",
            hard=False,
            help="bind a new name with `let`",
        )
    p.pos += 1
    value = _value(p)
    if isinstance(target, ast.Name):
        return ast.Assign(target.id, value, (start, p.pos))
    return ast.ExprStmt(value, (start, p.pos))
