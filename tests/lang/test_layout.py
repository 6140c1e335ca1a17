"""The formatter: data-driven cases (``tests/fixtures/layout``: ``NAME.tri`` laid out must be
``NAME.expected``; an empty ``.expected`` means the formatter declines), and properties over
the zoo and examples: already laid out, idempotent, tokens and comments kept, and a file
shifted, padded and spaced out comes back as it was."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tribuild.lang.syntax.layout import format_text
from tribuild.lang.syntax.lexer import lex

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "tests" / "fixtures" / "layout"
SOURCES = sorted((REPO / "models").rglob("*.tri")) + sorted((REPO / "examples").rglob("*.tri"))
COMMENT = re.compile(r"#[^\n]*|/\*.*?\*/", re.DOTALL)


@pytest.mark.parametrize("case", sorted(CASES.glob("*.tri")), ids=lambda p: p.stem)
def test_case(case: Path):
    expected = case.with_suffix(".expected").read_text()
    laid = format_text(case.read_bytes().decode())
    assert laid == (expected or None)
    if laid is not None:
        assert format_text(laid) == laid


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_sources_are_laid_out(path: Path):
    text = path.read_text()
    assert format_text(text) == text


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_disordered_source_comes_back(path: Path):
    """Every line moved right by three spaces, with trailing blanks (blank lines too, not the
    empty last line), and two blank lines more at the start: laid out again, the file is what
    it was; tokens and comments are kept throughout."""
    text = path.read_text()
    lines = text.split("\n")
    messy = "\n\n" + "\n".join(["   " + line + "  " for line in lines[:-1]] + lines[-1:])
    assert [(t.kind, t.text) for t in lex(messy)] == [(t.kind, t.text) for t in lex(text)]
    laid = format_text(messy)
    assert laid == text
    assert [c.strip() for c in COMMENT.findall(laid)] == [c.strip() for c in COMMENT.findall(text)]
