"""Running units on a pool of forked worker processes (``--jobs N``).

Terms:
- *worker*: a child forked from the main process. It inherits the database as it is at that
  moment (sources set, every result merged so far) and then runs units one after another,
  as the main process hands them over: for each it sends back over a pipe, as one *frame*
  (8-byte length, a JSON header line, then the raw payload bytes; no pickle, so nothing a
  worker sends is executed when read), either ``db.export([its keys])`` (the records of what it
  computed, its values encoded once, here) or the traceback of the exception it raised,
  with its query counters for ``--timing`` and what *emit* returned. A worker keeps what
  it computed, so work that
  units share (and the caches of the front end) is done once per worker, not once per unit,
  and only a few processes are forked. A worker that raised exits; a fresh one takes the
  next unit.
- *emit*: optional work a worker does with the value of each unit that succeeded (the
  driver writes the unit's outputs), in two steps: ``emit.prepare(db, unit, value)``, right
  after the unit, gives a *job* (anything; None for nothing to do); ``emit.run(jobs)``, once
  ``emit.batch`` jobs are queued (and after the worker's last unit for the rest), takes
  them, reads nothing from the database, and returns a tuple of strings per job. It runs
  between units, not on a thread beside them: a thread making system calls while another
  runs Python waits for the interpreter lock after each call, which made writing a
  target's files cost 7-20 times the CPU it costs alone. A worker sends the strings of the
  jobs done so far with each frame, and the rest in a last frame (kind ``emitted``) before
  it exits. They come back in the unit's outcome (``Outcome.emitted``). Emit is not run for
  units run in this process.
- *holds*: the units whose results a worker has: those merged before it was forked and
  those it ran itself. A worker takes a unit only if it holds every unit that one depends
  on; otherwise it is retired and a fresh worker is forked, so no unit redoes the work of
  another.
- *merge*: the main process installs a payload with ``db.merge``; reading the unit's key
  afterwards executes nothing, and the values keep the bytes the worker encoded, which the
  store saves as they are. Payloads hold equal records for equal keys (queries are pure),
  so what the database holds after merging does not depend on which worker finished first;
  outputs are read from it in target order: byte-identical outputs whatever ``--jobs`` is.
- *ready*: a unit whose dependencies are merged. Ready units start in ``units.order``
  (critical path first; a worker that just sent its results gets the first ready one, if
  it holds its dependencies, before they are merged), on an idle worker that holds their
  dependencies or on a new one,
  as slots allow: the first worker runs in the job slot this process already has; each
  further one needs a slot from ``jobserver.slots`` (make's tokens under ``make -jN``,
  else up to ``jobs - 1``), given back when it ends. A worker with nothing to take is
  retired at once, so it holds no slot while idle.

A unit that fails is reported through its outcome; units depending on it are skipped and
every other unit still runs. Without ``os.fork`` (or with one job, or one unit) units run in
this process.
"""
from __future__ import annotations

import gc
import os
import json
import time

from tribuild.build import jobserver
from tribuild.build.units import Outcome, Unit, order, run_one, run_serial, skipped
from tribuild.files import write_all
from tribuild.gcpause import paused, unit_by_unit
from tribuild.record import replace

_LENGTH = 8     # bytes of a frame's length prefix
_INDEX = 4      # bytes of a unit index sent to a worker


def run_units(db, units: list[Unit], jobs: int, show, emit=None
              ) -> tuple[dict[str, Outcome], list[dict], str]:
    """Every unit's outcome, the query counters of the workers (empty in-process), and a
    line saying how many processes ran at most and who granted them. ``emit``: see above."""
    if jobs <= 1 or len(units) < 2 or not hasattr(os, "fork"):
        return run_serial(db, units, show), [], "workers: none (in-process)"
    slots = jobserver.slots(jobs)
    pool = _Pool(db, units, slots, show, emit)
    gc.freeze()         # workers' collections then skip (and do not copy) the inherited heap
    try:
        with paused():  # this process only merges meanwhile, which makes no cycles to collect
            outcomes, stats = pool.run()
    finally:
        slots.close()
    source = "make's jobserver" if isinstance(slots, jobserver.MakeSlots) else "--jobs"
    return outcomes, stats, (f"workers: {pool.most} at most at once, of {jobs} ({source}); "
                             f"{pool.forked} forked for {len(units)} units")


class _Worker:
    """The main process's view of one worker."""
    __slots__ = ("pid", "commands", "results", "slot", "holds", "unit", "start", "head",
                 "frame", "got")

    def __init__(self, pid: int, commands: int, results: int, slot: bool, holds: set[str]):
        self.pid, self.commands, self.results, self.slot = pid, commands, results, slot
        self.holds = holds
        self.unit: Unit | None = None        # the unit it is running (None: idle or exiting)
        self.start = 0.0
        self.head = b""                      # the length prefix of the next frame, so far
        self.frame: bytearray | None = None  # the frame being read, sized by its prefix
        self.got = 0                         # bytes of it read so far


