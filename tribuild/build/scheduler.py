"""Running units on a pool of forked worker processes (``--jobs N``).

Terms:
- *worker*: a child forked from the main process for one unit. It inherits the database as
  it is at that moment (sources set, every result merged so far), runs its unit, and sends
  back over a pipe either ``db.export([its key])`` (the records of what it computed) or the
  traceback of the exception it raised, with its query counters for ``--timing``.
- *merge*: the main process installs a worker's payload with ``db.merge``; reading the
  unit's key afterwards executes nothing. Payloads hold equal records for equal keys
  (queries are pure), so what the database holds after merging does not depend on which
  worker finished first; outputs are read from it in target order: byte-identical outputs
  whatever ``--jobs`` is.
- *ready*: a unit whose dependencies are merged. Ready units start in ``units.order``
  (critical path first), as slots allow: the first worker runs in the job slot this process
  already has; each further one needs a slot from ``jobserver.slots`` (make's tokens under
  ``make -jN``, else up to ``jobs - 1``), given back when it ends.

A unit that fails is reported through its outcome; units depending on it are skipped and
every other unit still runs. Without ``os.fork`` (or with one job, or one unit) units run in
this process.
"""
from __future__ import annotations

import gc
import os
import pickle
import selectors
import time
import traceback

from tribuild.build import jobserver
from tribuild.build.units import Outcome, Unit, order, run_one, run_serial, skipped


def run_units(db, units: list[Unit], jobs: int, show) -> tuple[dict[str, Outcome], list[dict], str]:
    """Every unit's outcome, the query counters of the workers (empty in-process), and a
    line saying how many processes ran at most and who granted them."""
    if jobs <= 1 or len(units) < 2 or not hasattr(os, "fork"):
        return run_serial(db, units, show), [], "workers: none (in-process)"
    slots = jobserver.slots(jobs)
    pool = _Pool(db, units, slots, show)
    gc.freeze()         # workers' collections then skip (and do not copy) the inherited heap
    try:
        outcomes, stats = pool.run()
    finally:
        gc.unfreeze()
        slots.close()
    source = "make's jobserver" if isinstance(slots, jobserver.MakeSlots) else "--jobs"
    return outcomes, stats, f"workers: {pool.most} at most at once, of {jobs} ({source})"


class _Pool:
    def __init__(self, db, units: list[Unit], slots, show):
        self.db, self.slots, self.show = db, slots, show
        self.pending = order(units)
        self.names = {u.name for u in units}
        self.outcomes: dict[str, Outcome] = {}
        self.stats: list[dict] = []
        self.running: dict[int, list] = {}     # pipe fd -> [unit, pid, start, chunks, slot]
        self.selector = selectors.DefaultSelector()
        self.most = 0

    def run(self) -> tuple[dict[str, Outcome], list[dict]]:
        while self.pending or self.running:
            self._start_ready()
            for key, _ in self.selector.select():
                self._read(key.fd)
        return self.outcomes, self.stats

    def _start_ready(self) -> None:
        for unit in list(self.pending):
            failed = skipped(unit, self.outcomes)
            if failed is not None:
                self.pending.remove(unit)
                self.outcomes[unit.name] = Outcome(skipped=failed)
            elif all(d in self.outcomes for d in unit.deps if d in self.names):
                if self.running and not self.slots.acquire():
                    return
                self.pending.remove(unit)
                self._fork(unit, slot=bool(self.running))

    def _fork(self, unit: Unit, slot: bool) -> None:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:                                    # the worker
            os.close(read_fd)
            _work(self.db, unit, write_fd)
        os.close(write_fd)
        self.show.started(unit.name)
        self.running[read_fd] = [unit, pid, time.perf_counter(), [], slot]
        self.most = max(self.most, len(self.running))
        self.selector.register(read_fd, selectors.EVENT_READ)

    def _read(self, fd: int) -> None:
        entry = self.running[fd]
        data = os.read(fd, 1 << 20)
        if data:
            entry[3].append(data)
            return
        self.selector.unregister(fd)
        os.close(fd)
        del self.running[fd]
        unit, pid, start, chunks, slot = entry
        _, status = os.waitpid(pid, 0)
        if slot:
            self.slots.release()
        outcome = self._outcome(unit, b"".join(chunks), status, time.perf_counter() - start)
        self.outcomes[unit.name] = outcome
        self.show.finished(unit.name, outcome.error is None)

    def _outcome(self, unit: Unit, data: bytes, status: int, seconds: float) -> Outcome:
        if not data:
            return Outcome(error=f"the worker building {unit.name} died "
                                 f"({_describe(status)}) before reporting", seconds=seconds)
        kind, body, stats = pickle.loads(data)
        self.stats.append(stats)
        if kind == "error":
            return Outcome(error=body, seconds=seconds)
        self.db.merge(body)
        got = run_one(self.db, unit)            # installed by the merge: a lookup
        return Outcome(got.value, got.error, seconds=seconds)


def _work(db, unit: Unit, fd: int) -> None:
    """In the worker: run ``unit``, send the outcome, exit without cleanup handlers."""
    try:
        before = db.stats()
        outcome = run_one(db, unit)
        if outcome.error is None:
            message = ("ok", db.export(unit.keys()), _delta(db.stats(), before))
        else:
            message = ("error", outcome.error, _delta(db.stats(), before))
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(0)


def _delta(after: dict, before: dict) -> dict:
    """Query counters of ``after`` minus those the worker inherited in ``before``."""
    from tribuild.engine import QueryStats
    out = {}
    for name, s in after.items():
        b = before.get(name, QueryStats())
        out[name] = QueryStats(s.executed - b.executed, s.validated - b.validated,
                               s.hits - b.hits, s.seconds - b.seconds)
    return out


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
