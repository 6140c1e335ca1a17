"""Running units: in this process, or on a pool of forked workers.

(The pool comes next; for now every unit runs in this process.)
"""
from __future__ import annotations

from tribuild.build.units import Outcome, Unit, run_serial


def run_units(db, units: list[Unit], jobs: int, show) -> dict[str, Outcome]:
    return run_serial(db, units, show)
