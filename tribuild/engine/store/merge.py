"""Exporting memos from a copy of a database and merging them into the original, for pools
of forked worker processes.

Terms (docs/internals.md describes the payload format and every skip reason):
- *record*: one derived memo verified at the exporting database's current revision: key,
  value, ``changed_at``, durability, dependencies (in read order) and why-record.
  ``export(keys)`` writes the records of the keys asked for and of every derived dependency
  verified at the same revision, dependencies first.
- *input fingerprint*: for each input a record read, the checksum of its value's encoding.
- *left out*: a record whose key the codec cannot encode, and every record depending on it;
  the receiver recomputes them on demand.
- *payload*: a header, a JSON part (revision, clock, shared argument elements, key table,
  fingerprints), the records as 64-bit integers, then the values' encodings, checked by one
  CRC-32. No pickle: values and arguments use ``codec``.
- *merge*: each record is installed in the receiver, or skipped for a *reason* (another
  revision, a differing input, an unknown query, another history, already valid).
Workers forked from one state compute equal records for a key (queries are pure), so the
memo states after merging do not depend on the order payloads arrive in.
"""

from __future__ import annotations

import json
from array import array
from zlib import crc32

from tribuild.base.record import record
from tribuild.engine.memo import FIRST_RUN, NO_VALUE, key_label
from tribuild.engine.query import REGISTRY
from tribuild.engine.store import codec
from tribuild.engine.store import disk as store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    from tribuild.engine.database import Database
    from tribuild.engine.memo import Memo
    from tribuild.engine.query import Query
    from tribuild.engine.store.codec import Json

    Keys = Iterable[tuple[Query, tuple[Any, ...]]]
    # key, (value offset, length, checksum), changed_at, durability, cause, cause_rev,
    # executed_at, dependencies
    Record = tuple[int, tuple[int, int, int], int, int, int, int, int, list[int]]

FORMAT = 5
_MAGIC = b"TRIBUILD-MERGE %d\n" % FORMAT


@record
class MergeReport:
    installed: int
    skipped: int
    reasons: dict[str, int]  # reason -> records skipped for it
    left_out: int = 0  # records the exporter could not encode (recomputed on demand)
    without_value: int = 0  # installed records whose value re-runs on first read


# -- export ------------------------------------------------------------------------------


def export(db: Database, keys: Keys) -> list[bytes]:
    rev = db.revision
    table = _KeyTable()
    chunks: list[bytes]
    left: set[int]
    ints, chunks, left, offset, count = array("q"), [], set(), 0, 0
    memo_at = db.memo_at
    ref = table.ref
    for memo in _exported(db, keys):
        assert memo.deps is not None  # a derived memo that ran (``_computed``, ``_closure``)
        own = ref(memo)
        refs = [ref(memo_at(d)) for d in memo.deps]
        deps = [d for d in refs if d is not None]
        if own is None or len(deps) < len(refs) or left and any(d in left for d in memo.deps):
            left.add(memo.id)
            continue
        blob = store.blob_of(memo, {})
        value = (-1, 0, 0)
        if blob is not None:
            value = (offset, len(blob[0]), blob[1])
            chunks.append(blob[0])
            offset += len(blob[0])
        cause = memo.cause if memo.cause < 0 else ref(memo_at(memo.cause))
        ints.extend(
            (
                own,
                *value,
                memo.changed_at,
                int(memo.durability),
                FIRST_RUN if cause is None else cause,
                memo.cause_rev,
                memo.executed_at,
                len(deps),
                *deps,
            )
        )
        count += 1
    meta = {
        "revision": rev,
        "clock": db.clock.changed,
        "elements": table.elements,
        "queries": table.queries,
        "keys": table.keys,
        "inputs": table.inputs,
        "records": count,
        "left_out": len(left),
    }
    check = 0
    for chunk in chunks:
        check = crc32(chunk, check)
    meta_bytes = json.dumps(meta | {"values": check}, separators=(",", ":")).encode()
    record_bytes = ints.tobytes()
    return [
        _MAGIC,
        len(meta_bytes).to_bytes(8, "little"),
        meta_bytes,
        len(record_bytes).to_bytes(8, "little"),
        record_bytes,
        *chunks,
    ]


