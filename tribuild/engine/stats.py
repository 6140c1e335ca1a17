"""Counters and the event log.

Terms:
- *executed*: the query body ran. *validated*: a memo from an older revision was found still
  valid (through its dependencies or the durability shortcut) without running. *hit*: a read
  answered from a memo already valid in the current revision.
- *seconds*: time spent in the query's own body, excluding the nested queries it executed.
- *log*: while ``with db.log() as log`` is active, every event (of the queries it is
  limited to, if any) is also appended, as ``(query_name, args)``, to ``log.executed``,
  ``log.validated`` or ``log.hits`` in order;
  a record merged from a worker is logged as what the worker did with it (``merge``).
"""

from __future__ import annotations

from tribuild.base.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.engine.memo import Memo
    from tribuild.engine.query import Query


@record
class QueryStats:
    executed: int = 0
    validated: int = 0
    hits: int = 0
    seconds: float = 0.0


class Log:
    """``only``: the queries whose events it keeps (None: every query)."""

    __slots__ = ("executed", "validated", "hits", "only")

    def __init__(self, only: frozenset[Query] | None = None) -> None:
        self.executed: list[tuple[str, tuple[Any, ...]]] = []
        self.validated: list[tuple[str, tuple[Any, ...]]] = []
        self.hits: list[tuple[str, tuple[Any, ...]]] = []
        self.only = only


class Counters:
    """Executions and validations (updated under the database lock; ``fetch.verify`` counts
    validations itself, inline) and per-thread hit tables (each updated only by its own
    thread)."""

    __slots__ = ("work", "validations", "hit_tables", "logs")

    def __init__(self) -> None:
        self.work: dict[Query, list[Any]] = {}  # Query -> [executed, seconds]
        self.validations: dict[Query, int] = {}
        self.hit_tables: list[dict[Query, int]] = []
        self.logs: tuple[Log, ...] = ()

    def executed(self, memo: Memo, seconds: float) -> None:
        row = self.work.get(memo.query)
        if row is None:
            row = self.work[memo.query] = [0, 0.0]
        row[0] += 1
        row[1] += seconds
        if self.logs:
            self.event("executed", memo)

    def event(self, kind: str, memo: Memo) -> None:
        for log in self.logs:
            if log.only is None or memo.query in log.only:
                getattr(log, kind).append((memo.query.name, memo.args))

    def snapshot(self) -> dict[str, QueryStats]:
        hits: dict[Query, int] = {}
        for table in list(self.hit_tables):
            for query, count in dict(table).items():
                hits[query] = hits.get(query, 0) + count
        out = {}
        for query in set(self.work) | set(self.validations) | set(hits):
            executed, seconds = self.work.get(query, (0, 0.0))
            out[query.name] = QueryStats(
                executed, self.validations.get(query, 0), hits.get(query, 0), seconds
            )
        return out
