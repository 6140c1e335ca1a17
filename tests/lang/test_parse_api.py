"""The parser's entry points: parse_expr, parse_type, parse_item on odd inputs."""

import pytest

from tribuild.lang.syntax import ast
from tribuild.lang.syntax.lexer import lex
from tribuild.lang.syntax.parser import parse_expr, parse_item, parse_type


def toks(text):
    return tuple((t.kind, t.text) for t in lex(text))


@pytest.mark.parametrize(
    "text,expected",
    [
        ("a + 1", ast.Binary("+", ast.Name("a", (0, 1)), ast.IntLit(1, (2, 3)), (0, 3))),
        ("(H + 2*p - k) / s + 1", None),
        ("-1", ast.Unary("-", ast.IntLit(1, (1, 2)), (0, 2))),
        ('"a\\tb"', ast.StringLit("a\tb", (0, 1))),
        (
            "[x for i in 0..n]",
            ast.ListComp(
                ast.Name("x", (1, 2)),
                "i",
                ast.Range(ast.IntLit(0, (5, 6)), ast.Name("n", (7, 8)), (5, 8)),
                (0, 9),
            ),
        ),
    ],
)
def test_parse_expr(text, expected):
    node, diags = parse_expr(toks(text), "f.tri", "x")
    assert diags == ()
    if expected is not None:
        assert node == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("int", ast.ScalarType("int", (0, 1))),
        ("Tensor[float16]", ast.TensorType(False, "float16", None, (0, 4))),
        ("TernaryTensor", ast.TensorType(True, None, None, (0, 1))),
        (
            "tensor<float16, [4, ?]>",
            ast.TensorType(False, "float16", (ast.IntLit(4, (5, 6)), ast.Unknown((7, 8))), (0, 10)),
        ),
        ("[int]", ast.ListType(ast.ScalarType("int", (1, 2)), (0, 3))),
        ("BasicBlock", ast.NamedType("BasicBlock", (0, 1))),
    ],
)
def test_parse_type(text, expected):
    assert parse_type(toks(text), "f.tri", "x") == (expected, ())


def test_trailing_tokens_are_reported():
    node, diags = parse_expr(toks("a b"), "f.tri", "x")
    assert node == ast.Name("a", (0, 1))
    assert [(d.code, d.primary.loc.span) for d in diags] == [("E0100", (1, 2))]


def test_empty_item_is_an_error_item():
    node, diags = parse_item((), "f.tri", "<error>")
    assert node == ast.ErrorItem((0, 0)) and [d.code for d in diags] == ["E0104"]


def test_diagnostics_carry_path_and_item_and_are_sorted():
    _, diags = parse_item(toks("fn f() { let a = $; b = +; return ) }"), "m/f.tri", "f#2")
    assert {(d.primary.loc.path, d.primary.loc.item) for d in diags} == {("m/f.tri", "f#2")}
    spans = [d.primary.loc.span for d in diags]
    assert spans == sorted(spans) and len(spans) == 3
