"""Runs every case of tests/fixtures/incremental: after each edit, the exact set of queries that
re-ran, and diagnostics equal to a clean build's. ``TRIBUILD_UPDATE_GOLDEN=1`` rewrites the
``rerun`` sections from what ran (review the diff: it is the behaviour under test)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.queries.incremental_case import Case, format_key, parse_case
from tribuild.build.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.queries.report import file_diagnostics

CASES = sorted((Path(__file__).parent.parent / "fixtures" / "incremental").glob("*.test"))
UPDATE = os.environ.get("TRIBUILD_UPDATE_GOLDEN") == "1"


def _write(root: Path, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        full = root / path
        if text is None:
            full.unlink()
        else:
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text)


def _build(db: Database, root: Path):
    closure = load_sources(db, str(root), scan(str(root), (".",)))
    return {p: file_diagnostics(db, p) for p in closure}


@pytest.mark.parametrize("case_path", CASES, ids=[p.stem for p in CASES])
def test_incremental_case(case_path: Path, tmp_path: Path):
    case = parse_case(case_path.read_text())
    _write(tmp_path, case.files)
    db = Database()
    _build(db, tmp_path)
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


def _rewrite(case_path: Path, observed: dict[int, list[str]]) -> None:
    kept = []
    skipping = False
    for line in case_path.read_text().splitlines():
        if line.startswith("== "):
            skipping = line.startswith("== rerun.")
        if not skipping:
            kept.append(line)
    text = "\n".join(kept).rstrip("\n") + "\n"
    for step, keys in observed.items():
        text += f"\n== rerun.{step}\n" + "".join(k + "\n" for k in keys)
    case_path.write_text(text)
