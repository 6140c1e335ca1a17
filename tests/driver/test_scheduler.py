"""The worker pool: units run in this process and in forked workers, each reused for unit
after unit; the workers' results are merged so reading them in this process executes
nothing; a failing or dying unit is reported and skips only its dependents, and what its
worker was handed besides is built elsewhere; outcomes are those of an in-process run."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from tribuild.driver.pool import scheduler
from tribuild.driver.pool.scheduler import run_units
from tribuild.driver.pool.units import Unit, run_serial
from tribuild.driver.progress import Quiet
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


def test_this_process_and_a_worker_run_every_unit_and_the_results_are_merged():
    """With two jobs one worker is forked; it is handed the first units in order (its queue,
    never all that are left), this process builds the next meanwhile, and the rest go where
    there is room."""
    db = _db()
    outcomes, stats, line = run_units(db, _squares(), 2, Quiet())
    assert {n: o.value for n, o in outcomes.items()} == {n: i * i for i, n in enumerate(NAMES)}
    found = re.fullmatch(
        r"workers: 1 at most at once beside this process, for 2 jobs "
        r"\(--jobs\); 1 forked; (\d) of 6 units built in this process",
        line,
    )
    here = int(found[1])
    assert 1 <= here <= 3
    assert sum(s["square"].executed for s in stats) == len(NAMES) - here
    assert db.stats()["square"].executed == here
    with db.log() as log:
        assert total(db, NAMES[:3]) == 5
    assert log.executed == [("total", (NAMES[:3],))]  # built here or merged: not re-run


@pytest.mark.parametrize("first", ["boom", "dies"])
def test_failures_are_reported_and_the_other_units_still_run(first):
    """The failing unit comes first, so a worker gets it (with two more units queued behind
    it, which are built elsewhere once it failed); a unit that kills its process is run
    only there, since it would kill the build in this one."""
    failing = (
        Unit("boom", boom, (), cost=100.0)
        if first == "boom"
        else Unit("dies", dies, (), cost=100.0)
    )
    units = _squares() + [
        failing,
        Unit("after", total, (NAMES,)),
        Unit("sum", total, (NAMES[:2],)),
    ]
    outcomes, _, _ = run_units(_db(), units, 2, Quiet())
    if first == "boom":
        assert "ValueError: a bug in a query" in outcomes["boom"].error
    else:
        assert outcomes["dies"].error == (
            "the worker building dies died (exit status 3) before reporting"
        )
    expected = run_serial(_db(), [u for u in units if u.name != first], Quiet())
    assert {n: o.value for n, o in outcomes.items() if n != first} == {
        n: o.value for n, o in expected.items()
    }


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


def test_the_emit_jobs_run_where_their_units_ran_and_their_strings_come_back(tmp_path):
    """The worker builds f, e and d (its first queue) and this process c: the jobs of e and
    c (even squares) run in one process each."""
    units = _squares() + [Unit("boom", boom, ())]
    outcomes, _, _ = run_units(_db(), units, 2, Quiet(), _EmitTo(tmp_path))
    even = {n: str(i * i) for i, n in enumerate(NAMES) if i % 2 == 0}
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == even
    emitted = {n: o.emitted for n, o in outcomes.items() if o.emitted}
    assert emitted.keys() == even.keys()
    assert all(name == n for n, (name, _) in emitted.items())
    assert emitted["c"][1] == str(os.getpid()) != emitted["e"][1]


class _EmitAtTheEnd(_EmitTo):
    """Declines to run until told to wait (as when another worker is writing)."""

    def run(self, jobs, wait):
        return super().run(jobs, wait) if wait else None


def test_emit_jobs_declined_are_kept_and_run_when_the_worker_ends(tmp_path):
    outcomes, _, _ = run_units(_db(), _squares(), 2, Quiet(), _EmitAtTheEnd(tmp_path))
    even = {n: str(i * i) for i, n in enumerate(NAMES) if i % 2 == 0}
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == even
    assert {n for n, o in outcomes.items() if o.emitted} == even.keys()


def test_a_build_without_workers_runs_no_emit_step(tmp_path):
    outcomes, _, _ = run_units(_db(), _squares(), 1, Quiet(), _EmitTo(tmp_path))
    assert not list(tmp_path.iterdir()) and not any(o.emitted for o in outcomes.values())


def test_a_run_with_workers_starts_the_next_saves_table_in_a_helper(tmp_path):
    """``save_next``: a slot the workers gave back runs the helper; the save takes its table
    (``Database.save_apart``) and the store holds every unit's key."""
    db = _db()
    run_units(db, _squares(), 2, Quiet(), save_next=True)
    assert db.helper is not None
    db.save(tmp_path, "salt")
    assert db.helper is None
    loaded = Database.load(tmp_path, "salt")
    for i, name in enumerate(NAMES):
        loaded.set(number, name, i)
    with loaded.log() as log:
        assert total(loaded, NAMES) == sum(i * i for i in range(len(NAMES)))
    assert log.executed == [("total", (NAMES,))]
    serial = _db()
    run_units(serial, _squares(), 1, Quiet(), save_next=True)
    assert serial.helper is None  # no workers: no helper either


