"""A loaded store's graph, kept as the columns it was read as; memos are built on first use.

Terms:
- *key columns*: one value per key id, as read from the graph file: ``query`` (index into the
  query list), ``changed``, ``verified``, ``durability``, ``deps_start`` and ``deps_len``
  (the key's slice of ``deps``, every key's dependencies flattened in key order; length -1:
  no dependency record) and ``value`` (pack entry, -1: none); ``args`` holds each key's
  encoded arguments. Columns are ``array('q')`` as read (``columns``), no per-key object.
- *materialise*: build the ``Memo`` of a key id from the columns, once, and put it in
  ``db._memos`` (which holds None for a key not materialised yet). A load creates no per-key
  object, so a build that reads a few keys pays for a few.
- *index*: per query, the key id of each argument tuple, built on the first lookup by key of
  that query that misses its memo table.
Column lengths and dependency ids are checked when loaded; the graph file's digest guards
the rest against damage.
"""
from __future__ import annotations

from . import codec
from .memo import Memo

KEY_COLUMNS = ("query", "changed", "verified", "durability", "deps_start", "deps_len", "value")


def decode_args(encoded) -> tuple:
    """A key's arguments from the store's encoding (see ``store.encode_args``)."""
    return tuple(encoded) if type(encoded) is list else codec.from_json(encoded["$a"])


class Loaded:
    __slots__ = ("queries", "args", "flat", "pack", "_query", "_changed", "_verified",
                 "_durability", "_deps_start", "_deps_len", "_value", "_offset", "_length",
                 "_checksum", "_index", "_ids")

    def __init__(self, queries: list, body: dict, pack: bytes | None):
        """``body``: the graph file's JSON part with its columns. Raises ValueError when the
        columns are inconsistent."""
        self.queries = queries
        self.args = body["args"]
        self._query, self._changed, self._verified, self._durability, self._deps_start, \
            self._deps_len, self._value = (body[name] for name in KEY_COLUMNS)
        self.flat = body["deps"]
        self._offset, self._length, self._checksum = \
            body["entry_offset"], body["entry_length"], body["entry_checksum"]
        self.pack = pack
        self._index: dict = {}
        self._ids: dict | None = None
        self._check()

    @property
    def count(self) -> int:
        return len(self._query)

    def _check(self) -> None:
        """Lengths and dependency ids (a bad id would fail far from here); the file's digest
        guards the rest against damage."""
        n = self.count
        if any(len(column) != n for column in (self.args, self._changed, self._verified,
                                               self._durability, self._deps_start,
                                               self._deps_len, self._value)):
            raise ValueError("graph columns differ in length")
        if not len(self._offset) == len(self._length) == len(self._checksum):
            raise ValueError("entry columns differ in length")
        if self.flat and (min(self.flat) < 0 or max(self.flat) >= n):
            raise ValueError("dependency id out of range")

    def memo(self, db, key_id: int) -> Memo:
        """The memo of ``key_id``, materialised if it was not yet (one function, no calls
        but the constructor's: after an edit, verification materialises every memo)."""
        memo = db._memos[key_id]
        if memo is not None:
            return memo
        args = self.args[key_id]
        n, start, entry = self._deps_len[key_id], self._deps_start[key_id], self._value[key_id]
        blob = None
        if entry >= 0 and self.pack is not None:
            offset = self._offset[entry]
            blob = self.pack[offset:offset + self._length[entry]], self._checksum[entry]
        memo = Memo(key_id, self.queries[self._query[key_id]],
                    tuple(args) if type(args) is list else decode_args(args),
                    self._changed[key_id], self._verified[key_id], self._durability[key_id],
                    None if n < 0 else tuple(self.flat[start:start + n]), blob)
        db._memos[key_id] = memo
        return memo

    def find(self, db, query, args: tuple) -> Memo | None:
        """The memo of a stored key, or None if the store does not hold it."""
        index = self._index.get(query)
        if index is None:
            index = self._index[query] = self._build_index(query)
        key_id = index.get(args)
        return None if key_id is None else self.memo(db, key_id)

    def _build_index(self, query) -> dict:
        if self._ids is None:
            self._ids = {}
            for key_id, qi in enumerate(self._query):
                self._ids.setdefault(qi, []).append(key_id)
        ids = [i for qi, q in enumerate(self.queries) if q is query
               for i in self._ids.get(qi, ())]
        return {decode_args(self.args[i]): i for i in ids}


def without(body: dict, deps_of: list, dropped: set[int]) -> dict:
    """``body`` without the keys in ``dropped`` (none of which a kept key depends on), key ids
    renumbered."""
    kept = [i for i in range(len(deps_of)) if i not in dropped]
    new_id = {old: new for new, old in enumerate(kept)}
    out = dict(body)
    for name in KEY_COLUMNS + ("args",):
        column = body[name]
        out[name] = [column[i] for i in kept]
    out["deps"] = [new_id[d] for i in kept for d in deps_of[i] or ()]
    out["deps_start"] = deps_starts(out["deps_len"])
    return out


def deps_starts(lengths) -> list[int]:
    """Where each key's slice of the flattened dependencies starts."""
    starts, pos = [], 0
    for n in lengths:
        starts.append(pos)
        pos += max(n, 0)
    return starts


def split_deps(lengths, flat) -> list[tuple[int, ...] | None]:
    """Each key's dependencies from the flattened column (None: no record)."""
    out, pos = [], 0
    for n in lengths:
        if n < 0:
            out.append(None)
        else:
            out.append(tuple(flat[pos:pos + n]))
            pos += n
    if pos != len(flat):
        raise ValueError("dependency column length mismatch")
    return out
