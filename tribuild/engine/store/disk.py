"""The on-disk store: a database's graph, input values and derived values.

Terms:
- *salt*: the caller's digest of tribuild's source and options. Its hash (with the format
  version) names every file, and the full salt is checked inside the graph file, so stores of
  other versions or options are never read.
- *graph file* ``graph-<salt id>.json``: a header line ``TRIBUILD-ENGINE <format> <digest>``,
  then the 8-byte length of a JSON part (revision, per-durability clock, query idents, the
  packs used, the column layout), the integer columns (see ``columns``; key and entry
  columns as in ``loaded``) and the argument table's text (``argtable``). A load keeps the
  columns and builds memos from them on first use (``loaded``).
- *pack*: an append-only file of encoded values (``packs``); a save writes only the values
  not already in a pack it keeps, and the graph file lists each entry's pack and place.
- *lazy value*: after a load, a memo holds its entry's bytes (``memo.blob``) and decodes them
  on first use. An entry that fails its checksum or does not decode is dropped (the memo
  forgets its value and re-runs when the value is needed) and reported once.
- *kept store*: a save of a database that holds what it was loaded from this store, whole
  (``_as_loaded``: nothing dropped, damaged or missing at load, no key added, no input
  changed, every memo used since as loaded) writes nothing and touches the graph file (its
  mtime is the generation's *last used*). A rebuild that found everything up to date, or a
  second ``tribuild.driver`` call in a notebook, then costs no save (0.13 s for the 50-file
  benchmark project). Keeping a store is always safe: it is a whole store of the sources
  as they were, which the next load re-validates against the sources as they are.
Files are written to a temporary file, fsynced and renamed into place, the new pack first,
then the graph file, and the folder is fsynced (one fsync makes both renames durable; a
pack rename lost with a power cut would be a missing pack: values recomputed); packs of the
salt the graph file no longer lists are deleted last, so a build killed at any step leaves
the previous store or the new one, whole.
"""

from __future__ import annotations

import json
import os

from tribuild.base.files import OWN_FILE_BYTES, listdir, read_regular, remove_entry, unlink
from tribuild.base.gcpause import paused
from tribuild.base.hashing import checksum, digest
from tribuild.base.record import record
from tribuild.base.tempname import replace
from tribuild.engine.durability import DurabilityClock
from tribuild.engine.errors import warn
from tribuild.engine.memo import NO_VALUE, Memo
from tribuild.engine.query import REGISTRY
from tribuild.engine.store import argtable, codec, columns, packs
from tribuild.engine.store.loaded import Loaded, deps_of, starts, without

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import MutableSequence, Sequence
    from typing import Any

    from tribuild.engine.database import Database
    from tribuild.engine.store.helper import Helper, Prefix
    from tribuild.engine.store.loaded import Body
    from tribuild.engine.store.packs import Blob, PackFile, Placement

    ArgColumns = dict[str, MutableSequence[int]]  # ``args_len`` and ``args``

FORMAT = 6
_MAGIC = b"TRIBUILD-ENGINE"


class LoadReport:
    """``status``: new, loaded, missing, other-salt or corrupt. ``problems`` grows as lazy
    values fail to decode."""

    __slots__ = ("status", "reason", "keys", "problems")

    def __init__(self, status: str, reason: str, keys: int = 0) -> None:
        self.status, self.reason, self.keys = status, reason, keys
        self.problems: list[str] = []

    def problem(self, message: str) -> None:
        self.problems.append(message)
        warn(message)


@record
class SaveReport:
    keys: int
    values: int  # entries the graph file lists (live or dead, ``packs``)
    bytes: int  # what this save wrote: the graph file and the new pack
    unencodable: dict[str, int]  # query name -> values not stored (the key itself is kept)
    dropped_keys: int  # keys with unencodable args or unknown queries, + dependents


def salt_id(salt: str) -> str:
    return digest(f"{FORMAT}\0{salt}".encode())[:16]


def graph_name(sid: str) -> str:
    return f"graph-{sid}.json"


def graph_sid(name: str) -> str | None:
    """The salt id of a graph file's name; None for any other name."""
    if name.startswith("graph-") and name.endswith(".json"):
        return name[len("graph-") : -len(".json")]
    return None


# -- save --------------------------------------------------------------------------------


def save(db: Database, path: str | os.PathLike[str], salt: str) -> SaveReport:
    helper, db.helper = db.helper, None
    root = os.fspath(path)
    try:
        if helper is None and _as_loaded(db, root, salt) and _touch(root, salt):
            assert db.loaded is not None  # as ``_as_loaded`` found
            return SaveReport(len(db.memos), db.loaded.entries, 0, {}, 0)
        return _save(db, root, salt, helper)
    finally:
        if helper is not None:  # its exit is waited for last (``apart.Helper.end``)
            helper.end()


