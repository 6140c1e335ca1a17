"""Golden cases for name resolution across files (tests/fixtures/names): each ``NAME.test``
holds one file (or several, as ``== file PATH`` sections) and ``NAME.expected`` the rendered
diagnostics of the whole project, sorted as ``tribuild check`` prints them.
``TRIBUILD_UPDATE_GOLDEN=1`` rewrites the expected files (review the diff)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.queries.incremental_case import parse_case
from tribuild.diagnostics import CODES
from tribuild.diagnostics_render import render_text
from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.queries.report import QuerySources, file_diagnostics

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "names"
CASES = sorted(FIXTURES.glob("*.test"))
UPDATE = os.environ.get("TRIBUILD_UPDATE_GOLDEN") == "1"


def _files(text: str) -> dict[str, str]:
    return parse_case(text).files if text.startswith("== file ") else {"main.tri": text}


def render_project(root: Path, files: dict[str, str]) -> str:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    db = Database()
    closure = load_sources(db, str(root), scan(str(root), (".",)))
    sources = QuerySources(db)
    diags = [d for p in closure if p in files for d in file_diagnostics(db, p)]
    diags.sort(key=lambda d: (d.primary.loc.path, sources.char_range(d.primary.loc)))
    return "\n".join(render_text(d, sources) for d in diags)


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_names_golden(case: Path, tmp_path: Path):
    rendered = render_project(tmp_path, _files(case.read_text()))
    expected = case.with_suffix(".expected")
    if UPDATE:
        expected.write_text(rendered)
    assert rendered == expected.read_text()
    code = case.stem.split("_")[0].upper()
    assert f"error[{code}]" in rendered, f"{case.name} must exercise {code}"


def test_every_name_code_has_a_case():
    names_codes = {c for c in CODES if c.startswith("E02")}
    covered = {c.stem.split("_")[0].upper() for c in CASES}
    assert names_codes <= covered


def test_an_unreadable_file_is_reported(tmp_path: Path):
    (tmp_path / "bad.tri").write_bytes(b"# ok\nlayer A \xff\xfe")
    (tmp_path / "dir.tri").mkdir()
    db = Database()
    closure = load_sources(db, str(tmp_path), scan(str(tmp_path), (".",)))
    messages = sorted(d.message for p in closure for d in file_diagnostics(db, p))
    assert messages == [
        "cannot read `bad.tri`: not valid UTF-8: byte 0xff at line 2, column 9 (offset 13)",
        "cannot read `dir.tri`: is a directory, not a file",
    ]
