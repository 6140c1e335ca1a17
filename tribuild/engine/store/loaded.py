"""A loaded store's graph, kept as the columns it was read as; memos are built on first use.

Terms:
- *key columns*: one value per key id, as read from the graph file: ``query`` (index into the
  query list), ``changed``, ``verified``, ``durability``, ``deps_start`` and ``deps_len``
  (the key's slice of ``deps``, every key's dependencies flattened in key order; length -1:
  no dependency record), ``args_start`` and ``args_len`` (its slice of ``args``, the
  node ids of every key's arguments, see ``argtable``) and ``value`` (entry, -1: none).
  Columns are ``array``s as read (``columns``), no per-key object.
- *entry columns*: per entry, its pack (index into ``packs``), offset, length, checksum.
- *materialise*: build the ``Memo`` of a key id from the columns, once, and put it in
  ``db.memos`` (which holds None for a key not materialised yet). A load creates no per-key
  object, so a build that reads a few keys pays for a few. The memo's blob is its entry's
  bytes with their location (``packs``).
- *index*: per query, the key id of each argument tuple, built on the first lookup by key of
  that query that misses its memo table.
- *as loaded*: a memo holds what its key's columns say (``holds``): what a save would write
  for it is what the graph file has.
Column lengths and ids are checked when loaded, and that the argument slices follow each
other in key order (a save copies them); the graph file's digest guards the rest against
damage.
"""

from __future__ import annotations

from itertools import accumulate

from tribuild.engine.memo import NO_VALUE, Memo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from tribuild.engine.database import Database
    from tribuild.engine.query import Query
    from tribuild.engine.store.packs import PackFile

    Body = dict[str, Any]  # a graph file's JSON part, its columns and argument table merged in

KEY_COLUMNS = (
    "query",
    "changed",
    "verified",
    "durability",
    "deps_start",
    "deps_len",
    "args_start",
    "args_len",
    "value",
)
ENTRY_COLUMNS = ("entry_pack", "entry_offset", "entry_length", "entry_checksum")