def _as_loaded(db: Database, root: str, salt: str) -> bool:
    """Whether ``db`` holds the store at ``root`` it was loaded from, unchanged (a kept
    store)."""
    loaded = db.loaded
    return (
        loaded is not None
        and loaded.origin == (root, salt_id(salt))
        and not loaded.pruned
        and not db.store_report.problems
        and len(db.memos) == loaded.count
        and db.revision == loaded.revision
        and all(p.unchanged() for p in loaded.packs)
        and all(m is None or loaded.holds(m) for m in db.memos)
    )


def _touch(root: str, salt: str) -> bool:
    """Mark the graph file used now; False if it is gone."""
    try:
        os.utime(os.path.join(root, graph_name(salt_id(salt))))
    except FileNotFoundError:
        return False
    return True


def _save(db: Database, root: str, salt: str, helper: Helper | None) -> SaveReport:
    """``save``, with the argument table made by ``helper`` (``apart``) or here (None)."""
    os.makedirs(root, exist_ok=True)
    sid = salt_id(salt)
    unencodable: dict[str, int] = {}
    wrote = 0  # bytes of new packs written
    with paused():
        memos = db.every_memo()
        if helper is None:
            table, args, kept, dropped = _table(memos, db.loaded, None)
            placed = _place(db, kept, unencodable, root, sid)
            meta, layout, int_bytes = _graph_columns(db, kept, dropped, placed)
        else:  # the helper makes the table meanwhile (``apart``),
            placed = _place(db, memos, unencodable, root, sid)  # so the rest comes first
            meta, layout, int_bytes = _graph_columns(db, memos, set(), placed)
            wrote = _write_pack(placed)
            table, args, kept, dropped = _table(memos, db.loaded, helper.result())
            if dropped:  # rare: place the kept values only, as without a helper,
                unencodable, wrote = {}, 0  # in a pack without the others
                _unwrite_pack(placed)
                placed = _place(db, kept, unencodable, root, sid)
                meta, layout, int_bytes = _graph_columns(db, kept, dropped, placed)
        arg_layout, arg_bytes = columns.pack(args | {"args_start": starts(args["args_len"])})
        text = table.text()
    wrote += _write_pack(placed)
    meta_json = json.dumps(
        meta
        | {
            "salt": salt,
            "packs": [[p.name] + p.stamp for p in placed.packs],
            "layout": layout + arg_layout,
        },
        separators=(",", ":"),
    ).encode()
    body = b"".join([len(meta_json).to_bytes(8, "little"), meta_json, int_bytes, arg_bytes, text])
    graph = b"%s %d %s\n" % (_MAGIC, FORMAT, digest(body).encode()) + body
    write_atomic(os.path.join(root, graph_name(sid)), graph)
    names = {p.name for p in placed.packs}
    for old in listdir(root):
        if packs.pack_name(sid, old) and old not in names:
            remove_entry(os.path.join(root, old))
    return SaveReport(
        len(kept),
        len(placed.entries["entry_offset"]),
        len(graph) + wrote,
        unencodable,
        len(dropped),
    )


def _write_pack(placed: Placement) -> int:
    """Write the new pack of ``placed`` if it has one not written yet (made durable by the
    graph file's folder fsync); the bytes written."""
    if placed.new is None or placed.new.data is not None:
        return 0
    return packs.write(placed)


def _unwrite_pack(placed: Placement) -> None:
    """Delete the new pack ``_write_pack`` wrote (a placement made again copies its values
    out of it)."""
    if placed.new is not None and placed.new.data is not None:
        unlink(placed.new.path)


def _place(
    db: Database, memos: list[Memo], unencodable: dict[str, int], root: str, sid: str
) -> Placement:
    return packs.place(
        memos,
        [blob_of(m, unencodable) for m in memos],
        root,
        sid,
        db.loaded.packs if db.loaded else [],
    )


def _table(
    memos: list[Memo], loaded: Loaded | None, prefix: Prefix | None
) -> tuple[argtable.Writer, ArgColumns, list[Memo], set[int]]:
    """The node table and the argument columns of the memos kept, the memos kept and the
    ids of those dropped (``arguments``; ``prefix``: a helper's, or None)."""
    table, args, seeds = arguments(memos, loaded, prefix)
    dropped = _with_dependents([m.deps for m in memos], seeds) if seeds else seeds
    kept = [m for m in memos if m.id not in dropped] if dropped else memos
    if dropped or loaded is not None and loaded.pruned:
        table, args, _ = arguments(kept, None)  # a table without orphaned nodes
    return table, args, kept, dropped


