"""Memos: what the database knows about one key.

Terms:
- *key id*: a small integer interned for each (query, args) key; dependencies are stored as
  tuples of key ids, so verification walks plain Python tuples and lists.
- *memo*: the record of one key: its value (or ``NO_VALUE``), the revision at which that value
  last changed (``changed_at``), the revision at which it was last known to be valid
  (``verified_at``), its durability and, for derived queries, the ids of the keys it read, in
  order (``deps``; None until it first runs). Inputs have ``deps`` None and ``verified_at``
  ``ALWAYS``: they are valid by definition.
- *NO_VALUE*: an input that is unset or removed, or a derived memo whose value is not held
  (evicted by the LRU, or not yet decoded from the store: then ``blob`` holds the stored
  bytes and their checksum, and for a value loaded from a pack also the pack and the
  offset in it).
- *cause*: why a derived memo last ran: the id of the dependency found changed (with
  ``cause_rev``, the revision that dependency changed at), ``FIRST_RUN`` or ``VALUE_LOST``
  (it ran only to recompute a value the memo no longer held).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.engine.query import Query

ALWAYS = 1 << 62
FIRST_RUN = -1
VALUE_LOST = -2


class _NoValue:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE = _NoValue()


class Memo:
    __slots__ = (
        "id",
        "query",
        "args",
        "value",
        "changed_at",
        "verified_at",
        "durability",
        "deps",
        "busy",
        "cause",
        "cause_rev",
        "executed_at",
        "blob",
    )

    def __init__(
        self,
        key_id: int,
        query: Query,
        args: tuple[Any, ...],
        changed_at: int = 0,
        verified_at: int = -1,
        durability: int = 0,
        deps: tuple[int, ...] | None = None,
        blob: tuple[Any, ...] | None = None,
    ) -> None:
        self.id = key_id
        self.query = query
        self.args = args
        self.value = NO_VALUE
        self.changed_at = changed_at
        self.verified_at = ALWAYS if query.is_input else verified_at
        self.durability = durability
        self.deps = deps
        self.busy = False
        self.cause = FIRST_RUN
        self.cause_rev = 0
        self.executed_at = 0
        self.blob = blob

    def label(self) -> str:
        return key_label(self.query.name, self.args)


def key_label(name: str, args: tuple[Any, ...]) -> str:
    return f"{name}({', '.join(map(repr, args))})"
