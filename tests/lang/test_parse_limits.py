"""Limits the parser enforces so later stages can walk trees recursively and hold ints in int64."""

from __future__ import annotations

import pytest

from tribuild.lang.syntax import ast
from tribuild.lang.syntax.expressions import MAX_CHAIN
from tribuild.lang.syntax.lexer import lex
from tribuild.lang.syntax.parser import parse_item


def _parse(source: str):
    toks = tuple((t.kind, t.text) for t in lex(source))
    return parse_item(toks, "t.tri", "a")


@pytest.mark.parametrize(
    "literal, value",
    [
        ("9223372036854775807", 2**63 - 1),
        ("0x7fffffffffffffff", 2**63 - 1),
        ("0b" + "1" * 63, 2**63 - 1),
        ("0o777777777777777777777", 2**63 - 1),
        ("000000000000000000000000042", 42),
    ],
)
def test_int64_literals_are_read(literal, value):
    item, diags = _parse(f"let a = {literal}")
    assert diags == () and item.value == ast.IntLit(value, (3, 4))


@pytest.mark.parametrize("literal", ["9223372036854775808", "0x8000000000000000", "9" * 5000])
def test_literals_past_int64_are_e0105(literal):
    item, diags = _parse(f"let a = {literal}")
    assert [d.code for d in diags] == ["E0105"] and isinstance(item.value, ast.ErrorExpr)


def test_an_operator_chain_at_the_limit_is_a_tree():
    item, diags = _parse("let a = " + " + ".join(["1"] * MAX_CHAIN))
    assert diags == () and isinstance(item.value, ast.Binary)


def test_a_longer_chain_is_e0107_once():
    item, diags = _parse("let a = " + " + ".join(["1"] * (MAX_CHAIN + 50)))
    assert [d.code for d in diags] == ["E0107"] and isinstance(item.value, ast.ErrorExpr)
