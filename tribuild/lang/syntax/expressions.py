"""Expressions: precedence climbing over a ``ParserState``.

Precedence, low to high: ``?:`` (right associative) < ``||`` < ``&&`` < ``== !=`` <
``< <= > >=`` < ``..`` < ``+ -`` < ``* / // % @`` < unary ``- + !`` < ``**`` (right
associative) < postfix call, index and attribute. A call takes positional arguments, then
keyword arguments (``kernel=3``). A list is ``[a, b]`` or a comprehension ``[e for i in a..b]``.
"""

from __future__ import annotations

import math
import re
import sys

from tribuild.diagnostics import register
from tribuild.lang.syntax import ast
from tribuild.lang.syntax.cursor import E_TOO_DEEP, MAX_DEPTH, ParserState
from tribuild.lang.syntax.lexer import E_INVALID_NUMBER
from tribuild.project import INT64_LIMIT

E_POSITIONAL_AFTER_KEYWORD = register("E0106", "positional argument after keyword argument")

MAX_CHAIN = 100  # operators in one chain; deeper trees risk Python's recursion limit later on
_MAX_DIGITS = {2: 64, 8: 22, 10: 19, 16: 16}

_PREC = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "..": 5,
    "+": 6,
    "-": 6,
    "*": 7,
    "/": 7,
    "//": 7,
    "%": 7,
    "@": 7,
}
_UNARY = frozenset(("-", "+", "!"))
_LEAVES = frozenset(("ident", "int", "float", "true", "false", "string"))  # one-token operands
_EXTENDS = frozenset(_PREC) | {
    "?",
    "**",
    "(",
    "[",
    ".",
}  # what may follow an operand in one expression
_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def expr(p: ParserState) -> ast.Expr:
    """An expression, or ErrorExpr (reported) where none could be read. A lone name or
    literal (most arguments) is read at once: every level above ``_primary`` would return it
    unchanged."""
    pos = p.pos
    if p.kinds[pos] in _LEAVES and p.kinds[pos + 1] not in _EXTENDS and p.depth < MAX_DEPTH:
        return _primary(p)
    result = p.nested(_conditional)
    return ast.ErrorExpr(p.here()) if result is None else result


def _conditional(p: ParserState) -> ast.Expr:
    start = p.pos
    cond = _binary(p, 1)
    if not p.accept("?"):
        return cond
    then = expr(p)
    otherwise = expr(p) if p.expect(":") else ast.ErrorExpr(p.here())
    return ast.Conditional(cond, then, otherwise, (start, p.pos))


def _binary(p: ParserState, min_prec: int) -> ast.Expr:
    """Precedence climbing. A chain of operators builds a tree as deep as the chain is long,
    so chains longer than ``MAX_CHAIN`` are reported (E0107) and read on as an ErrorExpr:
    every later stage may then walk trees recursively."""
    start = p.pos
    left = _unary(p)
    ops = 0
    while True:
        op = p.kinds[p.pos]
        prec = _PREC.get(op, 0)
        if prec < min_prec:
            return left
        p.pos += 1
        right = _binary(p, prec + 1)
        ops += 1
        if ops == MAX_CHAIN:
            p.report(
                E_TOO_DEEP,
                f"expression too long: more than {MAX_CHAIN} operators in a row",
                (start, p.pos),
                help="split it into several `let` statements",
            )
        if ops >= MAX_CHAIN:
            left = ast.ErrorExpr((start, p.pos))
        elif op == "..":
            left = ast.Range(left, right, (start, p.pos))
        else:
            left = ast.Binary(op, left, right, (start, p.pos))


def _unary(p: ParserState) -> ast.Expr:
    op = p.kinds[p.pos]
    if op not in _UNARY:
        return _power(p)
    start = p.pos
    p.pos += 1
    operand = p.nested(_unary)
    if operand is None:
        return ast.ErrorExpr((start, p.pos))
    return ast.Unary(op, operand, (start, p.pos))


def _power(p: ParserState) -> ast.Expr:
    start = p.pos
    base = _postfix(p)
    if not p.accept("**"):
        return base
    exponent = p.nested(_unary) or ast.ErrorExpr(p.here())
    return ast.Binary("**", base, exponent, (start, p.pos))


