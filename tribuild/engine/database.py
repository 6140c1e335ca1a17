"""The database: memo tables, inputs, revisions, and the entry points callers use.

Terms:
- *memo table*: for each query, a dict from argument tuples to memos; ``memos`` lists every
  memo by key id. After a load, both fill up as keys are used (``loaded``): ``memos`` holds
  None for a stored key not used yet, and a table lacks the stored keys not looked up yet.
- *effective change*: a ``set`` to a value not equal to the current one (``==``, or the
  same encoding for a value still lazy: ``fetch.same_value``) or to another durability, or
  a ``remove`` of a set input. Each bumps ``revision`` by one; other calls are no-ops.
"""

from __future__ import annotations

from contextlib import contextmanager

from tribuild.engine import explain
from tribuild.engine.durability import Durability, DurabilityClock
from tribuild.engine.fetch import same_value
from tribuild.engine.lru import Lru
from tribuild.engine.memo import NO_VALUE, Memo
from tribuild.engine.runtime import Gate, ThreadState
from tribuild.engine.stats import Counters, Log, QueryStats
from tribuild.engine.store import disk as store
from tribuild.engine.store import merge as merging
from tribuild.engine.store.loaded import Loaded

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any

    from tribuild.engine.query import Query
    from tribuild.engine.store.helper import Helper