class _Pool:
    def __init__(self, db, units: list[Unit], slots, show, emit):
        self.db, self.units, self.slots, self.show, self.emit = db, units, slots, show, emit
        self.index = {u.name: i for i, u in enumerate(units)}
        self.pending = order(units)
        self.outcomes: dict[str, Outcome] = {}
        self.stats: list[dict] = []
        self.workers: dict[int, _Worker] = {}     # results pipe fd -> worker
        import selectors    # only a parallel build needs it (~1.5 ms to import)
        self.selector, self.selector_read = selectors.DefaultSelector(), selectors.EVENT_READ
        self.most = self.forked = 0
        self.collecting = gc.isenabled()          # workers collect garbage as this process did

    def run(self) -> tuple[dict[str, Outcome], list[dict]]:
        while self.pending or self.workers:
            self._start_ready()
            for key, _ in self.selector.select():
                self._read(self.workers[key.fd])
        return self.outcomes, self.stats

    def _start_ready(self) -> None:
        for unit in list(self.pending):
            failed = skipped(unit, self.outcomes)
            if failed is not None:
                self.pending.remove(unit)
                self.outcomes[unit.name] = Outcome(skipped=failed)
            elif all(d in self.outcomes for d in unit.deps if d in self.index):
                worker = self._worker_for(unit)
                if worker is None:
                    break
                self.pending.remove(unit)
                self._send(worker, unit)
        for worker in self.workers.values():
            if worker.unit is None and worker.commands >= 0:
                self._retire(worker)

    def _hand_next(self, worker: _Worker) -> None:
        """Give ``worker``, whose results are about to be merged, the first ready unit if it
        holds that unit's dependencies: it builds while this process merges (else it waited
        for each merge, a twentieth of its time with two workers, more with more)."""
        for unit in self.pending:
            if all(d in self.outcomes for d in unit.deps if d in self.index):
                if skipped(unit, self.outcomes) is None and \
                        all(d in worker.holds for d in unit.deps if d in self.index):
                    self.pending.remove(unit)
                    self._send(worker, unit)
                return

    def _worker_for(self, unit: Unit) -> _Worker | None:
        """An idle worker holding the unit's dependencies, else a new one (None: no slot)."""
        idle = [w for w in self.workers.values() if w.unit is None and w.commands >= 0]
        for worker in idle:
            if all(d in worker.holds for d in unit.deps if d in self.index):
                return worker
        for worker in idle:
            self._retire(worker)            # it cannot take the unit: a fresh one will
        slot = any(w.commands >= 0 for w in self.workers.values())
        if slot and not self.slots.acquire():
            return None
        return self._fork(slot)

    def _fork(self, slot: bool) -> _Worker:
        command_read, command_write = os.pipe()
        result_read, result_write = os.pipe()
        pid = os.fork()
        if pid == 0:                                    # the worker
            if self.collecting:
                gc.enable()
            os.close(command_write)
            os.close(result_read)
            for worker in self.workers.values():       # siblings' pipes are not its own
                for fd in (worker.commands, worker.results):
                    if fd >= 0:
                        os.close(fd)
            _serve(self.db, self.units, self.emit, command_read, result_write)
        os.close(command_read)
        os.close(result_write)
        worker = _Worker(pid, command_write, result_read, slot, set(self.outcomes))
        self.workers[result_read] = worker
        self.selector.register(result_read, self.selector_read)
        self.forked += 1
        self.most = max(self.most, sum(w.commands >= 0 for w in self.workers.values()))
        return worker

    def _send(self, worker: _Worker, unit: Unit) -> None:
        worker.unit, worker.start = unit, time.perf_counter()
        self.show.started(unit.name)
        os.write(worker.commands, self.index[unit.name].to_bytes(_INDEX, "little"))

    def _retire(self, worker: _Worker) -> None:
        """Tell an idle worker to exit (it is reaped when its results pipe closes)."""
        os.close(worker.commands)
        worker.commands = -1

    def _read(self, worker: _Worker) -> None:
        """Read what the worker sent: a frame's length prefix, then the frame itself straight
        into a buffer of its size (a frame carries a unit's encoded values: copying each
        one three times cost this process 0.05 s of a 50-file build)."""
        if worker.frame is None:
            data = os.read(worker.results, _LENGTH - len(worker.head))
            if not data:
                self._reap(worker)
                return
            worker.head += data
            if len(worker.head) == _LENGTH:
                worker.frame = bytearray(int.from_bytes(worker.head, "little"))
                worker.head, worker.got = b"", 0
            return
        got = os.readv(worker.results, [memoryview(worker.frame)[worker.got:]])
        if not got:
            self._reap(worker)
            return
        worker.got += got
        if worker.got == len(worker.frame):
            frame, worker.frame = worker.frame, None
            self._finish(worker, frame)

    def _finish(self, worker: _Worker, frame: bytearray) -> None:
        unit, worker.unit = worker.unit, None
        kind, body, stats, emitted = _decode_frame(frame)
        if kind == "emitted":
            self._emitted(emitted)
            return
        self.stats.append(stats)
        seconds = time.perf_counter() - worker.start
        if kind == "error":
            outcome = Outcome(error=body, seconds=seconds)
            self._retire(worker)                         # it exits after a failure
        else:
            worker.holds.add(unit.name)
            self._hand_next(worker)
            self.db.merge(body)
            got = run_one(self.db, unit)                  # installed by the merge: a lookup
            outcome = Outcome(got.value, got.error, seconds=seconds)
        self._done(unit, outcome)
        self._emitted(emitted)

    def _emitted(self, emitted: dict[str, list[str]]) -> None:
        """Put what the jobs of finished units returned into their outcomes."""
        for name, strings in emitted.items():
            self.outcomes[name] = replace(self.outcomes[name], emitted=tuple(strings))

    def _reap(self, worker: _Worker) -> None:
        self.selector.unregister(worker.results)
        os.close(worker.results)
        if worker.commands >= 0:
            os.close(worker.commands)
        del self.workers[worker.results]
        _, status = os.waitpid(worker.pid, 0)
        if worker.slot:
            self.slots.release()
        if worker.unit is not None:
            self._done(worker.unit, Outcome(
                error=f"the worker building {worker.unit.name} died ({_describe(status)}) "
                      "before reporting", seconds=time.perf_counter() - worker.start))

    def _done(self, unit: Unit, outcome: Outcome) -> None:
        self.outcomes[unit.name] = outcome
        self.show.finished(unit.name, outcome.error is None)


