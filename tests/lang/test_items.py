"""Tests of the item splitter: ids, kinds, bounds, hashes and their insensitivity to layout."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.lang.syntax.items import (
    chunked_items,
    item_tokens,
    lex_chunk,
    split_chunks,
    split_items,
)
from tribuild.lang.syntax.lexer import lex

SOURCE = '''# header
import "a.tri"
from "b.tri" import X, Y
let EPS: float32 = 1e-5
fn f(x: int) -> int {
    return x + 1
}
layer L(c: int) {
    let a = f(c)
    fn forward(x: T) -> T { return x }
}
'''

# The same program with different spacing, line breaks and comments.
RESPACED = '''import   "a.tri"   # one
/* two */ from "b.tri" import X,
    Y


let EPS : float32=1e-5
fn f(x: int)
    -> int
{
    return x +
        1   /* three */
}
layer L( c : int ) {

    let a = f(c)   # four
    fn forward(x: T) -> T {
        return x }
}'''


def _entries(src):
    return [(e.id, e.kind, e.name) for e in split_items(lex(src))]


def test_ids_kinds_names():
    assert _entries(SOURCE) == [
        ('import "a.tri"', "import", None),
        ('from "b.tri"', "import", None),
        ("EPS", "const", "EPS"),
        ("f", "fn", "f"),
        ("L", "layer", "L"),
    ]


def test_layout_and_comments_keep_hashes_and_tokens():
    toks_a, toks_b = lex(SOURCE), lex(RESPACED)
    items_a, items_b = split_items(toks_a), split_items(toks_b)
    assert [e.hash for e in items_a] == [e.hash for e in items_b]
    assert [item_tokens(toks_a, e) for e in items_a] == [item_tokens(toks_b, e) for e in items_b]


def test_body_edit_changes_only_that_hash():
    before = split_items(lex(SOURCE))
    after = split_items(lex(SOURCE.replace("x + 1", "x + 2")))
    changed = [a.id for a, b in zip(before, after, strict=True) if a.hash != b.hash]
    assert changed == ["f"]


@pytest.mark.parametrize(
    "source,expected",
    [
        (
            "fn a() {}\nfn a() {}\nlet a = 1",
            [("a", "fn", "a"), ("a#2", "fn", "a"), ("a#3", "const", "a")],
        ),
        (
            'import "p"\nimport "p"',
            [('import "p"', "import", None), ('import "p"#2', "import", None)],
        ),
        (
            "junk 1\nmore\nlet x = 1\n}\n",
            [("<error>", "error", None), ("x", "const", "x"), ("<error>#2", "error", None)],
        ),
        (
            "let = 1\nfn ()\nlayer",
            [("<const>", "const", None), ("<fn>", "fn", None), ("<layer>", "layer", None)],
        ),
        ("import\nfrom 3", [("import <error>", "import", None), ("from <error>", "import", None)]),
        ("let a = 1; let b = 2", [("a", "const", "a"), ("b", "const", "b")]),
        ("layer A {\n  let x = 1\nlayer B {}", [("A", "layer", "A"), ("B", "layer", "B")]),
        ("layer A {\n  let x = 1\n  fn f() {}\n}", [("A", "layer", "A")]),
        ("", []),
    ],
)
def test_splitting(source, expected):
    assert _entries(source) == expected


def test_bounds_exclude_breaks_and_cover_every_other_token():
    toks = lex("x y\n\nlet a = 1;\nfn f() {\n}\n\n")
    items = split_items(toks)
    covered = [i for e in items for i in range(e.start, e.end)]
    rest = [toks[i].kind for i in range(len(toks)) if i not in covered]
    assert set(rest) <= {"newline", ";"}
    assert all(toks[e.end - 1].kind not in ("newline", ";") for e in items)


# -- chunks: lexing a file piecewise gives the file's tokens and items -------------------------

FRAGMENTS = (
    "layer ",
    "fn ",
    "let ",
    "import ",
    "from ",
    "  layer ",
    "x ",
    "=",
    "+",
    ",",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ";",
    "/*",
    "*/",
    "# ",
    '"s"',
    '"',
    "1",
    "else ",
    "\n",
    "\n",
    " ",
    "\nlayer ",
    "\nlet ",
    "\nfn ",
    "\nimport ",
    "\nfrom ",
)
ZOO = sorted((Path(__file__).resolve().parents[2] / "models").rglob("*.tri"))


def _chunked(text: str):
    """The places of ``text``'s items lexed chunk by chunk, or None when a chunk ends unclean."""
    lexes = [lex_chunk(c) for c in split_chunks(text)]
    if not all(c.clean for c in lexes[:-1]):
        return None
    return lexes, chunked_items(lexes)


def _assert_same_as_whole(text: str) -> None:
    assert "".join(split_chunks(text)) == text
    chunked = _chunked(text)
    if chunked is None:
        return
    lexes, places = chunked
    tokens = lex(text)
    assert [(k, t) for c in lexes for k, t in c.pairs] == [(t.kind, t.text) for t in tokens]
    assert [p.entry for p in places] == list(split_items(tokens))
    for p in places:
        pairs = lexes[p.chunk].pairs[p.entry.start - p.base : p.entry.end - p.base]
        assert pairs == item_tokens(tokens, p.entry)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join))
def test_chunks_lex_like_the_whole_file(text):
    _assert_same_as_whole(text)


@pytest.mark.parametrize(
    "text",
    [
        "layer A {\n  let x = 1\nlayer B {}",  # a brace left open: unclean, lexed whole
        "let a = 1 +\nlet b = 2",  # a joiner before the cut
        "/* a\nlet b = 1 */\nlet c = 2",  # a cut inside a block comment
        "let a = f(1,\nlet b = 2\n)",  # a bracket left open
        "# header\nlet a = 1\n\nfn f() {\n}\nlayer L {\n}\n",
    ],
)
def test_chunks_at_awkward_cuts(text):
    _assert_same_as_whole(text)


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.name)
def test_zoo_files_lex_chunk_by_chunk(path):
    text = path.read_text()
    assert _chunked(text) is not None
    _assert_same_as_whole(text)
