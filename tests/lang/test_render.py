"""Exact renderings of diagnostics (text and JSON) and the locating of token spans."""

import re

import pytest

from tribuild.diagnostics import Diagnostic, Label, Loc
from tribuild.diagnostics_render import TextSources, render_text, to_json
from tribuild.lang.syntax.locate import SourceMap, line_col

MAIN = (
    "import \"blocks.tri\"\n\nlet x = foo(1,\n            2)  # call\nfn f() {\n    return x\n}\n"
)
BLOCKS = "layer Block(c: int) {\n    let a = c\n}\n"
SOURCES = TextSources({"main.tri": MAIN, "blocks.tri": BLOCKS})


def diag(primary, secondary=(), help=None, notes=(), message="something is wrong"):
    return Diagnostic("E9999", message, primary, tuple(secondary), help, tuple(notes))


CASES = [
    (
        "single span",
        diag(Label(Loc("main.tri", "x", (3, 4)), "this call")),
        "main.tri:3:9: error[E9999]: something is wrong\n"
        "  |\n"
        "3 | let x = foo(1,\n"
        "  |         ^^^ this call\n",
    ),
    (
        "multi-line span with help",
        diag(Label(Loc("main.tri", "x", (3, 9)), "the whole call"), help="try less"),
        "main.tri:3:9: error[E9999]: something is wrong\n"
        "  |\n"
        "3 | let x = foo(1,\n"
        "  |         ^^^^^^\n"
        "4 |             2)  # call\n"
        "  |             ^^ the whole call\n"
        "  = help: try less\n",
    ),
    (
        "secondary in another file, notes",
        diag(
            Label(Loc("main.tri", "f", (5, 7)), "used here"),
            [Label(Loc("blocks.tri", "Block", (1, 2)), "defined here")],
            notes=("in ResNet.layer1[0] (BasicBlock cin=64)", "second note"),
        ),
        "main.tri:6:5: error[E9999]: something is wrong\n"
        "  |\n"
        "6 |     return x\n"
        "  |     ^^^^^^^^ used here\n"
        " --> blocks.tri:1:7\n"
        "  |\n"
        "1 | layer Block(c: int) {\n"
        "  |       ----- defined here\n"
        "  = note: in ResNet.layer1[0] (BasicBlock cin=64)\n"
        "  = note: second note\n",
    ),
    (
        "secondary on the same line, file-level loc",
        diag(Label(Loc("main.tri", None, (7, 8)), "here"), [Label(Loc("main.tri", None, (6, 7)))]),
        "main.tri:3:12: error[E9999]: something is wrong\n"
        "  |\n"
        "3 | let x = foo(1,\n"
        "  |            ^ here\n"
        "  |         ---\n",
    ),
    (
        "empty span after the last token",
        diag(Label(Loc("main.tri", "f", (7, 7)), "expected `}`")),
        "main.tri:6:13: error[E9999]: something is wrong\n"
        "  |\n"
        "6 |     return x\n"
        "  |             ^ expected `}`\n",
    ),
]


@pytest.mark.parametrize("name,diagnostic,expected", CASES, ids=[c[0] for c in CASES])
def test_render_text(name, diagnostic, expected):
    assert render_text(diagnostic, SOURCES) == expected


def test_render_color_wraps_in_ansi_and_keeps_the_text():
    d = CASES[0][1]
    colored = render_text(d, SOURCES, color=True)
    assert "\x1b[" in colored
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == render_text(d, SOURCES)


def test_to_json():
    d = CASES[2][1]
    assert to_json(d, SOURCES) == {
        "code": "E9999",
        "severity": "error",
        "message": "something is wrong",
        "path": "main.tri",
        "line": 6,
        "col": 5,
        "end_line": 6,
        "end_col": 13,
        "label": "used here",
        "secondary": [
            {
                "path": "blocks.tri",
                "line": 1,
                "col": 7,
                "end_line": 1,
                "end_col": 12,
                "label": "defined here",
            }
        ],
        "help": None,
        "notes": ["in ResNet.layer1[0] (BasicBlock cin=64)", "second note"],
    }


@pytest.mark.parametrize(
    "text,offset,expected",
    [
        ("", 0, (1, 1)),
        ("ab\ncd", 0, (1, 1)),
        ("ab\ncd", 2, (1, 3)),
        ("ab\ncd", 3, (2, 1)),
        ("ab\ncd", 5, (2, 3)),
        ("ab\ncd", 99, (2, 3)),
    ],
)
def test_line_col(text, offset, expected):
    assert line_col(text, offset) == expected


@pytest.mark.parametrize(
    "loc,expected",
    [
        (Loc("main.tri", "x", (1, 2)), "x"),
        (Loc("main.tri", "x", (3, 9)), "foo(1,\n            2)"),
        (Loc("main.tri", None, (0, 2)), 'import "blocks.tri"'),
        (Loc("main.tri", "nope", (0, 1)), ""),
        (Loc("main.tri", "f", (0, 0)), ""),
    ],
)
def test_char_range(loc, expected):
    start, end = SourceMap(MAIN).char_range(loc)
    assert MAIN[start:end] == expected
