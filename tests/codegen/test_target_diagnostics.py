"""A target built directly (``target_build``, as the Python API and tests do) reports what
`tribuild build` reports for it: the file diagnostics of its import closure, not only its
instances' (tests/codegen/target_diagnostics/<case>/: ``model.tri`` with a layer ``Net``, the
files it imports, and ``expected``, one ``CODE path`` line per diagnostic, in order).
Before, a file error the instances never see (too deep nesting read as an error expression,
an unknown name in a fn the target does not call, a missing import) came back as a
confusing E0601 or as no error at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.queries.codegen import target_build
from tribuild.queries.report import file_diagnostics
from tribuild.queries.targets import import_closure, target_report

CASES = sorted(p for p in (Path(__file__).parent / "target_diagnostics").iterdir() if p.is_dir())


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_a_target_reports_the_errors_of_its_files(case: Path):
    db = Database()
    load_sources(db, str(case), scan(str(case), (".",)))
    built = target_build(db, "net", "model.tri", "Net", (), None, "2")
    expected = (case / "expected").read_text().splitlines()
    assert [f"{d.code} {d.primary.loc.path}" for d in built.diagnostics] == expected
    assert built.files == () and built.problem is None


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_the_target_report_holds_every_readable_file_report(case: Path):
    db = Database()
    load_sources(db, str(case), scan(str(case), (".",)))
    report = target_report(db, "model.tri", "Net", (), None)
    for path in import_closure(db, "model.tri"):
        if (case / path).is_file():
            assert set(file_diagnostics(db, path)) <= set(report.diagnostics), path
    assert len(set(report.diagnostics)) == len(report.diagnostics)