def _postfix(p: ParserState) -> ast.Expr:
    start = p.pos
    value = _primary(p)
    while True:
        kind = p.kinds[p.pos]
        if kind == "(":
            args, kwargs = _arguments(p)
            value = ast.Call(value, args, kwargs, (start, p.pos))
        elif kind == "[":
            open_pos = p.pos
            p.pos += 1
            index = expr(p)
            p.expect_close("]", open_pos)
            value = ast.Index(value, index, (start, p.pos))
        elif kind == ".":
            p.pos += 1
            name = p.expect_name()
            if name is None:
                return value
            value = ast.Attr(value, name, (start, p.pos))
        else:
            return value


def _primary(p: ParserState) -> ast.Expr:
    kind, text, start = p.kinds[p.pos], p.texts[p.pos], p.pos
    span = (start, start + 1)
    if kind == "ident":
        p.pos += 1
        return ast.Name(text, span)
    if kind == "int":
        p.pos += 1
        value = _int_value(text)
        if value is None:
            p.report(
                E_INVALID_NUMBER,
                f"integer literal `{_abridged(text)}` does not fit in 64 bits",
                span,
                hard=False,
                help=f"integers range from {-INT64_LIMIT} to {INT64_LIMIT - 1}",
            )
            return ast.ErrorExpr(span)
        return ast.IntLit(value, span)
    if kind == "float":
        p.pos += 1
        number = float(text)
        if not math.isfinite(number):  # ``1e999`` rounds to infinity: refused, as TOML's inf is
            p.report(
                E_INVALID_NUMBER,
                f"float literal `{_abridged(text)}` is too large: it would be infinity",
                span,
                hard=False,
                help=f"floats range up to about {sys.float_info.max:.3g}",
            )
            return ast.ErrorExpr(span)
        return ast.FloatLit(number, span)
    if kind in ("true", "false"):
        p.pos += 1
        return ast.BoolLit(kind == "true", span)
    if kind == "string":
        p.pos += 1
        return ast.StringLit(unescape(text), span)
    if kind == "(":
        p.pos += 1
        inner = expr(p)
        p.expect_close(")", start)
        return inner
    if kind == "[":
        return _list(p)
    if kind == "error":  # reported by the lexer pass
        p.pos += 1
        return ast.ErrorExpr(span)
    return p.unexpected("an expression")


def _int_value(text: str) -> int | None:
    """The value of an int token, or None past int64 (checked before converting, so a
    literal of thousands of digits costs nothing and hits no interpreter limit)."""
    base = {"x": 16, "o": 8, "b": 2}.get(text[1:2].lower(), 10)
    digits = text[2:] if base != 10 else text
    if len(digits.lstrip("0")) > _MAX_DIGITS[base]:
        return None
    value = int(digits, base)
    return value if value < INT64_LIMIT else None


def _abridged(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:10]}...{text[-10:]}"


def unescape(text: str) -> str:
    """The value of a string token: quotes removed, ``\\n \\t \\r \\0 \\\\ \\"`` decoded."""
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m[1], m[1]), text[1:-1])


def _list(p: ParserState) -> ast.Expr:
    start = p.pos
    p.pos += 1
    if p.accept("]"):
        return ast.ListLit((), (start, p.pos))
    first = expr(p)
    if p.accept("for"):
        var = p.expect_name()
        if var is None or not p.expect("in"):
            return ast.ErrorExpr((start, p.pos))
        iterable = expr(p)
        p.expect_close("]", start)
        return ast.ListComp(first, var, iterable, (start, p.pos))
    elems = [first]
    while p.accept(",") and not p.at("]"):
        elems.append(expr(p))
    p.expect_close("]", start)
    return ast.ListLit(tuple(elems), (start, p.pos))


def _arguments(p: ParserState) -> tuple[tuple[ast.Expr, ...], tuple[ast.Keyword, ...]]:
    """``( positional..., name=value... )``; a positional after a keyword is reported."""
    open_pos = p.pos
    p.pos += 1
    args: list[ast.Expr] = []
    kwargs: list[ast.Keyword] = []
    while not p.at(")"):
        start = p.pos
        if p.kinds[start] == "ident" and p.kinds[start + 1] == "=":
            p.pos += 2
            value = expr(p)
            kwargs.append(ast.Keyword(p.texts[start], value, (start, p.pos)))
        else:
            value = expr(p)
            if kwargs:
                p.report(
                    E_POSITIONAL_AFTER_KEYWORD,
                    "positional argument after keyword argument",
                    (start, p.pos),
                    label="positional argument",
                    hard=False,
                    help="put positional arguments before keyword arguments",
                )
            else:
                args.append(value)
        if not p.accept(","):
            break
    p.expect_close(")", open_pos)
    return tuple(args), tuple(kwargs)
