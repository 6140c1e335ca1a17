"""Reading a key: memo hit, verification (red-green), execution, backdating.

Terms:
- *hit*: the memo was verified in the current revision and holds its value: return it, after
  recording the dependency in the caller's frame. No lock, a few dict and attribute reads.
- *verify* (salsa's deep_verify): a memo verified at an older revision is valid if its
  durability level saw no change since (the *durability shortcut*), or if every dependency,
  checked in the order it was read and itself brought up to date first, has ``changed_at`` no
  later than the memo's ``verified_at``. The walk uses the thread's stack as an explicit work
  list (no Python recursion), so 100k-deep chains verify fine. The first dependency found
  changed is the *cause*: the memo re-executes (later dependencies may no longer be read).
- *backdating*: a re-executed memo whose new value ``==`` its old one keeps its ``changed_at``
  and its old value (with the value's stored encoding), so its dependents stay green; unless
  its durability dropped (an input was lowered): then its dependents must re-run to lower
  theirs, as in salsa. A lazy old value (``store``) is compared by its encoding, not
  decoded (``same_value``). A memo that re-ran only because its value was not held
  (``VALUE_LOST``: evicted, or undecodable from the store) keeps it too: its dependencies did
  not change, so by purity neither did its value.
"""

from __future__ import annotations

from time import perf_counter

from tribuild.engine.durability import Durability
from tribuild.engine.errors import Cancelled, CycleError, MissingInput
from tribuild.engine.memo import FIRST_RUN, NO_VALUE, VALUE_LOST
from tribuild.engine.runtime import DEPS, FAILED, MEMO, POS, cycle_error
from tribuild.engine.store.packs import encoded

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.engine.database import Database
    from tribuild.engine.memo import Memo
    from tribuild.engine.query import Query
    from tribuild.engine.runtime import ThreadState


def fetch(db: Database, query: Query, args: tuple[Any, ...]) -> Any:
    table = db.tables.get(query)
    if table is not None:
        memo = table.get(args)
        if memo is not None and memo.verified_at >= db.revision:
            value = memo.value
            if value is not NO_VALUE:
                local = db.local
                stack = local.stack
                if stack:
                    if db.gate.pending:
                        raise Cancelled("an input was set from another thread")
                    stack[-1][DEPS].append(memo.id)
                local.hits[query] += 1
                if db.counters.logs:
                    db.counters.event("hits", memo)
                if query.lru:
                    db.lru.touch(memo)
                return value
    return _slow_fetch(db, query, args)


def _slow_fetch(db: Database, query: Query, args: tuple[Any, ...]) -> Any:
    local = db.local
    stack = local.stack
    with db.gate.cond:
        db.gate.admit_reader(nested=bool(stack))
        memo = db.memo_of(query, args)
        if stack:
            stack[-1][DEPS].append(memo.id)
        if memo.busy:
            raise cycle_error(stack, memo)
        if query.is_input:
            if memo.value is NO_VALUE and not db.restore(memo):
                raise MissingInput(memo.label())
            _hit(db, local, memo)
        elif memo.deps is None:
            execute(db, local, memo, FIRST_RUN)
        else:
            if memo.verified_at < db.revision:
                verify(db, local, memo)
            elif memo.value is not NO_VALUE:
                _hit(db, local, memo)
            if memo.value is NO_VALUE:
                if db.restore(memo):
                    _hit(db, local, memo)
                else:
                    execute(db, local, memo, VALUE_LOST)
        return memo.value


def _hit(db: Database, local: ThreadState, memo: Memo) -> None:
    local.hits[memo.query] += 1
    db.counters.event("hits", memo)


