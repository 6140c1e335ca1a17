"""Table-driven tests of the lexer: literal forms, operators, comments, newline rules, errors."""

import pytest

from tribuild.diagnostics import CODES
from tribuild.lang.syntax.lexer import describe_error, lex

NL = ("newline", "\n")
OPERATORS = "+ - * / // % ** @ == != < <= > >= && || ! ? : = -> , . .. ( ) [ ] { } ;"

CASES = [
    # literals
    (
        "42 0x2A 0b1010 0o52 007",
        [("int", "42"), ("int", "0x2A"), ("int", "0b1010"), ("int", "0o52"), ("int", "007")],
    ),
    (
        "3.14 1e-5 .5 2E+3 1.5e2 3.",
        [
            ("float", "3.14"),
            ("float", "1e-5"),
            ("float", ".5"),
            ("float", "2E+3"),
            ("float", "1.5e2"),
            ("float", "3."),
        ],
    ),
    ("0..n", [("int", "0"), ("..", ".."), ("ident", "n")]),
    ("0..5", [("int", "0"), ("..", ".."), ("int", "5")]),
    (
        "x.y 1.e",
        [("ident", "x"), (".", "."), ("ident", "y"), ("int", "1"), (".", "."), ("ident", "e")],
    ),
    ('"a/b.tri" "q\\"x\\\\"', [("string", '"a/b.tri"'), ("string", '"q\\"x\\\\"')]),
    ("_a1 Tensor trit", [("ident", "_a1"), ("ident", "Tensor"), ("ident", "trit")]),
    (
        "import from layer fn let return if else for in true false",
        [(k, k) for k in "import from layer fn let return if else for in true false".split()],
    ),
    # operators: longest match first
    (
        OPERATORS,
        [(o, o) for o in OPERATORS.split()],
    ),
    (
        "a<=b->c**d//e",
        [
            ("ident", "a"),
            ("<=", "<="),
            ("ident", "b"),
            ("->", "->"),
            ("ident", "c"),
            ("**", "**"),
            ("ident", "d"),
            ("//", "//"),
            ("ident", "e"),
        ],
    ),
    # comments
    ("a # comment ( [\nb", [("ident", "a"), NL, ("ident", "b")]),
    ("a /* x\n y */ b", [("ident", "a"), ("ident", "b")]),
    ("a /* x */ /* y */ b", [("ident", "a"), ("ident", "b")]),
    ("/* a /* b */ c", [("ident", "c")]),
    # newline rules
    ("\n\n a \n\n\n b \n\n", [("ident", "a"), NL, ("ident", "b"), NL]),
    (
        "f(a,\n b)\n[1,\n 2]",
        [
            ("ident", "f"),
            ("(", "("),
            ("ident", "a"),
            (",", ","),
            ("ident", "b"),
            (")", ")"),
            NL,
            ("[", "["),
            ("int", "1"),
            (",", ","),
            ("int", "2"),
            ("]", "]"),
        ],
    ),
    ("{\na\n}\n", [("{", "{"), ("ident", "a"), NL, ("}", "}"), NL]),
    (
        "f(\n{ a\n b })",
        [
            ("ident", "f"),
            ("(", "("),
            ("{", "{"),
            ("ident", "a"),
            NL,
            ("ident", "b"),
            ("}", "}"),
            (")", ")"),
        ],
    ),
    ("a\n? b\n: c", [("ident", "a"), ("?", "?"), ("ident", "b"), (":", ":"), ("ident", "c")]),
    ("a +\nb\n* c", [("ident", "a"), ("+", "+"), ("ident", "b"), ("*", "*"), ("ident", "c")]),
    ("x =\n y", [("ident", "x"), ("=", "="), ("ident", "y")]),
    ("}\nelse\n{", [("}", "}"), ("else", "else"), ("{", "{")]),
    ("a;\nb", [("ident", "a"), (";", ";"), ("ident", "b")]),
    ("(]\na", [("(", "("), ("]", "]"), ("ident", "a")]),
    ("(a)]\nb", [("(", "("), ("ident", "a"), (")", ")"), ("]", "]"), NL, ("ident", "b")]),
    ("{\nreturn x", [("{", "{"), ("return", "return"), ("ident", "x")]),
    ("a +\nlet b", [("ident", "a"), ("+", "+"), NL, ("let", "let"), ("ident", "b")]),
    ("else\nif c", [("else", "else"), ("if", "if"), ("ident", "c")]),
    # a statement keyword closes brackets left open, so the next line is a new statement
    (
        "f(a\nlet b\n)",
        [
            ("ident", "f"),
            ("(", "("),
            ("ident", "a"),
            NL,
            ("let", "let"),
            ("ident", "b"),
            NL,
            (")", ")"),
        ],
    ),
    (
        "{ [a\nreturn\n}",
        [("{", "{"), ("[", "["), ("ident", "a"), NL, ("return", "return"), NL, ("}", "}")],
    ),
    (
        "[x\nfor i in n]",
        [
            ("[", "["),
            ("ident", "x"),
            ("for", "for"),
            ("ident", "i"),
            ("in", "in"),
            ("ident", "n"),
            ("]", "]"),
        ],
    ),
    # errors
    ("a $ b", [("ident", "a"), ("error", "$"), ("ident", "b")]),
    ('"abc\nx', [("error", '"abc'), NL, ("ident", "x")]),
    ("a /* never\nclosed", [("ident", "a"), ("error", "/* never\nclosed")]),
    (
        "12ab 0x 0b12 1e5x",
        [("error", "12ab"), ("error", "0x"), ("error", "0b12"), ("error", "1e5x")],
    ),
    ("é", [("error", "é")]),
]


@pytest.mark.parametrize("source,expected", CASES)
def test_lex(source, expected):
    assert [(t.kind, t.text) for t in lex(source)] == expected


def test_offsets_point_at_the_token_text():
    src = "let x = 1 # c\n  /* b */ y(0..2)\n"
    for tok in lex(src):
        if tok.kind != "newline":
            assert src[tok.offset : tok.offset + len(tok.text)] == tok.text
        else:
            assert src[tok.offset] == "\n"


@pytest.mark.parametrize(
    "text,code",
    [
        ('"abc', "E0101"),
        ("/* x", "E0102"),
        ("$", "E0103"),
        ("é", "E0103"),
        ("12ab", "E0105"),
        (".5x", "E0105"),
    ],
)
def test_describe_error(text, code):
    got, message = describe_error(text)
    assert got == code and code in CODES and message


@pytest.mark.parametrize(
    "tail", ["   ", "\t", "# a comment", "/* a comment */", "  # c", "\n  ", "\n# c"]
)
def test_blanks_and_comments_at_the_end_without_a_newline(tail):
    """The lexer's skip of blanks and comments gave back its last character at the end of a
    text without a final newline: a trailing space was E0103, a comment's last letter an
    identifier. They add no token but newlines."""
    for text in ("let A: int = 1", "let A: int = 1\n"):
        assert [(t.kind, t.text) for t in lex(text + tail) if t.kind != "newline"] == [
            (t.kind, t.text) for t in lex(text) if t.kind != "newline"
        ]
