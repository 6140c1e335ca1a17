"""Taking samples: wall and CPU time of an action in this process or of a fresh process.

Terms:
- *sample*: one timed run, ``Sample(wall, cpu)`` in seconds. In this process the CPU time is
  ``time.process_time`` (this process only); for a fresh process it is the user + system
  time that ``os.wait4`` reports for the child and the workers it waited for.
- *summary*: the statistics of a list of samples, computed by pytest-benchmark's ``Stats``
  (median, quartiles, min, max, outliers, rounds) for each clock: ``{"wall": {...}, "cpu":
  {...}}``. Figures quoted in the report are medians.
- *round-robin*: the runs being compared take turns within each repeat (A B C A B C ...), so
  a change in the shared machine's speed touches them alike.
- *peak RSS*: ``VmHWM`` of a fresh process, read from /proc by the process itself as it
  exits (``TRIBUILD`` wraps the CLI to do so), in bytes. Not ``ru_maxrss``: Linux carries
  the parent's high-water mark across fork and exec into it, so every child of a large
  benchmark process would report the benchmark's own peak.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from pytest_benchmark.stats import Stats

STAT_FIELDS = ("median", "min", "max", "q1", "q3", "iqr", "mean", "stddev", "rounds", "outliers")


@dataclass(frozen=True, slots=True)
class Sample:
    wall: float
    cpu: float


@dataclass(frozen=True, slots=True)
class ProcessRun:
    wall: float
    cpu: float
    rss_bytes: int


def timed(action) -> tuple[Sample, object]:
    """Run ``action`` after a full collection (every run starts from the same collector
    state); its sample and its result."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    return Sample(time.perf_counter() - wall, time.process_time() - cpu), result


def stats(values: list[float]) -> dict:
    """pytest-benchmark's statistics of ``values``."""
    s = Stats()
    for v in values:
        s.update(v)
    full = s.as_dict()
    return {k: full[k] for k in STAT_FIELDS}


def summary(samples: list) -> dict:
    """``{"wall": stats, "cpu": stats}`` (and ``"rss_bytes"`` for process runs)."""
    out = {"wall": stats([s.wall for s in samples]), "cpu": stats([s.cpu for s in samples])}
    if samples and isinstance(samples[0], ProcessRun):
        out["rss_bytes"] = stats([s.rss_bytes for s in samples])
    return out


# `python -c HWM code...`: runs ``code`` with ``sys.argv[1:]`` = the rest, then writes the
# process's VmHWM line to the file named by $BENCH_HWM.
HWM = (
    "import os, sys\ntry:\n    exec(sys.argv.pop(1))\nfinally:\n    open(os.environ['BENCH_HWM'], "
    "'w')"
    ".write(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')))"
)
TRIBUILD = [sys.executable, "-c", HWM, "from tribuild.cli import main; sys.exit(main())"]


def run_process(argv: list[str], cwd) -> ProcessRun:
    """Run ``argv`` (a ``TRIBUILD``-style command: it writes its VmHWM) in ``cwd`` to
    completion; raise with its stderr if it fails."""
    with tempfile.NamedTemporaryFile("r") as hwm:
        start = time.perf_counter()
        child = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=os.environ | {"BENCH_HWM": hwm.name},
        )
        err = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        child.stderr.close()
        if child.returncode != 0:
            raise RuntimeError(
                f"{' '.join(argv)} failed in {cwd} ({child.returncode}):\n{err.decode()}"
            )
        rss = int(hwm.read().split()[1]) * 1024
    return ProcessRun(wall, usage.ru_utime + usage.ru_stime, rss)


def round_robin(repeats: int, names: list, run) -> dict[object, list]:
    """``run(name, i)`` for every name in turn, ``repeats`` times; the samples per name."""
    out: dict[object, list] = {n: [] for n in names}
    for i in range(repeats):
        for n in names:
            out[n].append(run(n, i))
    return out
