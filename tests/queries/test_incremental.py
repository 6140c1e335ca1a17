"""Runs every case of tests/fixtures/incremental (format: tests/queries/incremental_case.py):
after each edit, the exact set of queries that re-ran, and diagnostics equal to a clean
build's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.queries.incremental_case import run_case
from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.queries.report import file_diagnostics

CASES = sorted((Path(__file__).parent.parent / "fixtures" / "incremental").glob("*.test"))


def _build(db: Database, root: Path):
    closure = load_sources(db, str(root), scan(str(root), (".",)))
    return {p: file_diagnostics(db, p) for p in closure}


@pytest.mark.parametrize("case_path", CASES, ids=[p.stem for p in CASES])
def test_incremental_case(case_path: Path, tmp_path: Path):
    run_case(case_path, tmp_path, _build)
