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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.engine.memo import Memo
    from tribuild.engine.query import Query


class Lru:
    __slots__ = ("_order",)

    def __init__(self) -> None:
        self._order: dict[Query, OrderedDict[int, None]] = {}

    def touch(self, memo: Memo) -> None:
        """Mark a held value as most recently used (lock-free: a concurrent eviction wins)."""
        try:
            self._order[memo.query].move_to_end(memo.id)
        except KeyError:
            pass

    def admit(self, memo: Memo, memos: list[Memo | None]) -> None:
        """Record that ``memo`` now holds a value; evict the least recently used beyond the
        bound. Called with the database lock held."""
        order = self._order.get(memo.query)
        if order is None:
            order = self._order[memo.query] = OrderedDict()
        order[memo.id] = None
        order.move_to_end(memo.id)
        bound = memo.query.lru
        assert bound is not None  # only the values of queries with a bound are admitted
        while len(order) > bound:
            evicted = memos[order.popitem(last=False)[0]]
            assert evicted is not None  # it was admitted, so it is materialised
            evicted.value = NO_VALUE
            evicted.blob = None
