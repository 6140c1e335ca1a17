"""Running units on this process and a pool of forked worker processes (``--jobs N``).

Terms (docs/internals.md tells the whole protocol):
- *this process*: the build's own process builds units too, between reading what the
  workers send; its results need no export and no merge.
- *worker*: a child forked from this process, with the database as it was then. It runs the
  units it is handed one after another and sends back, per unit, one *frame*: the exported
  records of what it computed (``db.export``) or the traceback of the exception it raised.
- *queue*: a worker is handed up to ``_AHEAD`` units at a time, never more than this process
  has left to build, so that the two finish together.
- *emit*: optional work done with the value of each unit, where it ran (the driver writes
  the unit's outputs): ``emit.prepare`` gives a job, ``emit.run`` runs a batch of jobs
  between units.
- *merge*: this process installs a frame with ``db.merge``. Equal keys give equal records,
  so outputs are byte-identical whatever ``--jobs`` is.

A failing unit is reported through its outcome and the other units still run; a worker's
death is put on the unit it was building, and the units it still held are built elsewhere.
Without ``os.fork`` (or with one job, or one unit) every unit runs in this process
(``units.run_serial``).
"""

from __future__ import annotations

import gc
import os

from tribuild.base.gcpause import unit_by_unit
from tribuild.base.record import replace
from tribuild.driver.pool import jobserver
from tribuild.driver.pool.units import Outcome, Unit, order, run_one, run_serial
from tribuild.driver.pool.worker import INDEX, LENGTH, Jobs, Marker, decode_frame, serve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from tribuild.driver.early import EarlyWriter
    from tribuild.driver.progress import Quiet
    from tribuild.engine import Database, QueryStats

_AHEAD = 5  # units a worker is handed at most at a time (see *queue*): this process
# writing a batch of outputs on disk (0.14-0.25 s) takes as long as a
# worker's 2 to 4 units of the 50-file benchmark project
_PIPE = 1 << 20  # bytes a results pipe is widened to (Linux lets any process ask for 1 MiB)


def run_units(
    db: Database,
    units: list[Unit],
    jobs: int,
    show: Quiet,
    emit: EarlyWriter | None = None,
    save_next: bool = False,
) -> tuple[dict[str, Outcome], list[dict[str, QueryStats]], str]:
    """Every unit's outcome, the query counters of the workers (empty without workers), and
    a line saying how many processes ran at most and who granted them. ``emit``: see
    above. ``save_next``: the caller saves ``db`` next; after a run with workers, a slot they
    gave back then runs the helper that makes the save's argument table
    (``Database.save_apart``) and is given back once the helper has ended."""
    if jobs <= 1 or len(units) < 2 or not hasattr(os, "fork"):
        return run_serial(db, units, show), [], "workers: none (in-process)"
    slots = jobserver.slots(jobs)
    gc.freeze()  # workers' collections then skip (and do not copy) the inherited heap
    helped = False
    try:
        with unit_by_unit() as settle:
            pool = _Pool(db, units, slots, show, emit, settle)
            outcomes, stats = pool.run()
        if save_next and slots.acquire():
            try:
                db.save_apart(slots.close)
                helped = True
            except OSError:  # no process to fork: the save makes its table itself
                pass
    finally:
        if not helped:
            slots.close()
    source = "make's jobserver" if isinstance(slots, jobserver.MakeSlots) else "--jobs"
    return (
        outcomes,
        stats,
        (
            f"workers: {pool.most} at most at once beside this process, "
            f"for {jobs} jobs ({source}); {pool.forked} forked; "
            f"{pool.here} of {len(units)} units built in this process"
        ),
    )


class _Worker:
    """This process's view of one worker."""

    __slots__ = ("pid", "commands", "results", "marker", "units", "head", "frame", "got")

    def __init__(self, pid: int, commands: int, results: int, marker: Marker) -> None:
        self.pid, self.commands, self.results = pid, commands, results
        self.marker = marker  # ``worker.Marker``
        self.units: list[Unit] = []  # handed over, not reported yet, in order
        self.head = b""  # the length prefix of the next frame, so far
        self.frame: bytearray | None = None  # the frame being read, sized by its prefix
        self.got = 0  # bytes of it read so far