def arguments(
    memos: list[Memo], loaded: Loaded | None, prefix: Prefix | None = None
) -> tuple[argtable.Writer, ArgColumns, set[int]]:
    """The node table, the ``args_len`` and ``args`` columns of ``memos`` (listed by key id)
    and the *seeds* of the keys to drop: those whose query is not the one declared under its
    ident or whose arguments cannot be encoded (their dependents go too). The keys
    ``loaded`` holds come first and keep their node ids: their columns are copied
    (``Loaded`` checked that they list each key's ids in key order); the other keys' nodes
    are looked up or added in the table. A helper's ``prefix`` (``apart``) stands for the
    first keys in the same way."""
    lengths: MutableSequence[int]
    flat: MutableSequence[int]
    if prefix is not None:
        table = argtable.Writer(prefix.text, prefix.nodes)
        carried, lengths, flat = prefix.keys, prefix.args_len, prefix.args
        seeds = set(prefix.seeds)
    else:
        table = argtable.Writer(loaded.text, len(loaded.elements)) if loaded else argtable.Writer()
        carried = loaded.count if loaded is not None else 0
        lengths, flat = (
            (loaded.args_len[:], loaded.arg_ids[:]) if carried and loaded is not None else ([], [])
        )
        seeds = set()
    wrong = {q for q in {m.query for m in memos} if REGISTRY.get(q.ident) is not q}
    if wrong:
        seeds |= {m.id for m in memos if m.query in wrong}
    for m in memos[carried:]:
        ids = None if m.query in wrong else table.ids(m.args)
        if ids is None:
            seeds.add(m.id)
            ids = []
        lengths.append(len(ids))
        flat.extend(ids)
    return table, {"args_len": lengths, "args": flat}, seeds


def _graph_columns(
    db: Database, kept: list[Memo], dropped: set[int], placed: Placement
) -> tuple[dict[str, Any], list[list[object]], bytes]:
    """The JSON part (revision, clock, query idents) of the graph of the kept memos and its
    integer columns but the arguments, packed (``columns``): layout and bytes."""
    meta, ints = _columns(db, kept, dropped)
    ints["deps_start"] = starts(ints["deps_len"])
    return meta, *columns.pack(ints | {"value": placed.values} | placed.entries)


def _columns(
    db: Database, kept: list[Memo], dropped: set[int]
) -> tuple[dict[str, Any], dict[str, list[int]]]:
    """The graph of the kept memos, with key ids renumbered: the JSON part and the integer
    columns but the values, the arguments and the starts. ``deps`` are flattened:
    ``deps_len`` is -1 for a key without a dependency record (inputs, queries that never
    completed)."""
    queries = {m.query: None for m in kept}
    query_index = {q: i for i, q in enumerate(queries)}
    new_id = {m.id: i for i, m in enumerate(kept)} if dropped else None
    flat: list[int] = []
    for m in kept:
        if m.deps:
            flat.extend(m.deps if new_id is None else [new_id[d] for d in m.deps])
    meta = {
        "revision": db.revision,
        "clock": db.clock.changed,
        "queries": [q.ident for q in queries],
    }
    ints = {
        "query": [query_index[m.query] for m in kept],
        "changed": [m.changed_at for m in kept],
        "verified": [-1 if m.query.is_input else m.verified_at for m in kept],
        "durability": [int(m.durability) for m in kept],
        "deps_len": [-1 if m.deps is None else len(m.deps) for m in kept],
        "deps": flat,
    }
    return meta, ints


def _with_dependents(deps: Sequence[tuple[int, ...] | None], seeds: set[int]) -> set[int]:
    """``seeds`` and every key that depends on one of them, transitively; ``deps[i]`` is
    the dependency list of key ``i`` (None for inputs)."""
    if not seeds:
        return seeds
    dependents: dict[int, list[int]] = {}
    for user, ids in enumerate(deps):
        for d in ids or ():
            dependents.setdefault(d, []).append(user)
    todo, out = list(seeds), set(seeds)
    while todo:
        for user in dependents.get(todo.pop(), ()):
            if user not in out:
                out.add(user)
                todo.append(user)
    return out


def blob_of(memo: Memo, unencodable: dict[str, int]) -> Blob | None:
    """The memo's encoded value and its checksum (cached on the memo), or None. Bytes taken
    from a merge payload were checked when merged (``merge``); bytes loaded from a pack are
    checked with their pack (``packs``)."""
    blob = memo.blob
    if blob is None and memo.value is not NO_VALUE:
        memo.blob = packs.encoded(memo.value)
        if memo.blob is None:
            name = memo.query.name
            unencodable[name] = unencodable.get(name, 0) + 1
    return memo.blob


