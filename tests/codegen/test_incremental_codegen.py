"""Incremental codegen as data (tests/codegen/incremental/*.test, the format of
tests/queries/incremental_case.py): each case's project has ``model.tri`` with a layer ``Net``
(default arguments), built as target ``net`` at -O2. After each edit, the exact set of
queries that re-ran, and files byte-identical to a clean build's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.queries.incremental_case import run_case
from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.queries.codegen import target_build

CASES = sorted((Path(__file__).parent / "incremental").glob("*.test"))


def _build(db: Database, root: Path):
    load_sources(db, str(root), scan(str(root), (".",)))
    built = target_build(db, "net", "model.tri", "Net", (), None, "2")
    assert built.files
    return built


@pytest.mark.parametrize("case_path", CASES, ids=[p.stem for p in CASES])
def test_incremental_codegen(case_path: Path, tmp_path: Path):
    run_case(case_path, tmp_path, _build)
