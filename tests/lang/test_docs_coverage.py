"""docs/language.md lists every built-in, and the docs every diagnostic code: a built-in or
a code added without its documentation fails here."""

from __future__ import annotations

import re
from pathlib import Path

import tribuild.ir.lower  # noqa: F401 - registers E0601
import tribuild.queries  # noqa: F401 - registers every code of the checker and the driver
from tribuild.diagnostics import CODES
from tribuild.lang.builtins.table import BUILTIN_NAMES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_language_reference_names_every_builtin():
    text = (DOCS / "language.md").read_text()
    missing = [n for n in sorted(BUILTIN_NAMES) if not re.search(rf"`[^`]*\b{n}\b[^`]*`", text)]
    assert missing == []


def test_docs_explain_every_diagnostic_code():
    text = "".join(p.read_text() for p in DOCS.glob("*.md"))
    assert [c for c in sorted(CODES) if c not in text] == []