def _serve(db, units: list[Unit], emit, commands: int, results: int) -> None:
    """In a worker: run the units named on ``commands`` until it closes or one fails,
    sending a frame for each; exit without cleanup handlers."""
    jobs = _Jobs(emit)
    try:
        with unit_by_unit() as settle:
            while len(data := os.read(commands, _INDEX)) == _INDEX:
                unit = units[int.from_bytes(data, "little")]
                before = db.stats()
                outcome = run_one(db, unit)
                if outcome.error is not None:
                    _send_frame(results, _encode_frame("error", outcome.error.encode(),
                                                       _delta(db.stats(), before)))
                    break
                job = emit.prepare(db, unit, outcome.value) if emit else None
                _send_frame(results, _encode_frame("ok", db.export(unit.keys(db)),
                                                   _delta(db.stats(), before), jobs.take()))
                jobs.put(unit.name, job)        # while this process merges the frame
                settle()
        _send_frame(results, _encode_frame("emitted", b"", {}, jobs.finish()))
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        os._exit(0)


class _Jobs:
    """A worker's emit jobs, run by ``emit.run`` once ``emit.batch`` are queued, without
    waiting for another worker's writes (they are tried again after the next unit)."""

    def __init__(self, emit):
        self._emit = emit
        self._queue: list[tuple[str, object]] = []
        self._done: dict[str, list[str]] = {}

    def put(self, name: str, job) -> None:
        if job is not None:
            self._queue.append((name, job))
        if self._queue and len(self._queue) >= self._emit.batch:
            self._run(wait=False)

    def _run(self, wait: bool) -> None:
        if not self._queue:
            return
        results = self._emit.run([job for _, job in self._queue], wait)
        if results is not None:
            self._done.update((name, list(strings))
                              for (name, _), strings in zip(self._queue, results))
            self._queue = []

    def take(self) -> dict[str, list[str]]:
        """What the jobs run since the last call returned, by unit name."""
        done, self._done = self._done, {}
        return done

    def finish(self) -> dict[str, list[str]]:
        """Run the jobs still queued (waiting for the other workers' writes); what those not
        taken yet returned."""
        self._run(wait=True)
        return self.take()


def _send_frame(fd: int, parts: list[bytes]) -> None:
    """Send one frame: its length, then ``parts`` back to back (not joined first)."""
    write_all(fd, [sum(map(len, parts)).to_bytes(_LENGTH, "little"), *parts])


def _encode_frame(kind: str, body: bytes, stats: dict, emitted: dict | None = None
                  ) -> list[bytes]:
    """A worker's message: a JSON header line (kind, query counters, what emit jobs
    returned by unit name), then ``body``."""
    header = {"kind": kind, "emitted": emitted or {},
              "stats": {name: [s.executed, s.validated, s.hits, s.seconds]
                        for name, s in stats.items()}}
    return [json.dumps(header).encode() + b"\n", body]


def _decode_frame(frame: bytearray) -> tuple[str, memoryview | str, dict, dict[str, list[str]]]:
    from tribuild.engine import QueryStats
    end = frame.index(b"\n")
    meta = json.loads(frame[:end])
    body = memoryview(frame)[end + 1:]
    stats = {name: QueryStats(*values) for name, values in meta["stats"].items()}
    return (meta["kind"], str(body, "utf-8") if meta["kind"] == "error" else body, stats,
            meta["emitted"])


def _delta(after: dict, before: dict) -> dict:
    """Query counters of ``after`` minus those the worker had in ``before``."""
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