def verify(db: Database, local: ThreadState, root: Memo) -> None:
    """Bring ``root`` (a derived memo that ran before, verified at an older revision) up to
    the current revision: mark it and the stale dependencies on the way green, or re-execute
    each memo whose dependency changed. One loop with everything in locals: it runs once per
    memo of the graph after an edit."""
    rev = db.revision
    level_changed = db.clock.changed
    memos = db.memos
    memo_at = db.memo_at
    counters = db.counters
    counts = counters.validations
    stack = local.stack
    base = len(stack)
    root.busy = True
    stack.append([root, None, 0, False])
    try:
        while len(stack) > base:
            frame = stack[-1]
            memo, _, pos, failed = frame
            cause = None
            if failed:
                cause = memos[memo.deps[pos]]
            elif pos or level_changed[memo.durability] > memo.verified_at:
                verified_at = memo.verified_at
                deps = memo.deps
                for at in range(pos, len(deps)):
                    dep = memos[deps[at]]
                    if dep is None:
                        dep = memo_at(deps[at])
                    if dep.verified_at < rev:
                        if dep.deps is None:
                            cause = dep
                            break
                        if dep.busy:
                            raise cycle_error(stack, dep)
                        frame[POS] = at
                        dep.busy = True
                        stack.append([dep, None, 0, False])
                        cause = _DESCEND
                        break
                    if dep.changed_at > verified_at:
                        cause = dep
                        break
                if cause is _DESCEND:
                    continue
            stack.pop()
            memo.busy = False
            if cause is None:
                memo.verified_at = rev
                query = memo.query
                counts[query] = counts.get(query, 0) + 1
                if counters.logs:
                    counters.event("validated", memo)
            else:
                _execute_in_verify(db, local, memo, cause, base)
    finally:
        for frame in stack[base:]:
            frame[MEMO].busy = False
        del stack[base:]


_DESCEND = object()


def _execute_in_verify(
    db: Database, local: ThreadState, memo: Memo, cause: Memo, base: int
) -> None:
    """Re-execute a memo found changed. If a dependency (not the root) fails, its dependent
    re-executes instead: that body asked for it and decides what its failure means."""
    stack = local.stack
    try:
        execute(db, local, memo, cause.id, cause.changed_at)
    except (Cancelled, CycleError):
        raise
    except Exception:
        if len(stack) == base:
            raise
        stack[-1][FAILED] = True


def execute(db: Database, local: ThreadState, memo: Memo, cause: int, cause_rev: int = 0) -> None:
    """Run ``memo``'s query body and store the result. Nothing is stored if it raises."""
    if db.gate.pending:
        raise Cancelled("an input was set from another thread")
    stack = local.stack
    frame: list[Any] = [memo, [], 0, False]
    memo.busy = True
    stack.append(frame)
    outer_nested = local.nested_seconds
    local.nested_seconds = 0.0
    start = perf_counter()
    try:
        value = memo.query.fn(db, *memo.args)
    finally:
        stack.pop()
        memo.busy = False
        elapsed = perf_counter() - start
        own = elapsed - local.nested_seconds
        local.nested_seconds = outer_nested + elapsed
    _store(db, memo, value, frame[DEPS], cause, cause_rev)
    db.counters.executed(memo, own)


def _store(
    db: Database, memo: Memo, value: Any, read: list[int], cause: int, cause_rev: int
) -> None:
    memos = db.memos
    deps = tuple(dict.fromkeys(read))
    rev = db.revision
    # every key the body read has its memo (fetched or materialised on the way)
    durability = min((memos[d].durability for d in deps), default=Durability.HIGH)  # type: ignore[union-attr]
    same, blob = (True, None) if cause == VALUE_LOST else same_value(db, memo, value)
    if not same or durability < memo.durability:
        memo.changed_at = rev
    if not same:
        memo.value, memo.blob = value, blob
    elif memo.value is NO_VALUE:
        memo.value = value  # its blob (if any) is the stored encoding of ``value``
    memo.deps = deps
    memo.durability = durability
    memo.verified_at = rev
    memo.executed_at = rev
    memo.cause = cause
    memo.cause_rev = cause_rev
    if memo.query.lru:
        db.lru.admit(memo, memos)


def same_value(db: Database, memo: Memo, value: Any) -> tuple[bool, tuple[Any, ...] | None]:
    """Whether ``value`` equals the memo's value (False if it has none), and ``value``'s blob
    when the comparison encoded it (None otherwise). A lazy value is not decoded: the
    encodings are compared (``codec``: canonical, so equal bytes are equal values; equal
    values encoded differently, such as dicts in another order, only count as a change). A
    value that cannot be encoded is compared with ``==`` to the decoded lazy value."""
    if memo.value is NO_VALUE and memo.blob is not None:
        blob = encoded(value)
        if blob is not None:
            return blob[0] == memo.blob[0] and blob[1] == memo.blob[1], blob
        db.restore(memo, admit=False)
    return memo.value is not NO_VALUE and equal(memo.value, value), None


def equal(old: object, new: object) -> bool:
    """``old == new`` as a plain bool; a comparison that raises or is not a bool counts as
    a difference."""
    try:
        return bool(old == new)
    except Exception:
        return False
