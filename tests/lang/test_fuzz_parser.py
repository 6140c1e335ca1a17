"""Fuzzing the front end: lex + split + parse never raise, terminate, and locate every span.

Inputs: random token streams over the grammar's tokens, random text, and mutations (delete,
duplicate, swap, insert tokens) of the model zoo's .tri files. Deep nesting is reported
(E0107), never a RecursionError.
"""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.diagnostics_render import TextSources, render_text, to_json
from tribuild.lang.syntax.items import item_tokens
from tribuild.lang.syntax.locate import SourceMap
from tribuild.lang.syntax.parser import parse_item

ROOT = Path(__file__).resolve().parents[2]
ZOO = sorted([*ROOT.glob("models/**/*.tri"), *ROOT.glob("examples/**/*.tri")])
WORDS = (
    "import from layer fn let return if else for in true false x N Tensor TernaryTensor "
    "tensor trit float32 int 0 1 42 0x2A 3.14 .5 1e-5 \"p.tri\" + - * / // % ** @ == != "
    "< <= > >= && || ! ? : = -> , . .. ( ) [ ] { } ; \n # /* */ $ \""
).split(" ")
FAST = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW = settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def check_front_end(text: str) -> None:
    """Parse every item; every diagnostic lies in its item and renders."""
    smap = SourceMap(text)
    sources = TextSources({"f.tri": text})
    for entry in smap.items:
        toks = item_tokens(smap.tokens, entry)
        _, diags = parse_item(toks, "f.tri", entry.id)
        for d in diags:
            for label in (d.primary, *d.secondary):
                start, end = label.loc.span
                assert label.loc.item == entry.id
                assert 0 <= start <= end <= len(toks)
            data = to_json(d, sources)
            assert data["line"] >= 1 and data["col"] >= 1
            assert render_text(d, sources).startswith(f"f.tri:{data['line']}:{data['col']}: ")


token_streams = st.lists(st.sampled_from(WORDS), max_size=80).map(" ".join)
mutations = st.lists(
    st.tuples(
        st.sampled_from(("delete", "duplicate", "swap", "insert")),
        st.integers(0, 10**6),
        st.integers(1, 40),
        st.sampled_from(WORDS),
    ),
    min_size=1,
    max_size=6,
)


def mutate(text: str, edits) -> str:
    for op, at, size, word in edits:
        at %= max(len(text), 1)
        piece = text[at : at + size]
        if op == "delete":
            text = text[:at] + text[at + size :]
        elif op == "duplicate":
            text = text[:at] + piece + text[at:]
        elif op == "swap":
            other = (at * 7 + size) % max(len(text), 1)
            text = text[:at] + text[other : other + size] + text[at + size :]
        else:
            text = text[:at] + f" {word} " + text[at:]
    return text


@FAST
@given(token_streams)
def test_random_token_streams(text):
    check_front_end(text)


@FAST
@given(st.text(max_size=200))
def test_random_text(text):
    check_front_end(text)


@pytest.mark.skipif(not ZOO, reason="no zoo .tri files yet")
@FAST
@given(st.sampled_from(ZOO or [None]), mutations)
def test_mutated_zoo(path, edits):
    check_front_end(mutate(path.read_text(), edits))


@pytest.mark.slow
@pytest.mark.skipif(not ZOO, reason="no zoo .tri files yet")
@SLOW
@given(
    st.one_of(
        token_streams,
        st.text(max_size=400),
        st.tuples(st.sampled_from(ZOO or [None]), mutations).map(
            lambda pe: mutate(pe[0].read_text(), pe[1])
        ),
    )
)
def test_front_end_soak(text):
    check_front_end(text)


@pytest.mark.parametrize(
    "text",
    [
        "let x = " + "(" * 5000 + "1" + ")" * 5000,
        "let x = " + "[" * 5000,
        "let x = " + "-" * 5000 + "1",
        "let x = " + "2 ** " * 5000 + "2",
        "let x = " + "a ? " * 5000 + "b",
        "fn f() {" + " if c {" * 5000 + " }" * 5000 + "}",
        "let x: " + "[" * 5000 + "int" + "]" * 5000,
    ],
)
def test_deep_nesting_is_reported(text):
    smap = SourceMap(text)
    (entry,) = smap.items
    _, diags = parse_item(item_tokens(smap.tokens, entry), "f.tri", entry.id)
    assert "E0107" in [d.code for d in diags]


def test_zoo_parses_cleanly():
    for path in ZOO:
        smap = SourceMap(path.read_text())
        for entry in smap.items:
            _, diags = parse_item(item_tokens(smap.tokens, entry), str(path), entry.id)
            assert diags == (), (path, entry.id, diags)
