"""Units of work for the scheduler, and the order it takes them in.

Terms:
- *unit*: one query key the build needs, ``query(db, *args)``, with a *name* shown in
  progress and timing, a *prelude* (a function of the database giving keys read first: their
  values are not returned, but they are computed, and exported, with the unit; it runs where
  the unit runs, so what it needs to know, such as the files a target imports, is found
  there), and an estimated *cost* (any unit, compared between units: the driver uses the
  size of a target's entry file). Units are independent: what targets share (files they
  both import) is computed by whichever gets there first in each process.
- *outcome*: what running a unit gave: its value, or the traceback of the exception it
  raised (a bug: it is reported, and the other units still run), and what its *emit* step
  reported (``emitted``: a build with workers runs it, see ``scheduler``).
"""

from __future__ import annotations

from tribuild.base.gcpause import unit_by_unit
from tribuild.base.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from tribuild.driver.progress import Quiet
    from tribuild.engine import Database


@record
class Unit:
    name: str
    query: Any  # an engine query: called as query(db, *args)
    args: tuple[Any, ...]
    cost: float = 1.0
    # db -> the keys to compute first (None: none)
    prelude: Callable[[Any], Iterable[tuple[Any, tuple[Any, ...]]]] | None = None

    def keys(self, db: Database) -> list[tuple[Any, tuple[Any, ...]]]:
        """The prelude's keys, then the unit's own (computing the prelude in ``db``)."""
        return [*(self.prelude(db) if self.prelude is not None else ()), (self.query, self.args)]


@record
class Outcome:
    value: object = None
    error: str | None = None  # traceback text of a bug
    seconds: float = 0.0
    emitted: tuple[str, ...] = ()  # what the unit's emit job returned


def order(units: list[Unit]) -> list[Unit]:
    """``units`` costliest first; ties keep the given order (so the order is deterministic)."""
    return sorted(units, key=lambda u: -u.cost)


def run_one(db: Database, unit: Unit) -> Outcome:
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


def run_serial(db: Database, units: list[Unit], progress: Quiet) -> dict[str, Outcome]:
    """Every unit, one after another in ``order``, in this process."""
    outcomes: dict[str, Outcome] = {}
    with unit_by_unit() as settle:
        for unit in order(units):
            progress.started(unit.name)
            outcomes[unit.name] = run_one(db, unit)
            progress.finished(unit.name, outcomes[unit.name].error is None)
            settle()
    return outcomes
