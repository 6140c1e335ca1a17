"""Fresh processes: `tribuild build` as a user, make or CI runs it, on a zoo copy.

Terms:
- *cold process*: ``tribuild build NAME -q -j 1`` with no cache and no outputs (both deleted
  before the run): start-up, imports, the compile, the writes and the save of the store.
- *start-up*: a process that only imports the compiler (``STARTUP``): what every cold
  process pays before compiling, in time and resident memory.
- *process scenario*: the change before a ``tribuild build NAME -q`` with a warm cache
  (``edits.SCENARIOS``; ``-O change`` passes ``-O0`` to a cache built at the project's -O2).
  After each timed run the original state is rebuilt, untimed.
- *jobs case*: a clean build (no cache, no outputs) of a set of targets with ``--jobs 1`` and
  ``--jobs 2``, the two alternating; the speedup is the ratio of their median wall times.
  A target is one unit of work, so a one-target build cannot use a second worker.
- *synthetic project*: bench_build's generated project, ``files`` files of ~400 lines, one
  target per file.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from benchmarks.report.edits import SCENARIOS, applies, with_edit
from benchmarks.report.timing import TRIBUILD, round_robin, run_process, summary
from benchmarks.report.zoo import Zoo

STARTUP = TRIBUILD[:3] + ["import tribuild.driver.build, tribuild.queries.codegen"]


def build(root: str, *args: str):
    return run_process(TRIBUILD + ["build", "-q", *args], root)


def clear(root: str) -> None:
    """Delete the cache and the outputs of the project at ``root``."""
    for folder in (".tribuild-cache", "build", "out"):
        shutil.rmtree(Path(root) / folder, ignore_errors=True)


def cold(zoo: Zoo, names: list[str], repeats: int) -> dict:
    """Per model, the summary of its cold processes (wall, CPU, peak RSS); and the start-up."""

    def one(name, _):
        if name == "start-up":
            return run_process(STARTUP, zoo.root)
        clear(zoo.root)
        return build(zoo.root, name, "-j", "1")

    runs = round_robin(repeats, ["start-up"] + names, one)
    return {name: summary(samples) for name, samples in runs.items()}


def scenarios(zoo: Zoo, name: str, repeats: int) -> dict:
    """The summary of each process scenario's timed builds of target ``name``."""
    clear(zoo.root)
    build(zoo.root, name)

    def one(scenario, _):
        if scenario == "-O change":
            run = build(zoo.root, name, "-O0")
        else:
            run = with_edit(zoo.root, scenario, name, lambda: build(zoo.root, name))
        build(zoo.root, name)
        return run

    names = [s for s in SCENARIOS if applies(name, s)]
    return {s: summary(samples) for s, samples in round_robin(repeats, names, one).items()}


def jobs(cases: dict[str, tuple[str, tuple[str, ...]]], repeats: int) -> dict:
    """``cases``: label -> (project root, targets). Per case and job count, the summary of its
    clean builds, and the speedup of --jobs 2."""
    runs: dict = {(label, n): [] for label in cases for n in (1, 2)}
    for i in range(repeats):
        for label, (root, targets) in cases.items():
            for n in (1, 2) if i % 2 == 0 else (2, 1):
                clear(root)
                runs[(label, n)].append(build(root, *targets, "--jobs", str(n)))
    out = {}
    for label in cases:
        one_job, two = summary(runs[(label, 1)]), summary(runs[(label, 2)])
        out[label] = {
            "jobs1": one_job,
            "jobs2": two,
            "speedup": one_job["wall"]["median"] / two["wall"]["median"],
        }
    return out