class Loaded:
    __slots__ = (
        "queries",
        "elements",
        "flat",
        "arg_ids",
        "packs",
        "text",
        "pruned",
        "origin",
        "revision",
        "_query",
        "_changed",
        "_verified",
        "_durability",
        "_deps_start",
        "_deps_len",
        "_args_start",
        "args_len",
        "_value",
        "_pack",
        "_offset",
        "_length",
        "_checksum",
        "_index",
        "_ids",
    )

    def __init__(
        self,
        queries: list[Query | None],
        body: Body,
        elements: list[Any],
        packs: list[PackFile],
        pruned: bool,
        origin: tuple[str, str],
    ) -> None:
        """``queries``: by index, the queries declared under the store's idents (None: not
        declared in this process; the load dropped their keys); ``body``: the graph file's
        JSON part with its columns and argument table text (``"elements"``); ``elements``:
        the nodes' values (``argtable``); ``packs``: ``PackFile``s; ``pruned``: whether the
        load dropped keys; ``origin``: the store folder and salt id it was read from. Raises
        ValueError when the columns are inconsistent."""
        self.queries = queries
        self.text, self.elements, self.pruned = body["elements"], elements, pruned
        self.origin, self.revision = origin, body["revision"]
        (
            self._query,
            self._changed,
            self._verified,
            self._durability,
            self._deps_start,
            self._deps_len,
            self._args_start,
            self.args_len,
            self._value,
        ) = (body[name] for name in KEY_COLUMNS)
        self.flat, self.arg_ids = list(body["deps"]), list(body["args"])
        # lists: reading an array makes a new int object, a list returns the one it holds
        self._args_start, self.args_len = list(self._args_start), list(self.args_len)
        self._pack, self._offset, self._length, self._checksum = (
            body[name] for name in ENTRY_COLUMNS
        )
        self.packs = packs
        self._index: dict[Query, dict[tuple[Any, ...], int]] = {}
        self._ids: dict[int, list[int]] | None = None
        self._check()

    @property
    def count(self) -> int:
        return len(self._query)

    @property
    def entries(self) -> int:
        return len(self._pack)

    def _check(self) -> None:
        """Lengths and ids (a bad id would fail far from here); the file's digest guards
        the rest against damage."""
        n = self.count
        if any(
            len(column) != n
            for column in (
                self._changed,
                self._verified,
                self._durability,
                self._deps_start,
                self._deps_len,
                self._args_start,
                self.args_len,
                self._value,
            )
        ):
            raise ValueError("graph columns differ in length")
        if not len(self._pack) == len(self._offset) == len(self._length) == len(self._checksum):
            raise ValueError("entry columns differ in length")
        lengths = self.args_len
        if (
            lengths
            and min(lengths) < 0
            or list(accumulate(lengths, initial=0)) != self._args_start + [len(self.arg_ids)]
        ):
            raise ValueError("the argument columns do not list each key's ids in key order")
        for column, bound, what in (
            (self.flat, n, "dependency"),
            (self.arg_ids, len(self.elements), "argument"),
            (self._pack, len(self.packs), "pack"),
            (self._value, len(self._pack), "entry"),
            (self._query, len(self.queries), "query"),
        ):
            if column and (min(column) < (-1 if what == "entry" else 0) or max(column) >= bound):
                raise ValueError(f"{what} id out of range")

    def args_of(self, key_id: int) -> tuple[Any, ...]:
        start, n, nodes, ids = (
            self._args_start[key_id],
            self.args_len[key_id],
            self.elements,
            self.arg_ids,
        )
        if n == 1:
            return (nodes[ids[start]],)
        if n == 2:
            return nodes[ids[start]], nodes[ids[start + 1]]
        return tuple([nodes[i] for i in ids[start : start + n]])

    def memo(self, db: Database, key_id: int) -> Memo:
        """The memo of ``key_id``, materialised if it was not yet (after an edit,
        verification materialises every memo)."""
        memo = db.memos[key_id]
        if memo is not None:
            return memo
        n, start, entry = self._deps_len[key_id], self._deps_start[key_id], self._value[key_id]
        blob = None
        if entry >= 0:
            pack = self.packs[self._pack[entry]]
            if pack.data is not None:
                offset = self._offset[entry]
                blob = (
                    pack.data[offset : offset + self._length[entry]],
                    self._checksum[entry],
                    pack,
                    offset,
                )
        query = self.queries[self._query[key_id]]
        assert query is not None  # the keys of undeclared queries were dropped
        memo = Memo(
            key_id,
            query,
            self.args_of(key_id),
            self._changed[key_id],
            self._verified[key_id],
            self._durability[key_id],
            None if n < 0 else tuple(self.flat[start : start + n]),
            blob,
        )
        db.memos[key_id] = memo
        return memo

    def holds(self, memo: Memo) -> bool:
        """Whether ``memo`` is as loaded: revisions, durability, dependencies and the
        location of its value as its key's columns say."""
        i = memo.id
        n, start, entry, blob = self._deps_len[i], self._deps_start[i], self._value[i], memo.blob
        if (
            memo.changed_at != self._changed[i]
            or memo.durability != self._durability[i]
            or not memo.query.is_input
            and memo.verified_at != self._verified[i]
        ):
            return False
        if memo.deps != (None if n < 0 else tuple(self.flat[start : start + n])):
            return False
        if entry < 0:
            return blob is None and memo.value is NO_VALUE
        return (
            blob is not None
            and len(blob) == 4
            and blob[2] is self.packs[self._pack[entry]]
            and blob[3] == self._offset[entry]
        )

    def find(self, db: Database, query: Query, args: tuple[Any, ...]) -> Memo | None:
        """The memo of a stored key, or None if the store does not hold it."""
        index = self._index.get(query)
        if index is None:
            index = self._index[query] = self._build_index(query)
        key_id = index.get(args)
        return None if key_id is None else self.memo(db, key_id)

    def _build_index(self, query: Query) -> dict[tuple[Any, ...], int]:
        if self._ids is None:
            self._ids = {}
            for key_id, qi in enumerate(self._query):
                self._ids.setdefault(qi, []).append(key_id)
        ids = [i for qi, q in enumerate(self.queries) if q is query for i in self._ids.get(qi, ())]
        return {self.args_of(i): i for i in ids}


def without(body: Body, dropped: set[int]) -> Body:
    """``body`` without the keys in ``dropped`` (none of which a kept key depends on), key ids
    renumbered."""
    kept = [i for i in range(len(body["query"])) if i not in dropped]
    new_id = {old: new for new, old in enumerate(kept)}
    out = dict(body)
    for name in KEY_COLUMNS:
        out[name] = [body[name][i] for i in kept]
    out["deps"] = [new_id[d] for d in _flatten(body, "deps", kept)]
    out["args"] = _flatten(body, "args", kept)
    out["deps_start"], out["args_start"] = starts(out["deps_len"]), starts(out["args_len"])
    return out


def _flatten(body: Body, name: str, keys: list[int]) -> list[int]:
    flat, begin, length = body[name], body[f"{name}_start"], body[f"{name}_len"]
    return [x for i in keys for x in flat[begin[i] : begin[i] + max(length[i], 0)]]


def starts(lengths: Iterable[int]) -> list[int]:
    """Where each key's slice of a flattened column starts (length -1: none)."""
    out = list(accumulate((n if n > 0 else 0 for n in lengths), initial=0))
    out.pop()
    return out


def deps_of(body: Body) -> list[tuple[int, ...] | None]:
    """Each key's dependencies (None: no record)."""
    flat, begin = body["deps"], body["deps_start"]
    return [
        None if n < 0 else tuple(flat[begin[i] : begin[i] + n])
        for i, n in enumerate(body["deps_len"])
    ]
