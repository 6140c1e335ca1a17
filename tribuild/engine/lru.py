"""Per-query LRU bound on held values.

Terms:
- *held value*: a derived memo's value kept in memory. ``@derived(lru=N)`` keeps at most N per
  query; evicting one sets the memo's value to ``NO_VALUE`` but keeps its dependency record
  and revisions, so dependents still verify green through it and it re-runs only if its
  value is asked for again.
"""

from __future__ import annotations

from collections import OrderedDict

from tribuild.engine.memo import NO_VALUE


class Lru:
    __slots__ = ("_order",)

    def __init__(self):
        self._order: dict = {}

    def touch(self, memo) -> None:
        """Mark a held value as most recently used (lock-free: a concurrent eviction wins)."""
        try:
            self._order[memo.query].move_to_end(memo.id)
        except KeyError:
            pass

    def admit(self, memo, memos: list) -> None:
        """Record that ``memo`` now holds a value; evict the least recently used beyond the
        bound. Called with the database lock held."""
        order = self._order.get(memo.query)
        if order is None:
            order = self._order[memo.query] = OrderedDict()
        order[memo.id] = None
        order.move_to_end(memo.id)
        while len(order) > memo.query.lru:
            evicted = memos[order.popitem(last=False)[0]]
            evicted.value = NO_VALUE
            evicted.blob = None
