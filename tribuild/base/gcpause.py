"""Keeping the cyclic garbage collector off what a build makes to keep: collections walk
every object of the generations they collect, and the values and records of a build live
until it ends, so walking them finds nothing to free.

- ``paused``: collections off around work that makes many long-lived objects (a store's
  load and save, merging a parallel build's results).
- ``unit_by_unit``: for a loop over a build's units, ``settle()`` after each moves what it
  made out of the collector's reach (``gc.freeze``): a 50-file build in one process spent a
  tenth of its units' time in collections walking the earlier units' results.

Objects made while collections are off still count towards the youngest generation, so
the first collection after a pause would walk every one of them. ``paused`` therefore ends
by moving them to the oldest generation (``gc.freeze`` then ``gc.unfreeze``), which
collections reach only rarely.

- ``hold_until_exit``: for a process that ends with ``os._exit`` (``cli.entry``), which
  frees nothing: the databases it opens (``held``) are kept until then. A database freed
  when its command returns goes object by object, which takes longer than a whole no-op
  build. A library caller (``tribuild.build``) holds none.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_HELD: list | None = None  # what ``held`` keeps, once ``hold_until_exit`` was called


@contextmanager
def unit_by_unit():
    """Yields ``settle``, to call after each unit; on exit, what was settled returns to the
    oldest generation (``gc.unfreeze``), where a long-running process (``watch``) still
    collects it in time."""
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


@contextmanager
def paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def hold_until_exit() -> None:
    """From now on, keep what ``held`` is given until the process ends."""
    global _HELD
    if _HELD is None:
        _HELD = []


def held(obj: Any) -> Any:
    """``obj``, kept until the process ends if ``hold_until_exit`` was called."""
    if _HELD is not None:
        _HELD.append(obj)
    return obj
