"""Pausing the cyclic garbage collector around work that makes many long-lived objects (a
store's load and save, merging a parallel build's results): collections meanwhile would
walk them again and again, and find nothing to free.

Objects made while collections are off still count towards the youngest generation, so
the first collection after a pause would walk every one of them (20 ms after the merges of
a 50-file parallel build). ``paused`` therefore ends by moving them to the oldest
generation (``gc.freeze`` then ``gc.unfreeze``), which collections reach only rarely.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager


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
