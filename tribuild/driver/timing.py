"""The ``--timing`` report: where a build spent its time.

Terms:
- *driver stage*: a phase of the driver itself (load cache, read sources, build units, write
  outputs, save cache), timed by wall clock.
- *query stage*: the compiler stage a query belongs to, named after the module that declares
  it (``syntax`` -> parse, ``names`` -> resolve, ``semantic``/``targets`` -> check, ...).
  Its time is the sum of its queries' own seconds (``db.stats()``), in this process and in
  the workers; its share is of the stages' total, which with workers can exceed the wall
  time (a share of the wall time went past 100% with ``--jobs 8`` on 2 CPUs).
- *hit rate* of a stage: the share of its query reads answered without running the query
  (validated or hit) among all its reads.
- *peak memory*: the peak resident set size of this process and of its largest child (a
  worker or the save's helper), each since it started: for the CLI, during the build; for a
  notebook calling ``tribuild.driver``, its peak so far. Read from the system at the end
  (``getrusage``), so it costs nothing while the build runs.
- *traced peak*: with ``trace_memory`` (``--trace-memory``) only, the peak of the Python
  allocations of this process during the build (tracemalloc, started with the build).
  Tracing hooks every allocation: the zoo's clean build took 2.1 s instead of 0.35 s, so
  the times of a traced build say little, and the stages slow down unevenly.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

from tribuild.base.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from tribuild.driver.pool.units import Outcome
    from tribuild.engine import Database, QueryStats

_STAGE_OF_MODULE = {
    "inputs": "inputs",
    "syntax": "parse",
    "names": "resolve",
    "semantic": "check",
    "targets": "check",
    "report": "check",
}


@record
class Report:
    wall: float
    driver: dict[str, float]
    stages: dict[str, tuple[float, int, int, int]]  # stage -> (seconds, executed, validated, hits)
    units: list[tuple[str, float]]  # slowest first
    peak_bytes: int | None  # resident, this process (None: the system does not say)
    child_peak_bytes: int | None  # resident, its largest child (None: none waited for)
    traced_bytes: int | None = None  # traced peak (None: not traced)
    workers: str = ""

    def text(self) -> str:
        lines = [f"total {self.wall:.3f}s"]
        for name, seconds in self.driver.items():
            lines.append(f"  {name:<16} {seconds:8.3f}s {_share(seconds, self.wall)}")
        total = sum(seconds for seconds, *_ in self.stages.values())
        lines.append(
            f"query stages (own time, {total:.3f}s in all processes; share of that; hit rate):"
        )
        for name, (seconds, executed, validated, hits) in sorted(
            self.stages.items(), key=lambda kv: -kv[1][0]
        ):
            reads = executed + validated + hits
            rate = f"{(validated + hits) / reads:6.1%}" if reads else "     -"
            lines.append(
                f"  {name:<16} {seconds:8.3f}s {_share(seconds, total)}  "
                f"hits {rate}  ({executed} run, {validated} validated, {hits} hit)"
            )
        if self.units:
            lines.append("slowest units:")
            lines += [f"  {name:<24} {seconds:8.3f}s" for name, seconds in self.units[:5]]
        if self.workers:
            lines.append(self.workers)
        if self.peak_bytes is not None:
            child = (
                ""
                if self.child_peak_bytes is None
                else f", {_mib(self.child_peak_bytes)} its largest child"
            )
            lines.append(f"peak memory {_mib(self.peak_bytes)} resident this process{child}")
        if self.traced_bytes is not None:
            lines.append(
                f"traced peak {_mib(self.traced_bytes)} of Python allocations, this "
                "process (tracing slows the build: the times above are inflated)"
            )
        return "\n".join(lines)


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _share(part: float, whole: float) -> str:
    return f"{part / whole:6.1%}" if whole > 0 else "     -"


class Clock:
    """Times the driver's stages (``stage``) of one build; with ``enabled``, gives a Report
    at the end, with ``trace_memory`` also the traced peak. Used as a context manager, it
    stops tracing when the build ends, even by an exception (a notebook goes on untraced)."""

    __slots__ = ("enabled", "tracing", "traced", "start", "driver", "extra_stats", "workers")

    def __init__(self, enabled: bool, trace_memory: bool = False) -> None:
        self.enabled = enabled
        self.tracing = enabled and trace_memory
        self.traced: int | None = None
        self.start = time.perf_counter()
        self.driver: dict[str, float] = {}
        self.extra_stats: list[dict[str, QueryStats]] = []
        self.workers = ""
        if self.tracing:
            import tracemalloc

            tracemalloc.start()

    def __enter__(self) -> "Clock":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_tracing()

    def _stop_tracing(self) -> None:
        """Keep the traced peak and stop tracing (once)."""
        if self.tracing:
            import tracemalloc

            self.traced = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            self.tracing = False

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        begin = time.perf_counter()
        try:
            yield
        finally:
            self.driver[name] = self.driver.get(name, 0.0) + time.perf_counter() - begin

    def report(self, db: Database, outcomes: dict[str, Outcome]) -> Report | None:
        if not self.enabled:
            return None
        self._stop_tracing()
        units = sorted(((name, o.seconds) for name, o in outcomes.items()), key=lambda u: -u[1])
        return Report(
            time.perf_counter() - self.start,
            self.driver,
            query_stages([db.stats()] + self.extra_stats),
            units,
            *_resident_peaks(),
            self.traced,
            self.workers,
        )


def _resident_peaks() -> tuple[int | None, int | None]:
    """The peak resident set size, in bytes, of this process and of its largest child that
    was waited for (None: no such child, or a system without ``getrusage``)."""
    try:
        import resource
    except ImportError:
        return None, None
    unit = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes there, KiB here
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * unit
    return own, child or None


def stage_of(query_name: str) -> str:
    from tribuild.engine import REGISTRY

    for ident, query in REGISTRY.items():
        if query.name == query_name:
            module = ident.rsplit(".", 2)[-2] if ident.count(".") >= 2 else ident
            return _STAGE_OF_MODULE.get(module, module)
    return query_name


def query_stages(
    snapshots: list[dict[str, QueryStats]],
) -> dict[str, tuple[float, int, int, int]]:
    """Per stage: (own seconds, executed, validated, hits), summed over ``snapshots`` of
    ``db.stats()`` (name -> QueryStats)."""
    out: dict[str, list[Any]] = {}
    for snapshot in snapshots:
        for name, s in snapshot.items():
            row = out.setdefault(stage_of(name), [0.0, 0, 0, 0])
            row[0] += s.seconds
            row[1] += s.executed
            row[2] += s.validated
            row[3] += s.hits
    return {k: tuple(v) for k, v in out.items()}
