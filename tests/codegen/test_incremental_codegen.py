"""Incremental codegen as data (tests/codegen/incremental/*.test, the format of
tests/queries/incremental_case.py): each case's project has ``model.tri`` with a layer ``Net``
(default arguments), built as target ``net`` at -O2. After each edit, the exact set of
queries that re-ran, and files byte-identical to a clean build's. ``TRIBUILD_UPDATE_GOLDEN=1``
rewrites the ``rerun`` sections from what ran (review the diff)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.queries.incremental_case import format_key, parse_case
from tests.queries.test_incremental import _rewrite, _write
from tribuild.build.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.queries.codegen import target_build

CASES = sorted((Path(__file__).parent / "incremental").glob("*.test"))
UPDATE = os.environ.get("TRIBUILD_UPDATE_GOLDEN") == "1"


def _build(db: Database, root: Path):
    load_sources(db, str(root), scan(str(root), (".",)))
    return target_build(db, "net", "model.tri", "Net", (), None, "2")


@pytest.mark.parametrize("case_path", CASES, ids=[p.stem for p in CASES])
def test_incremental_codegen(case_path: Path, tmp_path: Path):
    case = parse_case(case_path.read_text())
    _write(tmp_path, case.files)
    db = Database()
    assert _build(db, tmp_path).files
    observed: dict[int, list[str]] = {}
    for step in case.steps:
        _write(tmp_path, case.edits.get(step, {}))
        with db.log() as log:
            incremental = _build(db, tmp_path)
        observed[step] = sorted({format_key(name, args) for name, args in log.executed})
        assert incremental == _build(Database(), tmp_path), f"step {step}: differs from a clean build"
        if not UPDATE:
            assert set(observed[step]) == case.reruns.get(step, set()), f"step {step}"
    if UPDATE:
        _rewrite(case_path, observed)
