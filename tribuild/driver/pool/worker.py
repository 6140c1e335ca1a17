"""What runs in a forked worker of a parallel build (``scheduler``), and what it sends back.

Terms:
- *frame*: one message of a worker: its 8-byte length, a JSON header line (kind, query
  counters for ``--timing``, the unit's seconds, what the emit jobs returned by unit name),
  then the raw payload: ``db.export`` of a unit's keys (kind ``ok``), the traceback of the
  exception a unit raised (``error``), or nothing (``emitted``: the emit jobs' last
  strings, before the worker exits). No pickle: nothing a worker sends is executed when
  read.
- *sender*: the worker's thread that writes its frames to the results pipe, in order
  (``Sender``), so the worker builds on while the pipe is full.
- *marker*: 8 bytes of memory a worker shares with the build's process, saying which unit
  it is at (``Marker``): the frames still queued in its sender die with the worker, and
  this says which unit it died in.
- *emit jobs*: a process's emit jobs (``scheduler``'s *emit*), run once a batch is queued
  (``Jobs``).
"""

from __future__ import annotations

import json
import os

from tribuild.base.files import write_all
from tribuild.base.gcpause import unit_by_unit
from tribuild.driver.pool.units import Unit, run_one

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.driver.early import EarlyWriter
    from tribuild.engine import Database, QueryStats

LENGTH = 8  # bytes of a frame's length prefix
INDEX = 4  # bytes of a unit index sent to a worker


def serve(
    db: Database,
    units: list[Unit],
    emit: EarlyWriter | None,
    commands: int,
    results: int,
    marker: Marker,
) -> None:
    """In a worker: run the units named on ``commands`` until it closes or one fails,
    sending a frame for each and keeping ``marker`` up to date (the caller exits, without
    cleanup handlers)."""
    jobs = Jobs(emit)
    try:
        sender = Sender(results)
        with unit_by_unit() as settle:
            while len(data := os.read(commands, INDEX)) == INDEX:
                index = int.from_bytes(data, "little")
                unit = units[index]
                before = db.stats()
                marker.set(index, running=True)
                outcome = run_one(db, unit)
                marker.set(index, running=False)
                if outcome.error is not None:
                    sender.send(
                        _encode_frame(
                            "error",
                            [outcome.error.encode()],
                            _delta(db.stats(), before),
                            outcome.seconds,
                        )
                    )
                    break
                job = emit.prepare(db, unit, outcome.value) if emit else None
                sender.send(
                    _encode_frame(
                        "ok",
                        db.export(unit.keys(db)),
                        _delta(db.stats(), before),
                        outcome.seconds,
                        jobs.take(),
                    )
                )
                jobs.add(unit.name, job)
                jobs.due()  # while the build's process merges the frame
                settle()
        sender.send(_encode_frame("emitted", [], {}, 0.0, jobs.finish()))
        sender.close()
    except (KeyboardInterrupt, BrokenPipeError):
        pass  # interrupted, or this process is gone: the build reports, not the worker
    except BaseException:
        import traceback

        traceback.print_exc()


class Marker:
    """The *marker* (see above); the build's process reads it when the worker has died
    (``scheduler._Pool._blamed``)."""

    def __init__(self) -> None:
        import mmap

        self._memory = mmap.mmap(-1, 8)  # anonymous and shared with the forked worker

    def set(self, index: int, running: bool) -> None:
        self._memory[:8] = ((index + 1) * 2 + running).to_bytes(8, "little")

    def get(self) -> tuple[int, bool]:
        """The index of the last unit started (-1: none) and whether it was still running."""
        state = int.from_bytes(self._memory[:8], "little")
        return state // 2 - 1, bool(state % 2)


