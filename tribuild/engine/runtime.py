"""Runtime state shared by the fetch algorithm: per-thread active stacks, cycle reports and
the read/write gate that implements cancellation.

Terms:
- *frame*: one entry of a thread's active stack, a list ``[memo, deps, pos, failed]``
  indexed by ``MEMO``, ``DEPS``, ``POS``, ``FAILED`` (a list: verification pushes one per
  memo, and a list is several times cheaper to make than an object). An *execute frame*
  (``deps`` is a list) is a query body running; it collects the key ids the body reads. A
  *verify frame* (``deps`` is None) is a memo whose dependencies are being checked; ``pos``
  is the next one to check and ``failed`` says that bringing that dependency up to date
  raised.
- *busy*: a memo with a frame on the (single) running stack. Asking for a busy memo is a cycle.
- *gate*: one re-entrant lock around everything that mutates memos (verify, execute, set).
  Memo hits do not take it. A *writer* (``db.set``/``db.remove``) announces itself in
  ``pending`` and then waits for the lock; a thread running queries sees ``pending`` at its
  next query call and raises ``Cancelled``, unwinding and releasing the lock (salsa's model).
  New top-level reads wait until no writer is pending. Python's GIL runs one thread's bytecode
  at a time anyway, so serialising the slow path costs concurrent readers nothing measurable,
  and it makes every memo update atomic for the lock-free hit path.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from contextlib import contextmanager

from tribuild.engine.errors import Cancelled, CycleError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from tribuild.engine.memo import Memo
    from tribuild.engine.query import Query

MEMO, DEPS, POS, FAILED = range(4)


class ThreadState(threading.local):
    """Per-thread: the active stack, memo-hit counts, and the time spent in nested
    executions (to compute each execution's own time)."""

    def __init__(self, hit_tables: list[dict[Query, int]]) -> None:
        self.stack: list[list[Any]] = []  # frames: [memo, deps, pos, failed]
        self.hits: defaultdict[Query, int] = defaultdict(int)
        self.nested_seconds = 0.0
        hit_tables.append(self.hits)


def cycle_error(stack: list[list[Any]], memo: Memo) -> CycleError:
    """The error for asking ``memo`` while it is busy: every key from its frame up to the top
    of the stack, then ``memo`` again."""
    start = next(i for i, frame in enumerate(stack) if frame[MEMO] is memo)
    return CycleError([frame[MEMO].label() for frame in stack[start:]] + [memo.label()])


class Gate:
    __slots__ = ("cond", "pending", "_count_lock")

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.RLock())
        self.pending = 0
        self._count_lock = threading.Lock()

    def admit_reader(self, nested: bool) -> None:
        """Called with ``cond`` held before slow-path work: inside a running query a pending
        writer cancels it; a new top-level read waits for pending writers."""
        if nested:
            if self.pending:
                raise Cancelled("an input was set from another thread")
            return
        while self.pending:
            self.cond.wait()

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the lock for a write, cancelling running readers first."""
        with self._count_lock:
            self.pending += 1
        try:
            with self.cond:
                yield
        finally:
            with self._count_lock:
                self.pending -= 1
            with self.cond:
                self.cond.notify_all()
