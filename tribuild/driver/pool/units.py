"""Units of work for the scheduler, and the order it takes them in.

Terms:
- *unit*: one query key the build needs, ``query(db, *args)``, with a *name* shown in
  progress and timing, a *prelude* (a function of the database giving keys read first: their
  values are not returned, but they are computed, and exported, with the unit; it runs where
  the unit runs, so what it needs to know, such as the files a target imports, is found
  there), the names of the units it *depends on*
  (their results should be in the database before it starts, so it does not redo them)
  and an estimated *cost* (any unit, compared between units: the driver uses the size of a
  target's entry file).
- *outcome*: what running a unit gave: its value, or the traceback of the exception it
  raised (a bug: it is reported, and units that depend on it are *skipped*), and what its
  *emit* step reported (``emitted``: a build with workers runs it, see ``scheduler``).
- *priority*: a unit's cost plus the largest priority among the units that depend on it:
  the length of the longest chain of work it starts. Taking ready units by highest priority
  runs the critical path first.
"""

from __future__ import annotations

import graphlib

from tribuild.base.gcpause import unit_by_unit
from tribuild.base.record import record


@record
class Unit:
    name: str
    query: object
    args: tuple
    deps: tuple[str, ...] = ()
    cost: float = 1.0
    prelude: object = None  # db -> the keys to compute first (None: none)

    def keys(self, db) -> list[tuple[object, tuple]]:
        """The prelude's keys, then the unit's own (computing the prelude in ``db``)."""
        return [*(self.prelude(db) if self.prelude is not None else ()), (self.query, self.args)]


@record
class Outcome:
    value: object = None
    error: str | None = None  # traceback text of a bug
    skipped: str | None = None  # the failed unit this one depended on
    seconds: float = 0.0
    emitted: tuple[str, ...] = ()  # what the unit's emit job returned


def order(units: list[Unit]) -> list[Unit]:
    """``units`` in dependency order, highest priority first among those ready together;
    ties keep the given order (so the order is deterministic)."""
    by_name = {u.name: u for u in units}
    priorities = priority(units)
    position = {u.name: i for i, u in enumerate(units)}
    sorter = graphlib.TopologicalSorter(
        {u.name: [d for d in u.deps if d in by_name] for u in units}
    )
    sorter.prepare()
    out: list[Unit] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=lambda n: (-priorities[n], position[n]))
        for name in ready:
            out.append(by_name[name])
            sorter.done(name)
    return out


def priority(units: list[Unit]) -> dict[str, float]:
    """Each unit's cost plus the largest priority of the units that depend on it."""
    names = {u.name for u in units}
    dependents: dict[str, list[str]] = {u.name: [] for u in units}
    for u in units:
        for d in u.deps:
            if d in names:
                dependents[d].append(u.name)
    cost = {u.name: u.cost for u in units}
    out: dict[str, float] = {}
    sorter = graphlib.TopologicalSorter({n: dependents[n] for n in names})
    for name in sorter.static_order():  # dependents come before the units they depend on
        out[name] = cost[name] + max((out[d] for d in dependents[name]), default=0.0)
    return out


def run_one(db, unit: Unit) -> Outcome:
    """Run ``unit`` in this process; an exception becomes an outcome with its traceback."""
    import time

    start = time.perf_counter()
    try:
        for query, args in unit.keys(db):
            value = query(db, *args)  # the last is the unit's own
    except Exception:
        import traceback  # a bug's path only: its import costs ~2 ms a build

        return Outcome(error=traceback.format_exc(), seconds=time.perf_counter() - start)
    return Outcome(value, seconds=time.perf_counter() - start)


def skipped(unit: Unit, outcomes: dict[str, Outcome]) -> str | None:
    """The name of a dependency of ``unit`` that failed or was skipped, if any."""
    for d in unit.deps:
        got = outcomes.get(d)
        if got is not None and (got.error is not None or got.skipped is not None):
            return d
    return None


def run_serial(db, units: list[Unit], progress) -> dict[str, Outcome]:
    """Every unit, one after another in ``order``, in this process."""
    outcomes: dict[str, Outcome] = {}
    with unit_by_unit() as settle:
        for unit in order(units):
            failed = skipped(unit, outcomes)
            if failed is not None:
                outcomes[unit.name] = Outcome(skipped=failed)
                continue
            progress.started(unit.name)
            outcomes[unit.name] = run_one(db, unit)
            progress.finished(unit.name, outcomes[unit.name].error is None)
            settle()
    return outcomes