def encode(db: Database, keys: Keys) -> None:
    """Encode the values of the records ``export(keys)`` would write, each once (a memo
    keeps its encoding, which a save writes as it is), without exporting them: for keys
    computed in the process that saves, while it has other work to overlap with."""
    for memo in _exported(db, keys):
        store.blob_of(memo, {})


def _exported(db: Database, keys: Keys) -> list[Memo]:
    """The memos whose records ``export(keys)`` writes, dependencies first."""
    rev = db.revision
    roots = [_computed(db, query, tuple(args), rev) for query, args in keys]
    return _closure(roots, db.memo_at, rev)


def _computed(db: Database, query: Query, args: tuple[Any, ...], rev: int) -> Memo:
    memo = db.find_memo(query, args)
    if query.is_input or memo is None or memo.deps is None or memo.verified_at < rev:
        raise ValueError(
            f"{key_label(query.name, args)} is not a derived key computed at the current revision"
        )
    return memo


def _closure(roots: list[Memo], memo_at: Callable[[int], Memo], rev: int) -> list[Memo]:
    """``roots`` and the derived memos they read transitively that are verified at ``rev``,
    dependencies first (an explicit stack: chains may be deeper than Python's recursion)."""
    order: list[Memo] = []
    seen: set[int] = set()
    for root in roots:
        if root.id in seen:
            continue
        seen.add(root.id)
        stack = [(root, 0)]
        while stack:
            memo, pos = stack.pop()
            deps = memo.deps
            assert deps is not None  # derived memos that ran, as the roots
            while pos < len(deps):
                dep = memo_at(deps[pos])
                pos += 1
                if dep.id not in seen and dep.deps is not None and dep.verified_at >= rev:
                    seen.add(dep.id)
                    stack.append((memo, pos))
                    stack.append((dep, 0))
                    break
            else:
                order.append(memo)
    return order


class _KeyTable:
    """The payload's keys, by memo id, and their elements; inputs also get a fingerprint."""

    def __init__(self) -> None:
        self.keys: list[list[Any]] = []  # [query index, argument elements]
        self.inputs: list[list[Any]] = []  # [key index, fingerprint, durability]
        self.elements: list[Json] = []
        self.queries: list[str] = []
        self._query_index: dict[str, int] = {}
        self._index: dict[int, int | None] = {}
        self._by_id: dict[int, int] = {}  # id of an argument -> its element (the memos
        self._by_text: dict[str, int] = {}  # keep the arguments alive); JSON text -> element
        self._plain: dict[tuple[type, Any], int] = {}  # (type, value) of a plain one -> element

    def ref(self, memo: Memo) -> int | None:
        """The key's index in the table, or None if it cannot be encoded."""
        if memo.id in self._index:
            return self._index[memo.id]
        args = self._args(memo)
        index = None
        if args is not None:
            fingerprint = fingerprint_of(memo) if memo.query.is_input else None
            if fingerprint != "unencodable":
                index = len(self.keys)
                ident = memo.query.ident
                query = self._query_index.setdefault(ident, len(self.queries))
                if query == len(self.queries):
                    self.queries.append(ident)
                self.keys.append([query, args])
                if memo.query.is_input:
                    self.inputs.append([index, fingerprint, int(memo.durability)])
        self._index[memo.id] = index
        return index

    def _args(self, memo: Memo) -> list[int] | None:
        """The elements of the key's arguments; None if its query is not the one declared
        under its ident or an argument cannot be encoded."""
        if REGISTRY.get(memo.query.ident) is not memo.query:
            return None
        try:
            return [self._element(value) for value in memo.args]
        except codec.NotEncodable:
            return None

    def _element(self, value: Any) -> int:
        kind = type(value)
        if kind in codec.PLAIN:
            found = self._plain.get((kind, value))
            if found is None:
                found = self._plain[kind, value] = len(self.elements)
                self.elements.append(codec.to_json(value))
            return found
        found = self._by_id.get(id(value))
        if found is None:
            encoded = codec.to_json(value)
            found = self._by_text.setdefault(
                json.dumps(encoded, separators=(",", ":")), len(self.elements)
            )
            if found == len(self.elements):
                self.elements.append(encoded)
            self._by_id[id(value)] = found
        return found