def write_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file, fsync it, rename it to ``path`` and fsync the
    folder (the rename is durable)."""
    replace(path, data, sync=True)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# -- load --------------------------------------------------------------------------------


def load(db: Database, path: str | os.PathLike[str], salt: str) -> None:
    """Fill the empty ``db`` from the store at ``path``; on any problem leave it empty and
    say why in ``db.store_report``."""
    root = os.fspath(path)
    sid = salt_id(salt)
    name = graph_name(sid)
    try:
        raw = read_regular(os.path.join(root, name), OWN_FILE_BYTES)
    except FileNotFoundError:
        others = [n for n in listdir(root) if graph_sid(n) is not None]
        db.store_report = LoadReport(
            "other-salt" if others else "missing",
            "the store holds only other salts or versions" if others else f"no store at {root}",
        )
        return
    except OSError as exc:  # a link, a FIFO, a folder, a huge file: damage, replaced by the save
        db.store_report = LoadReport("corrupt", f"corrupt graph file {name}: {exc.strerror}")
        warn(db.store_report.reason)
        return
    try:
        with paused():
            body = read_graph(raw)
            if body.get("salt") != salt:
                db.store_report = LoadReport("other-salt", "the graph file is for another salt")
                return
            listed = pack_list(body, sid)
            files = packs.read(root, listed, body)
            unknown = _fill(db, body, files, (root, sid))
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        db.store_report = LoadReport("corrupt", f"corrupt graph file {name}: {exc}")
        warn(db.store_report.reason)
        return
    db.store_report = LoadReport("loaded", f"loaded {len(db.memos)} keys", len(db.memos))
    if unknown:
        db.store_report.problem(
            f"dropped {unknown} keys of queries not declared in this "
            "process or with undecodable arguments, with their dependents"
        )
    for pack in files:
        if pack.data is None:
            db.store_report.problem(
                f"value pack {pack.name} is missing; values will be recomputed when needed"
            )


def read_graph(raw: bytes) -> Body:
    """The graph file's JSON part with its integer columns and its argument table text
    (``"elements"``) merged in; ValueError when damaged."""
    header, _, body = raw.partition(b"\n")
    parts = header.split(b" ")
    if len(parts) != 3 or parts[0] != _MAGIC or parts[1] != str(FORMAT).encode():
        raise ValueError("bad header")
    if parts[2].decode() != digest(body):
        raise ValueError("checksum mismatch")
    meta_len = int.from_bytes(body[:8], "little")
    meta: dict[str, Any] = json.loads(body[8 : 8 + meta_len])
    start = 8 + meta_len
    end = start + columns.size(meta["layout"])
    if end > len(body):
        raise ValueError("the columns are truncated")
    ints = columns.unpack(meta["layout"], memoryview(body)[start:end])
    return meta | ints | {"elements": body[end:]}


def pack_list(body: Body, sid: str) -> list[list[Any]]:
    """The graph file's ``[name, size, mtime_ns]`` per pack, checked: a pack is a file of
    this salt in the store folder (no other path is ever opened)."""
    listed: list[list[Any]] = body["packs"]
    for row in listed:
        if (
            type(row) is not list
            or len(row) != 3
            or not packs.pack_name(sid, row[0])
            or type(row[1]) is not int
            or type(row[2]) is not int
        ):
            raise ValueError(f"bad pack name {row!r}")
    return listed


def _fill(db: Database, body: Body, files: list[PackFile], origin: tuple[str, str]) -> int:
    """Point the empty ``db`` at the columns of ``body`` (memos are built on first use);
    returns how many keys were dropped because their query is not declared in this process or
    their arguments do not decode (or because they depend on such a key)."""
    queries = [REGISTRY.get(ident) for ident in body["queries"]]
    elements, bad = argtable.decode(body["elements"])
    seeds: set[int] = set()
    if None in queries:
        seeds |= {i for i, qi in enumerate(body["query"]) if queries[qi] is None}
    if bad:
        ids, begin = body["args"], body["args_start"]
        seeds |= {
            i
            for i, n in enumerate(body["args_len"])
            if not bad.isdisjoint(ids[begin[i] : begin[i] + n])
        }
    unknown: set[int] = set()
    if seeds:
        unknown = _with_dependents(deps_of(body), seeds)
        body = without(body, unknown)
    graph = Loaded(queries, body, elements, files, bool(unknown), origin)
    db.memos, db.tables, db.loaded = [None] * graph.count, {}, graph
    db.revision, db.clock = body["revision"], DurabilityClock(body["clock"])
    return len(unknown)


def restore(db: Database, memo: Memo, admit: bool) -> bool:
    """Decode a lazy value into ``memo.value``; False if there is none or it is corrupt."""
    if memo.blob is None:
        return False
    data, expected = memo.blob[0], memo.blob[1]
    try:
        if checksum(data) != expected:
            raise codec.CodecError("checksum mismatch")
        memo.value = codec.decode(data)
    except codec.CodecError as exc:
        memo.blob = None
        db.store_report.problem(f"dropped the stored value of {memo.label()}: {exc}")
        return False
    if admit and memo.query.lru:
        db.lru.admit(memo, db.memos)
    return True
