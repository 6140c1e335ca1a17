"""A target built directly (``target_build``, as the Python API and tests do) reports what
`tribuild build` reports for it: the diagnostics of the items it reaches, not only its
instances' (tests/codegen/target_diagnostics/<case>/: ``model.tri`` with a layer ``Net``, the
files it imports, and ``expected``, one ``CODE path`` line per diagnostic, in order; empty
when the target builds). Before, a file error the instances never see (too deep nesting read
as an error expression, a missing import) came back as a confusing E0601 or as no error at
all. An error in an item the target does not reach (``unused_broken_fn``) is `check`'s to
report: the target builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.queries.codegen import target_build
from tribuild.queries.report import file_diagnostics
from tribuild.queries.targets import (
    file_item_diagnostics,
    import_closure,
    reached_items,
    target_report,
)

CASES = sorted(p for p in (Path(__file__).parent / "target_diagnostics").iterdir() if p.is_dir())


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_a_target_reports_the_errors_of_its_files(case: Path):
    db = Database()
    load_sources(db, str(case), scan(str(case), (".",)))
    built = target_build(db, "net", "model.tri", "Net", (), None, "2")
    expected = (case / "expected").read_text().splitlines()
    assert [f"{d.code} {d.primary.loc.path}" for d in built.diagnostics] == expected
    assert bool(built.files) == (expected == []) and built.problem is None


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_the_target_report_holds_the_diagnostics_of_every_item_it_reaches(case: Path):
    db = Database()
    load_sources(db, str(case), scan(str(case), (".",)))
    report = target_report(db, "model.tri", "Net", (), None)
    reached = reached_items(db, "model.tri", "Net")
    for path in import_closure(db, "model.tri"):
        if (case / path).is_file():
            mine = {
                d
                for d in file_item_diagnostics(db, path)
                if d.primary.loc.item is None or (path, d.primary.loc.item) in reached
            }
            assert mine <= set(report.diagnostics), path
    check = {  # what `check` reports beyond the target: only the unreached broken fn
        d
        for p in import_closure(db, "model.tri")
        if (case / p).is_file()
        for d in file_diagnostics(db, p)
    }
    assert (case.name == "unused_broken_fn") == bool(check - set(report.diagnostics))
    assert len(set(report.diagnostics)) == len(report.diagnostics)
