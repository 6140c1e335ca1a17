"""The worker pool: units run in forked workers, each reused for unit after unit; results
are merged so reading them in this process executes nothing; a failing or dying unit is
reported and skips only its dependents; outcomes are those of an in-process run."""
from __future__ import annotations

import os

import pytest

from tribuild.build.progress import Quiet
from tribuild.build.scheduler import run_units
from tribuild.build.units import Unit, run_serial
from tribuild.engine import Database, derived, input_query

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


@input_query
def number(db, name): ...


@derived
def square(db, name):
    return number(db, name) ** 2


@derived
def total(db, names):
    return sum(square(db, n) for n in names)


@derived
def boom(db):
    raise ValueError("a bug in a query")


@derived
def dies(db):
    os._exit(3)


NAMES = ("a", "b", "c", "d", "e", "f")


def _db() -> Database:
    db = Database()
    for i, name in enumerate(NAMES):
        db.set(number, name, i)
    return db


def _squares() -> list[Unit]:
    return [Unit(n, square, (n,), cost=float(i)) for i, n in enumerate(NAMES)]


def test_two_workers_run_every_unit_and_the_results_are_merged():
    db = _db()
    outcomes, stats, line = run_units(db, _squares(), 2, Quiet())
    assert {n: o.value for n, o in outcomes.items()} == {n: i * i for i, n in enumerate(NAMES)}
    assert line == "workers: 2 at most at once, of 2 (--jobs); 2 forked for 6 units"
    assert sum(s["square"].executed for s in stats) == len(NAMES)
    with db.log() as log:
        assert total(db, NAMES[:3]) == 5
    assert log.executed == [("total", (NAMES[:3],))]          # the squares were merged


def test_failures_are_reported_and_skip_their_dependents_only():
    units = _squares() + [Unit("boom", boom, ()), Unit("dies", dies, ()),
                          Unit("after", total, (NAMES,), deps=("boom",)),
                          Unit("sum", total, (NAMES,), deps=("a", "b"))]
    db = _db()
    outcomes, _, _ = run_units(db, units, 2, Quiet())
    assert "ValueError: a bug in a query" in outcomes["boom"].error
    assert outcomes["dies"].error == ("the worker building dies died (exit status 3) "
                                      "before reporting")
    assert outcomes["after"].skipped == "boom"
    expected = run_serial(_db(), [u for u in units if u.name not in ("dies",)], Quiet())
    assert {n: o.value for n, o in outcomes.items() if n not in ("boom", "dies")} == \
        {n: o.value for n, o in expected.items() if n != "boom"}


class _EmitTo:
    """An emit step: an even square's job is (name, square), an odd one has none; running
    a batch writes each square to ``folder`` and returns the name and the pid it ran in."""

    batch = 2

    def __init__(self, folder):
        self.folder = folder

    def prepare(self, db, unit, value):
        return None if value % 2 else (unit.name, value)

    def run(self, jobs, wait):
        for name, value in jobs:
            (self.folder / name).write_text(str(value))
        return [(name, str(os.getpid())) for name, _ in jobs]


def test_workers_run_the_emit_jobs_and_their_strings_come_back_in_the_outcomes(tmp_path):
    units = _squares() + [Unit("boom", boom, ())]
    outcomes, _, _ = run_units(_db(), units, 2, Quiet(), _EmitTo(tmp_path))
    even = {n: str(i * i) for i, n in enumerate(NAMES) if i % 2 == 0}
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == even
    emitted = {n: o.emitted for n, o in outcomes.items() if o.emitted}
    assert emitted.keys() == even.keys()
    assert all(name == n and pid != str(os.getpid()) for n, (name, pid) in emitted.items())


class _EmitAtTheEnd(_EmitTo):
    """Declines to run until told to wait (as when another worker is writing)."""

    def run(self, jobs, wait):
        return super().run(jobs, wait) if wait else None


def test_emit_jobs_declined_are_kept_and_run_when_the_worker_ends(tmp_path):
    outcomes, _, _ = run_units(_db(), _squares(), 2, Quiet(), _EmitAtTheEnd(tmp_path))
    even = {n: str(i * i) for i, n in enumerate(NAMES) if i % 2 == 0}
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == even
    assert {n for n, o in outcomes.items() if o.emitted} == even.keys()


def test_units_run_in_this_process_emit_nothing(tmp_path):
    outcomes, _, _ = run_units(_db(), _squares(), 1, Quiet(), _EmitTo(tmp_path))
    assert not list(tmp_path.iterdir()) and not any(o.emitted for o in outcomes.values())