class Database:
    """Callers use the methods below and read ``revision`` and ``store_report``.

    The other attributes are the engine's shared state, read and written by ``fetch``,
    ``explain`` and the ``store`` modules (not by callers): ``tables`` (query -> args -> memo),
    ``memos`` (by key id), ``loaded`` (the store this database was loaded from, or None),
    ``helper`` (the ``store.helper.Helper`` making the next save's table, or None),
    ``clock`` (when each durability last changed), ``gate`` (the lock, and cancellation),
    ``counters`` (stats and logs), ``local`` (this thread's active-query stack) and ``lru``.
    """

    def __init__(self) -> None:
        self.tables: dict[Query, dict[tuple[Any, ...], Memo]] = {}
        self.memos: list[Memo | None] = []
        self.loaded: Loaded | None = None
        self.helper: Helper | None = None
        self.revision = 0  # bumped by each effective change of an input
        self.clock = DurabilityClock()
        self.gate = Gate()
        self.counters = Counters()
        self.local = ThreadState(self.counters.hit_tables)
        self.lru = Lru()
        self.store_report = store.LoadReport("new", "created empty")

    def find_memo(self, query: Query, args: tuple[Any, ...]) -> Memo | None:
        """The memo of a key, or None if this database has none (call with the lock held)."""
        table = self.tables.get(query)
        if table is None:
            table = self.tables[query] = {}
        memo = table.get(args)
        if memo is None and self.loaded is not None:
            memo = self.loaded.find(self, query, args)
            if memo is not None:
                table[args] = memo
        return memo

    def memo_of(self, query: Query, args: tuple[Any, ...]) -> Memo:
        """The memo of a key, created empty on first use (call with the lock held)."""
        memo = self.find_memo(query, args)
        if memo is None:
            memo = Memo(len(self.memos), query, args)
            self.memos.append(memo)
            self.tables[query][args] = memo
        return memo

    def fresh(self, query: Query, *args: Any) -> bool:
        """Whether asking ``query(*args)`` now would be a plain hit: its memo was verified in
        this revision, holds its value and is not being computed. A hint that lets a walk skip
        work it would redo; a query's value must never depend on it (see
        ``queries.walks``). Lock-free, as the hit path of ``fetch`` is."""
        memo = self.tables.get(query, {}).get(args)
        return (
            memo is not None
            and memo.verified_at >= self.revision
            and memo.value is not NO_VALUE
            and not memo.busy
        )

    def memo_at(self, key_id: int) -> Memo:
        """The memo of a key id, materialised from a loaded store if need be."""
        memo = self.memos[key_id]
        if memo is not None:
            return memo
        assert self.loaded is not None  # only a loaded store leaves a key without its memo
        return self.loaded.memo(self, key_id)

    def every_memo(self) -> list[Memo]:
        """``memos`` with every loaded memo materialised."""
        if self.loaded is not None:
            for key_id in range(self.loaded.count):
                self.loaded.memo(self, key_id)
        return self.memos  # type: ignore[return-value]  # every one materialised above

    def restore(self, memo: Memo, admit: bool = True) -> bool:
        return store.restore(self, memo, admit)

    # -- inputs -------------------------------------------------------------------------

    def set(
        self, query: Query, *args_and_value: Any, durability: Durability = Durability.LOW
    ) -> None:
        """``db.set(q, *args, value)``: set an input; equal values are a no-op."""
        if not query.is_input:
            raise TypeError(f"{query.name} is not an input query")
        if not args_and_value:
            raise TypeError("db.set(query, *args, value) needs a value")
        *args, value = args_and_value
        durability = Durability(durability)
        with self._writing():
            memo = self.memo_of(query, tuple(args))
            same, blob = same_value(self, memo, value)
            if not same or memo.durability != durability:
                self._change(memo, value, durability, blob)
            elif memo.value is NO_VALUE:
                memo.value = value  # its blob is the stored encoding of ``value``

    def remove(self, query: Query, *args: Any) -> None:
        """Make an input unset: reading it raises ``MissingInput``."""
        with self._writing():
            memo = self.find_memo(query, args)
            if memo is not None and (memo.value is not NO_VALUE or memo.blob is not None):
                self._change(memo, NO_VALUE, memo.durability, None)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        if self.local.stack:
            raise RuntimeError("inputs cannot be set or removed from inside a query")
        with self.gate.writing():
            yield

    def _change(
        self, memo: Memo, value: Any, durability: int, blob: tuple[Any, ...] | None
    ) -> None:
        """Set the input ``memo`` to ``value`` (with its blob, if known)."""
        revision = self.revision + 1
        self.clock.report_change(memo.durability, revision)
        memo.value = value
        memo.blob = blob
        memo.durability = durability
        memo.changed_at = revision
        self.revision = revision

    # -- observing ----------------------------------------------------------------------

    def stats(self) -> dict[str, QueryStats]:
        return self.counters.snapshot()

    @contextmanager
    def log(self, queries: Iterable[Query] | None = None) -> Iterator[Log]:
        """Record every executed / validated / hit event while the block runs; with
        ``queries`` (declared queries), only their events."""
        log = Log(None if queries is None else frozenset(queries))
        self.counters.logs += (log,)
        try:
            yield log
        finally:
            self.counters.logs = tuple(other for other in self.counters.logs if other is not log)

    def why(self, query: Query, *args: Any) -> list[explain.Step]:
        return explain.why(self, query, args)

    def explain(
        self, query: Query, *args: Any, label: Callable[[str, tuple[Any, ...]], str] | None = None
    ) -> str:
        if label is None:
            return explain.explain(self, query, args)
        return explain.explain(self, query, args, label)

    def graph(self) -> Any:
        return explain.graph(self)

    # -- worker processes ---------------------------------------------------------------

    def export(self, keys: Iterable[tuple[Query, tuple[Any, ...]]]) -> list[bytes]:
        """The records of derived keys ``(query, args)`` computed at the current revision and
        of what they read, for ``merge`` into the database this one was forked from: the
        payload's parts, to be joined or written back to back."""
        with self.gate.cond:
            return merging.export(self, keys)

    def encode(self, keys: Iterable[tuple[Query, tuple[Any, ...]]]) -> None:
        """Encode now, for the next save, the values of the records ``export(keys)`` would
        send."""
        with self.gate.cond:
            merging.encode(self, keys)

    def merge(self, payload: bytes | memoryview) -> merging.MergeReport:
        """Install the records of an ``export`` payload this database does not already hold
        valid; stale payloads and records that read other input values are skipped."""
        if self.local.stack:
            raise RuntimeError("payloads cannot be merged from inside a query")
        with self.gate.cond:
            return merging.merge(self, payload)

    # -- persistence --------------------------------------------------------------------

    def save_apart(self, on_end: Callable[[], None]) -> None:
        """Start making the next save's argument table in a forked helper process
        (``apart``); ``on_end`` is called once it has ended. Call ``save`` next: it waits
        for the helper only after doing the rest of its work."""
        from tribuild.engine.store import helper as apart

        self.helper = apart.Helper(self, on_end)

    def end_apart(self) -> None:
        """Wait for a helper that no save took (the caller failed before saving)."""
        helper, self.helper = self.helper, None
        if helper is not None:
            helper.end()

    def save(self, path: str | os.PathLike[str], salt: str) -> store.SaveReport:
        with self.gate.cond:
            return store.save(self, path, salt)

    @classmethod
    def load(cls, path: str | os.PathLike[str], salt: str) -> Database:
        db = cls()
        store.load(db, path, salt)
        return db