def test_a_helper_that_cannot_be_forked_leaves_the_table_to_the_save(tmp_path, monkeypatch):
    def no_fork(self, on_end):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(Database, "save_apart", no_fork)
    db = _db()
    outcomes, _, _ = run_units(db, _squares(), 2, Quiet(), save_next=True)
    assert {n: o.value for n, o in outcomes.items()} == {n: i * i for i, n in enumerate(NAMES)}
    assert db.helper is None
    db.save(tmp_path, "salt")
    assert Database.load(tmp_path, "salt").store_report.status == "loaded"


@derived
def slow(db):
    time.sleep(0.5)  # what the other processes do meanwhile is what a test checks
    return 1


@derived
def late_boom(db):
    time.sleep(0.1)
    raise ValueError("a late bug")


def _within(seconds: int, call):
    """``call()``, failed if it takes longer than ``seconds`` (a hang)."""

    def hung(*_):
        raise TimeoutError("run_units hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        return call()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_run_whose_only_worker_failed_ends():
    """The worker fails ``boom`` and exits while this process builds ``slow``; then the run
    builds what is left and ends (it once waited for a frame from no worker, for ever)."""
    units = [
        Unit("boom", boom, (), cost=100.0),
        Unit("slow", slow, (), cost=50.0),
        Unit("after", square, ("a",)),
    ]
    outcomes, _, _ = _within(20, lambda: run_units(_db(), units, 2, Quiet()))
    assert "ValueError" in outcomes["boom"].error
    assert outcomes["slow"].value == 1 and outcomes["after"].value == square(_db(), "a")


def test_a_unit_handed_to_a_worker_that_just_failed_is_built_elsewhere(monkeypatch):
    """The worker fails and exits before this process hands it its next units (slowed down
    here): the write to its pipe finds no reader, and those units are built anyway."""
    send = scheduler._Pool._send

    def slow_send(self, worker, unit):
        time.sleep(0.3)
        send(self, worker, unit)

    monkeypatch.setattr(scheduler._Pool, "_send", slow_send)
    units = [Unit("boom", late_boom, (), cost=100.0)] + _squares()
    outcomes, _, _ = _within(60, lambda: run_units(_db(), units, 2, Quiet()))
    assert "ValueError: a late bug" in outcomes["boom"].error
    assert {n: outcomes[n].value for n in NAMES} == {n: i * i for i, n in enumerate(NAMES)}


MARKS: list = []  # the folder the queries below leave their marks in (set by a test)


def _marks(prefix: str) -> int:
    return sum(1 for p in MARKS[0].iterdir() if p.name.startswith(prefix))


def _await(predicate, seconds: float = 5.0) -> bool:
    """Whether ``predicate()`` came true within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@derived
def big(db, name):
    """Marks that it ran; a 2 MiB value, so that one frame fills the results pipe."""
    (MARKS[0] / f"big.{name}.{os.getpid()}").touch()
    return name * (2 << 20)


class _WaitForWorker:
    """An emit step whose batch, run in this process, waits until the worker has built three
    units, and returns how many it saw."""

    batch = 1

    def __init__(self):
        self.pid = os.getpid()

    def prepare(self, db, unit, value):
        return unit.name

    def run(self, jobs, wait):
        if os.getpid() != self.pid:
            return [() for _ in jobs]
        _await(lambda: _marks("big.") - len(jobs) >= 3)
        return [(str(_marks("big.") - len(jobs)),) for _ in jobs]


def test_a_worker_builds_on_while_its_frames_wait_in_a_full_pipe(tmp_path):
    """While this process is busy (here: in its emit step) the worker's frames are not read;
    the worker goes on with the units it was handed instead of waiting in a write."""
    MARKS[:] = [tmp_path]
    units = [Unit(f"u{i}", big, (f"u{i}",), cost=float(10 - i)) for i in range(6)]
    outcomes, _, _ = _within(60, lambda: run_units(_db(), units, 2, Quiet(), _WaitForWorker()))
    seen = [int(o.emitted[0]) for o in outcomes.values() if o.emitted]
    assert seen and seen[0] >= 3
    assert {n: len(o.value) for n, o in outcomes.items()} == {u.name: 2 << 21 for u in units}


@derived
def waits_for_this_process(db):
    """Whether this process's emit step ran while this unit was being built (in a worker)."""
    return _await(lambda: _marks("emitted") > 0)


class _MarkEmitted:
    """An emit step with a batch never reached: its jobs run only when the process has
    nothing else to do."""

    batch = 100

    def prepare(self, db, unit, value):
        return unit.name

    def run(self, jobs, wait):
        (MARKS[0] / f"emitted.{os.getpid()}").touch()
        return [() for _ in jobs]


def test_this_process_writes_while_it_waits_for_the_workers(tmp_path):
    """Its queued emit jobs run as soon as it has nothing to build, not after the workers
    end: the worker's unit sees them done."""
    MARKS[:] = [tmp_path]
    units = [Unit("waits", waits_for_this_process, (), cost=100.0), Unit("a", square, ("a",))]
    outcomes, _, _ = _within(60, lambda: run_units(_db(), units, 2, Quiet(), _MarkEmitted()))
    assert outcomes["waits"].value is True
    assert outcomes["a"].value == 0


@derived
def dies_in_a_worker(db):
    """Kills a worker; raises in the test's own process (where dying would end the tests)."""
    if os.getpid() != MARKS[1]:
        os._exit(3)
    raise ValueError("built in this process")


def test_a_unit_whose_report_died_with_its_worker_is_built_again(tmp_path):
    """The worker builds ``big`` (its frame, larger than the pipe, waits in its sender: this
    process is busy building ``here``) and dies in ``dies``: the death is put on ``dies``, and
    ``big``, whose report was lost, is built elsewhere."""
    MARKS[:] = [tmp_path, os.getpid()]
    units = [
        Unit("big", big, ("v",), cost=100.0),
        Unit("dies", dies_in_a_worker, (), cost=90.0),
        Unit("here", slow, (), cost=3.0),
        Unit("a", square, ("a",), cost=2.0),
        Unit("b", square, ("b",), cost=1.0),
    ]
    outcomes, _, _ = _within(60, lambda: run_units(_db(), units, 2, Quiet()))
    assert outcomes["dies"].error == (
        "the worker building dies died (exit status 3) before reporting"
    )
    assert outcomes["big"].value == "v" * (2 << 20)
    assert _marks("big.v.") == 2  # built by the worker, then again
    assert {n: outcomes[n].value for n in ("here", "a", "b")} == {"here": 1, "a": 0, "b": 1}