class Sender:
    """The *sender*: a worker's frames, written to the results pipe in order by a thread of
    their own, so that the worker goes on to its next unit while the pipe is full (the
    build's process busy writing outputs, say) instead of waiting in the write. The thread
    makes one system call per frame (a blocking write returns when the pipe has taken it
    all), so it rarely needs the interpreter lock. A send after the pipe broke raises
    ``BrokenPipeError``."""

    def __init__(self, fd: int):
        import queue
        import threading

        self._queue: queue.SimpleQueue[list[bytes] | None] = queue.SimpleQueue()
        self._broken = False
        self._thread = threading.Thread(target=self._work, args=(fd,), name="frames", daemon=True)
        self._thread.start()

    def send(self, parts: list[bytes]) -> None:
        if self._broken:
            raise BrokenPipeError
        self._queue.put(parts)

    def close(self) -> None:
        """Wait until every frame is written."""
        self._queue.put(None)
        self._thread.join()
        if self._broken:
            raise BrokenPipeError

    def _work(self, fd: int) -> None:
        while (parts := self._queue.get()) is not None:
            try:
                _send_frame(fd, parts)
            except OSError:  # this process is gone: the worker stops at its next send
                self._broken = True
                return


class Jobs:
    """A process's emit jobs, run by ``emit.run`` once ``emit.batch`` are queued, without
    waiting for another process's writes (they are tried again after the next unit)."""

    def __init__(self, emit: EarlyWriter | None) -> None:
        self._emit = emit
        self._queue: list[tuple[str, dict[str, bytes]]] = []
        self._done: dict[str, list[str]] = {}

    def add(self, name: str, job: dict[str, bytes] | None) -> None:
        if job is not None:
            self._queue.append((name, job))

    def due(self, idle: bool = False) -> None:
        """Run the queued jobs if there are ``emit.batch`` of them, or any when ``idle`` (the
        process has nothing else to do but wait)."""
        emit = self._emit  # there are jobs only where there is an emit step
        if self._queue and emit is not None and (idle or len(self._queue) >= emit.batch):
            self._run(wait=False)

    def _run(self, wait: bool) -> None:
        if not self._queue or self._emit is None:
            return
        results = self._emit.run([job for _, job in self._queue], wait)
        if results is not None:
            self._done.update(
                (name, list(strings))
                for (name, _), strings in zip(self._queue, results, strict=True)
            )
            self._queue = []

    def take(self) -> dict[str, list[str]]:
        """What the jobs run since the last call returned, by unit name."""
        done, self._done = self._done, {}
        return done

    def finish(self) -> dict[str, list[str]]:
        """Run the jobs still queued (waiting for the other processes' writes); what those
        not taken yet returned."""
        self._run(wait=True)
        return self.take()


def _send_frame(fd: int, parts: list[bytes]) -> None:
    """Send one frame: its length, then ``parts`` back to back (not joined first)."""
    write_all(fd, [sum(map(len, parts)).to_bytes(LENGTH, "little"), *parts])


def _encode_frame(
    kind: str,
    body: list[bytes],
    stats: dict[str, QueryStats],
    seconds: float,
    emitted: dict[str, list[str]] | None = None,
) -> list[bytes]:
    """A worker's message: a JSON header line (kind, query counters, the unit's seconds,
    what emit jobs returned by unit name), then the parts of ``body``."""
    header = {
        "kind": kind,
        "emitted": emitted or {},
        "seconds": seconds,
        "stats": {name: [s.executed, s.validated, s.hits, s.seconds] for name, s in stats.items()},
    }
    return [json.dumps(header).encode() + b"\n", *body]


def decode_frame(frame: bytearray) -> tuple[str, memoryview | str, dict[str, Any]]:
    """The kind, the body (the traceback's text for an error) and the header, its query
    counters as ``QueryStats``."""
    from tribuild.engine import QueryStats

    end = frame.index(b"\n")
    header = json.loads(frame[:end])
    body = memoryview(frame)[end + 1 :]
    header["stats"] = {name: QueryStats(*values) for name, values in header["stats"].items()}
    return header["kind"], str(body, "utf-8") if header["kind"] == "error" else body, header


def _delta(after: dict[str, QueryStats], before: dict[str, QueryStats]) -> dict[str, QueryStats]:
    """Query counters of ``after`` minus those the worker had in ``before``."""
    from tribuild.engine import QueryStats

    out = {}
    for name, s in after.items():
        b = before.get(name, QueryStats())
        out[name] = QueryStats(
            s.executed - b.executed,
            s.validated - b.validated,
            s.hits - b.hits,
            s.seconds - b.seconds,
        )
    return out
