"""Helpers shared by the query-layer tests: a copy of the zoo, and full checks over it."""

from __future__ import annotations

import shutil
from pathlib import Path

from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.queries.report import file_diagnostics
from tribuild.queries.targets import target_report

REPO = Path(__file__).resolve().parents[2]


def copy_zoo(dest: Path) -> Path:
    for name in ("models", "Tribuild.toml"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
        else:
            shutil.copy(src, dest / name)
    return dest


def check_all(db: Database, root: Path, targets=()) -> dict:
    """Every file's diagnostics, and every target's report, keyed for comparison."""
    closure = load_sources(db, str(root), scan(str(root), ("models",)))
    out: dict = {p: file_diagnostics(db, p) for p in closure}
    for t in targets:
        out[t.name] = target_report(db, t.entry_path, t.entry_layer, t.args, t.input)
    return out