def fingerprint_of(memo: Memo) -> int | str | None:
    """An input's value as a checksum of its encoding; None when unset, ``"unencodable"``
    when the codec does not know it."""
    if memo.value is NO_VALUE and memo.blob is None:
        return None
    blob = store.blob_of(memo, {})
    return "unencodable" if blob is None else blob[1]


# -- merge -------------------------------------------------------------------------------


def merge(db: Database, payload: bytes | memoryview) -> MergeReport:
    meta, ints, values = _parse(payload)
    count = meta["records"]
    if meta["revision"] != db.revision or meta["clock"] != db.clock.changed:
        return MergeReport(0, count, {"other revision": count} if count else {}, meta["left_out"])
    records = _records(ints, count)
    keys = _Keys(db, meta["queries"], meta["keys"], meta["elements"])
    bad = dict(keys.unknown)
    for k, fingerprint, durability in meta["inputs"]:
        if k not in bad and not _same_input(keys.find(k, is_input=True), fingerprint, durability):
            bad[k] = "input differs"
    reasons: dict[str, int] = {}
    installed = without_value = 0
    rev, memo_of, logs = db.revision, keys.memo, db.counters.logs
    for k, value, changed_at, durability, cause, cause_rev, executed_at, deps in records:
        reason = _blocked(bad, k, deps) if bad else None
        held = None if reason else keys.find(k, is_input=False)
        reason = reason or _conflict(held, changed_at, rev)
        if reason == "already valid":
            assert held is not None  # as ``_conflict`` found
            reasons[reason] = reasons.get(reason, 0) + 1
            _adopt_blob(held, values, value)
            continue
        if reason is not None:
            reasons[reason] = reasons.get(reason, 0) + 1
            bad[k] = reason
            continue
        memo = memo_of(k)
        memo.value = NO_VALUE
        memo.blob = None if value[0] < 0 else _blob(values, *value)
        memo.deps = tuple([memo_of(d).id for d in deps])
        memo.changed_at, memo.durability, memo.executed_at = changed_at, durability, executed_at
        memo.cause = cause if cause < 0 or cause in keys.unknown else memo_of(cause).id
        memo.cause_rev = cause_rev
        memo.verified_at = rev
        if logs:
            db.counters.event("executed" if executed_at == rev else "validated", memo)
        installed += 1
        without_value += value[0] < 0
    return MergeReport(installed, count - installed, reasons, meta["left_out"], without_value)


def _blocked(bad: dict[int, str], k: int, deps: list[int]) -> str | None:
    """Why the record of key ``k`` cannot be installed because of an earlier one: its own
    key's or one of its dependencies' reason in ``bad``."""
    return bad.get(k) or next((bad[d] for d in deps if d in bad), None)


def _adopt_blob(memo: Memo, values: memoryview, value: tuple[int, int, int]) -> None:
    """An already valid memo without encoded bytes takes the record's (equal keys verified
    at one revision hold equal values), so saving it encodes nothing."""
    if memo.blob is None and value[0] >= 0:
        memo.blob = _blob(values, *value)


def _same_input(memo: Memo | None, fingerprint: int | str | None, durability: int) -> bool:
    if memo is None:
        return fingerprint is None
    return fingerprint_of(memo) == fingerprint and memo.durability == durability