class _Pool:
    """``settle`` is called after each unit built or merged here (``gcpause.unit_by_unit``)."""

    def __init__(
        self,
        db: Database,
        units: list[Unit],
        slots: jobserver.Slots,
        show: Quiet,
        emit: EarlyWriter | None,
        settle: Callable[[], None],
    ) -> None:
        self.db, self.units, self.slots, self.show, self.emit = db, units, slots, show, emit
        self.settle = settle
        self.index = {u.name: i for i, u in enumerate(units)}
        self.pending = order(units)
        self.outcomes: dict[str, Outcome] = {}
        self.stats: list[dict[str, QueryStats]] = []
        self.workers: dict[int, _Worker] = {}  # results pipe fd -> worker
        import selectors  # only a parallel build needs it (~1.5 ms to import)

        self.selector, self.selector_read = selectors.DefaultSelector(), selectors.EVENT_READ
        self.most = self.forked = self.here = 0
        self.collecting = gc.isenabled()  # workers collect garbage as this process did
        self.jobs = Jobs(emit)  # the emit jobs of units built here

    def run(self) -> tuple[dict[str, Outcome], list[dict[str, QueryStats]]]:
        while self.pending or self.workers:
            unit = self._start_ready()
            # once the workers have units to build; all that is queued when this process
            # has nothing to build, or builds its last unit (the workers are still busy)
            self.jobs.due(idle=unit is None or self._only(unit))
            self._emitted(self.jobs.take())
            if unit is None:
                self._take_frames(None)
            else:
                self._build_here(unit)
                self._take_frames(0)
        self._emitted(self.jobs.finish())
        return self.outcomes, self.stats

    def _start_ready(self) -> Unit | None:
        """Hand pending units to workers as they have room (forking as slots allow) and
        retire the workers left with nothing, and every worker once nothing is left to hand
        out (it writes its last outputs while this process builds its last unit, instead of
        after); the first pending unit no worker took, for this process."""
        here = None
        for unit in list(self.pending):
            worker = self._worker_for(unit)
            if worker is None:
                here = unit
                break
            self.pending.remove(unit)
            self._send(worker, unit)
        last = self._only(here)  # nothing more to hand out
        for worker in self.workers.values():
            if (last or not worker.units) and worker.commands >= 0:
                self._retire(worker)
        return here

    def _only(self, unit: Unit | None) -> bool:
        """Whether ``unit`` is all that is pending (None: nothing is)."""
        return all(u is unit for u in self.pending)

    def _worker_for(self, unit: Unit) -> _Worker | None:
        """A worker with room in its queue, else a new one as slots allow; None: this
        process builds the unit."""
        room = min(_AHEAD, len(self.pending) - 1)  # never more than is left for here
        if room <= 0:
            return None
        open_ = [w for w in self.workers.values() if w.commands >= 0 and len(w.units) < room]
        if open_:
            return open_[0]
        return self._fork() if self.slots.acquire() else None

    def _fork(self) -> _Worker:
        command_read, command_write = os.pipe()
        result_read, result_write = os.pipe()
        _widen(result_write)
        marker = Marker()
        pid = os.fork()
        if pid == 0:  # the worker
            try:  # never back into this process's code (a Ctrl-C before ``serve``)
                if self.collecting:
                    gc.enable()
                os.close(command_write)
                os.close(result_read)
                for worker in self.workers.values():  # siblings' pipes are not its own
                    for fd in (worker.commands, worker.results):
                        if fd >= 0:
                            os.close(fd)
                serve(self.db, self.units, self.emit, command_read, result_write, marker)
            finally:
                os._exit(0)
        os.close(command_read)
        os.close(result_write)
        worker = _Worker(pid, command_write, result_read, marker)
        self.workers[result_read] = worker
        self.selector.register(result_read, self.selector_read)
        self.forked += 1
        self.most = max(self.most, sum(w.commands >= 0 for w in self.workers.values()))
        return worker

    def _send(self, worker: _Worker, unit: Unit) -> None:
        """Hand ``unit`` to ``worker``. One that failed and exited since its pipe was last
        read has no reader left: it is retired, and the unit, in its queue, is handed back
        when its last frames or its end are read (``_finish``, ``_reap``)."""
        worker.units.append(unit)
        self.show.started(unit.name)
        try:
            os.write(worker.commands, self.index[unit.name].to_bytes(INDEX, "little"))
        except BrokenPipeError:
            self._retire(worker)

    def _retire(self, worker: _Worker) -> None:
        """Tell a worker to exit once it has built what it was handed (it is reaped when
        its results pipe closes)."""
        if worker.commands >= 0:
            os.close(worker.commands)
            worker.commands = -1

    def _build_here(self, unit: Unit) -> None:
        self.pending.remove(unit)
        self.show.started(unit.name)
        outcome = run_one(self.db, unit)
        if outcome.error is None:
            self.db.encode(unit.keys(self.db))
            if self.emit is not None:
                self.jobs.add(unit.name, self.emit.prepare(self.db, unit, outcome.value))
        self.settle()
        self.here += 1
        self._done(unit, outcome)

    def _take_frames(self, timeout: float | None) -> None:
        """Read what the workers sent: everything there is now, after waiting for the first
        of it when ``timeout`` is None."""
        while events := self.selector.select(timeout):
            for key, _ in events:
                self._read(self.workers[key.fd])
            timeout = 0

    def _read(self, worker: _Worker) -> None:
        """Read what the worker sent: a frame's length prefix, then the frame itself straight
        into a buffer of its size (a frame carries a unit's encoded values: copying each
        one three times cost this process 0.05 s of a 50-file build)."""
        if worker.frame is None:
            data = os.read(worker.results, LENGTH - len(worker.head))
            if not data:
                self._reap(worker)
                return
            worker.head += data
            if len(worker.head) == LENGTH:
                worker.frame = bytearray(int.from_bytes(worker.head, "little"))
                worker.head, worker.got = b"", 0
            return
        got = os.readv(worker.results, [memoryview(worker.frame)[worker.got :]])
        if not got:
            self._reap(worker)
            return
        worker.got += got
        if worker.got == len(worker.frame):
            frame, worker.frame = worker.frame, None
            self._finish(worker, frame)

    def _finish(self, worker: _Worker, frame: bytearray) -> None:
        kind, body, header = decode_frame(frame)
        if kind != "emitted":
            unit = worker.units.pop(0)
            self.stats.append(header["stats"])
            if kind == "error":
                assert isinstance(body, str)  # decode_frame: an error's body is its traceback
                outcome = Outcome(error=body, seconds=header["seconds"])
                self._retire(worker)  # it exits after a failure
                self._hand_back(worker)
            else:
                assert isinstance(body, memoryview)
                self._merge(body)
                got = run_one(self.db, unit)  # installed by the merge: a lookup
                outcome = Outcome(got.value, got.error, seconds=header["seconds"])
            self._done(unit, outcome)
        self._emitted(header["emitted"])

    def _merge(self, payload: memoryview) -> None:
        """Merge with collections off (a merge makes many objects and no cycles), then
        settle what it made."""
        gc.disable()
        try:
            self.db.merge(payload)
        finally:
            self.settle()
            if self.collecting:
                gc.enable()

    def _hand_back(self, worker: _Worker) -> None:
        """Put the units a worker was handed and will not build back in front of the
        pending ones."""
        self.pending[:0], worker.units = worker.units, []

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
        self.slots.release()
        if worker.units:
            unit = self._blamed(worker)
            worker.units.remove(unit)
            self._done(
                unit,
                Outcome(
                    error=f"the worker building {unit.name} died "
                    f"({_describe(status)}) before reporting"
                ),
            )
            self._hand_back(worker)

    def _blamed(self, worker: _Worker) -> Unit:
        """The unit a dead worker's death is put on: the one it was building (the ones it
        built whose frames died in its sender are built elsewhere); when it died between
        units, the one after the last it built, or that one if it was its last."""
        index, running = worker.marker.get()
        handed = [self.index[u.name] for u in worker.units]
        if index not in handed:
            return worker.units[0]
        at = handed.index(index)
        return worker.units[at if running or at + 1 == len(handed) else at + 1]

    def _done(self, unit: Unit, outcome: Outcome) -> None:
        self.outcomes[unit.name] = outcome
        self.show.finished(unit.name, outcome.error is None)


def _widen(fd: int) -> None:
    """Let the pipe of ``fd`` hold ``_PIPE`` bytes (the default is 64 KiB), where the system
    allows it: a worker then goes on to its next unit while this process builds one of its
    own, instead of waiting for it to read a frame (most hold 0.5-1 MiB of values)."""
    import fcntl

    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE)
    except (AttributeError, OSError):
        pass


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