def _conflict(memo: Memo | None, changed_at: int, rev: int) -> str | None:
    if memo is None or memo.deps is None:  # it never ran here
        return "other history" if changed_at != rev else None
    if memo.verified_at >= rev:
        return "already valid"
    if changed_at != rev and changed_at != memo.changed_at:
        return "other history"
    return None


def _parse(payload: bytes | memoryview) -> tuple[dict[str, Any], list[int], memoryview]:
    """The JSON part, the record integers and the values of a payload (bytes or a view of
    them; the values are checked against their checksum: merged bytes are trusted from then
    on, a save does not check them)."""
    view = memoryview(payload)
    if view[: len(_MAGIC)] != _MAGIC:
        raise ValueError("not an engine merge payload of this format")
    at = len(_MAGIC)
    try:
        meta_end = at + 8 + int.from_bytes(view[at : at + 8], "little")
        meta = json.loads(view[at + 8 : meta_end].tobytes())
        ints_end = meta_end + 8 + int.from_bytes(view[meta_end : meta_end + 8], "little")
        ints = array("q", view[meta_end + 8 : ints_end].tobytes())
    except ValueError as exc:
        raise ValueError(f"corrupt merge payload: {exc}") from None
    if crc32(view[ints_end:]) != meta.get("values"):
        raise ValueError("corrupt merge payload: the values do not match their checksum")
    return meta, ints.tolist(), view[ints_end:]


def _records(ints: list[int], count: int) -> list[Record]:
    """The ``count`` records held in ``ints``: (key, (value offset, length, checksum),
    changed_at, durability, cause, cause_rev, executed_at, dependencies)."""
    out: list[Record] = []
    at = 0
    try:
        for _ in range(count):
            k, offset, length, check, changed_at, durability, cause, cause_rev, executed_at, n = (
                ints[at : at + 10]
            )
            out.append(
                (
                    k,
                    (offset, length, check),
                    changed_at,
                    durability,
                    cause,
                    cause_rev,
                    executed_at,
                    ints[at + 10 : at + 10 + n],
                )
            )
            at += 10 + n
    except ValueError:
        at = -1
    if at != len(ints):
        raise ValueError("corrupt merge payload: the records do not match their count")
    return out


def _blob(values: memoryview, offset: int, length: int, checksum: int) -> tuple[bytes, int]:
    if offset < 0 or offset + length > len(values):
        raise ValueError("corrupt merge payload: value out of range")
    return bytes(values[offset : offset + length]), checksum


class _Keys:
    """The payload's key table resolved against the receiving database (each element
    decoded once, each key looked up once); memos are created only for keys that an
    installed record names."""

    def __init__(
        self, db: Database, queries: list[str], keys: list[list[Any]], elements: list[Json]
    ) -> None:
        self._db = db
        values = [codec.from_json(e) for e in elements]
        found = [REGISTRY.get(ident) for ident in queries]
        self._keys = [(found[query], tuple([values[i] for i in args])) for query, args in keys]
        self._memos: list[Memo | None] = [None] * len(keys)  # the receiver's, once known
        self.unknown = {
            k: "unknown query" for k, (query, _) in enumerate(self._keys) if query is None
        }

    def find(self, k: int, is_input: bool) -> Memo | None:
        """The receiver's memo of key ``k`` (not one of ``unknown``), or None if it has none."""
        query, args = self._keys[k]
        assert query is not None  # ``merge`` skips the keys of ``unknown``
        if query.is_input != is_input:
            raise ValueError(
                f"corrupt merge payload: {query.name} is not "
                f"{'an input' if is_input else 'a derived'} query"
            )
        memo = self._memos[k]
        if memo is None:
            memo = self._memos[k] = self._db.find_memo(query, args)
        return memo

    def memo(self, k: int) -> Memo:
        """The receiver's memo of key ``k`` (not one of ``unknown``), created if it has none."""
        memo = self._memos[k]
        if memo is None:
            query, args = self._keys[k]
            assert query is not None  # ``merge`` skips the keys of ``unknown``
            memo = self._memos[k] = self._db.memo_of(query, args)
        return memo
