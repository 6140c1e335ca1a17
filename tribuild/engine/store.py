"""The on-disk store: a database's graph, input values and derived values.

Terms:
- *salt*: the caller's digest of tribuild's source and options. Its hash (with the format
  version) names every file, and the full salt is checked inside the graph file, so stores of
  other versions or options are never read.
- *graph file* ``graph-<salt id>.json``: a header line ``TRIBUILD-ENGINE <format> <digest>``,
  then the 8-byte length of a JSON part (revision, per-durability clock, query idents, each
  key's encoded args, the column layout) and the integer columns (see ``columns``), one
  entry per key: query index, changed_at, verified_at, durability, the start and length of
  its deps in the flattened deps column, and the index of the value's entry (-1: not
  stored), then the entries' offsets, lengths and checksums. A load keeps the columns and
  builds memos from them on first use (``loaded``).
- *pack* ``values-<salt id>-<pack digest>.pack``: the encoded values, one *entry* per distinct
  content (content-addressed: equal values share it), listed in the graph file by offset,
  length and checksum. An entry is checked against its checksum when first decoded.
- *lazy value*: after a load, a memo holds its entry's bytes (``memo.blob``) and decodes them
  on first use. An entry that fails its checksum or does not decode is dropped (the memo
  forgets its value and re-runs when the value is needed) and reported once.
Files are written to a temporary file, fsynced and renamed into place, pack first.
"""
from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..record import record
from . import codec, columns
from .durability import DurabilityClock
from .loaded import Loaded, decode_args, deps_starts, split_deps, without
from .memo import NO_VALUE, Memo
from .query import REGISTRY

FORMAT = 3
_MAGIC = b"TRIBUILD-ENGINE"
log = logging.getLogger("tribuild.engine")


@dataclass
class LoadReport:
    """``status``: new, loaded, missing, other-salt or corrupt. ``problems`` grows as lazy
    values fail to decode."""
    status: str
    reason: str
    keys: int = 0
    problems: list[str] = field(default_factory=list)

    def problem(self, message: str) -> None:
        self.problems.append(message)
        log.warning("engine store: %s", message)


@record
class SaveReport:
    keys: int
    values: int
    bytes: int
    unencodable: dict[str, int]   # query name -> values not stored (the key itself is kept)
    dropped_keys: int             # keys with unencodable args or unknown queries, + dependents


def digest(data: bytes) -> str:
    """Names files and checks the graph file."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def checksum(data: bytes) -> int:
    """Checks one pack entry (entries are deduplicated by their bytes, not by this)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def salt_id(salt: str) -> str:
    return digest(f"{FORMAT}\0{salt}".encode())[:16]


# -- save --------------------------------------------------------------------------------

def save(db, path, salt: str) -> SaveReport:
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    sid = salt_id(salt)
    with _gc_paused():
        memos = db._every_memo()
        args = [encode_args(m) for m in memos]
        dropped = _with_dependents([m.deps for m in memos],
                                   {i for i, a in enumerate(args) if a is None})
        kept = [m for m in memos if m.id not in dropped] if dropped else memos
        pack, values, entries, unencodable = _pack_values(kept)
        pack_name = f"values-{sid}-{digest(pack)}.pack"
        meta, ints = _columns(db, kept, args, dropped)
        ints |= {"value": values, "entry_offset": entries[0], "entry_length": entries[1],
                 "entry_checksum": entries[2]}
        layout, int_bytes = columns.pack(ints)
        meta = json.dumps(meta | {"salt": salt, "pack": pack_name, "layout": layout},
                          separators=(",", ":")).encode()
        body = len(meta).to_bytes(8, "little") + meta + int_bytes
    if not (root / pack_name).exists():
        write_atomic(root / pack_name, pack)
    graph = b"%s %d %s\n" % (_MAGIC, FORMAT, digest(body).encode()) + body
    write_atomic(root / f"graph-{sid}.json", graph)
    for old in root.glob(f"values-{sid}-*.pack"):
        if old.name != pack_name:
            old.unlink(missing_ok=True)
    return SaveReport(len(kept), len(entries[0]), len(pack) + len(graph), unencodable,
                      len(dropped))


def _columns(db, kept: list[Memo], args: list, dropped: set[int]) -> tuple[dict, dict]:
    """The graph of the kept memos, with key ids renumbered: the JSON part (revision, clock,
    query idents, args) and the integer columns. ``deps`` are flattened: ``deps_len`` is -1
    for a key without a dependency record (inputs, queries that never completed)."""
    queries = {m.query: None for m in kept}
    query_index = {q: i for i, q in enumerate(queries)}
    new_id = {m.id: i for i, m in enumerate(kept)} if dropped else None
    flat: list[int] = []
    for m in kept:
        if m.deps:
            flat.extend(m.deps if new_id is None else [new_id[d] for d in m.deps])
    meta = {"revision": db._revision, "clock": db._clock.changed,
            "queries": [q.ident for q in queries], "args": [args[m.id] for m in kept]}
    ints = {
        "query": [query_index[m.query] for m in kept],
        "changed": [m.changed_at for m in kept],
        "verified": [-1 if m.query.is_input else m.verified_at for m in kept],
        "durability": [int(m.durability) for m in kept],
        "deps_len": [-1 if m.deps is None else len(m.deps) for m in kept],
        "deps": flat,
    }
    ints["deps_start"] = deps_starts(ints["deps_len"])
    return meta, ints


def _pack_values(kept: list[Memo]):
    """The pack of the kept memos' values: its bytes, each memo's entry index (-1: none),
    the entries' offsets, lengths and digests, and the count of unencodable values."""
    index: dict[bytes, int] = {}
    checksums: list[int] = []
    offsets: list[int] = []
    lengths: list[int] = []
    unencodable: dict[str, int] = {}
    values = []
    offset = 0
    for m in kept:
        blob = blob_of(m, unencodable)
        if blob is None:
            values.append(-1)
            continue
        data, check = blob
        entry = index.get(data)
        if entry is None:
            entry = index[data] = len(checksums)
            checksums.append(check)
            offsets.append(offset)
            lengths.append(len(data))
            offset += len(data)
        values.append(entry)
    return b"".join(index), values, (offsets, lengths, checksums), unencodable


@contextmanager
def _gc_paused():
    """Building or parsing 100k small objects triggers many useless full collections."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def encode_args(memo: Memo):
    """The key's args as a JSON list when they are all plain scalars (decoded by ``tuple``
    alone: the common case, kept fast for loading), else ``{"$a": encoding}``; None when the
    key cannot be stored. ``loaded.decode_args`` is the inverse."""
    if REGISTRY.get(memo.query.ident) is not memo.query:
        return None
    try:
        encoded = codec.to_json(memo.args)
    except codec.NotEncodable:
        return None
    if any(type(v) is list or type(v) is dict for v in encoded):
        return {"$a": encoded}
    return encoded


def _with_dependents(deps_of: list, seeds: set[int]) -> set[int]:
    """``seeds`` and every key that depends on one of them, transitively; ``deps_of[i]`` is
    the dependency list of key ``i`` (None for inputs)."""
    if not seeds:
        return seeds
    dependents: dict[int, list[int]] = {}
    for user, deps in enumerate(deps_of):
        for d in deps or ():
            dependents.setdefault(d, []).append(user)
    todo, out = list(seeds), set(seeds)
    while todo:
        for user in dependents.get(todo.pop(), ()):
            if user not in out:
                out.add(user)
                todo.append(user)
    return out


def blob_of(memo: Memo, unencodable: dict[str, int]):
    """The memo's encoded value and its checksum (cached on the memo), or None. Bytes carried
    from a loaded store or a merge and never decoded are checked against their checksum first:
    a damaged entry is dropped (its key keeps its dependencies and re-runs when read), never
    carried into a new store."""
    if memo.blob is not None and memo.value is NO_VALUE and checksum(memo.blob[0]) != memo.blob[1]:
        log.warning("engine store: dropped a damaged value of %s", memo.query.name)
        memo.blob = None
        return None
    if memo.blob is None and memo.value is not NO_VALUE:
        try:
            data = codec.encode(memo.value)
        except codec.NotEncodable:
            name = memo.query.name
            unencodable[name] = unencodable.get(name, 0) + 1
            return None
        memo.blob = (data, checksum(data))
    return memo.blob


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


# -- load --------------------------------------------------------------------------------

def load(db, path, salt: str) -> None:
    """Fill the empty ``db`` from the store at ``path``; on any problem leave it empty and
    say why in ``db.store_report``."""
    root = Path(path)
    sid = salt_id(salt)
    graph_path = root / f"graph-{sid}.json"
    try:
        raw = graph_path.read_bytes()
    except FileNotFoundError:
        others = list(root.glob("graph-*.json")) if root.is_dir() else []
        db.store_report = LoadReport("other-salt" if others else "missing",
                                     "the store holds only other salts or versions" if others
                                     else f"no store at {root}")
        return
    try:
        with _gc_paused():
            body = _check_header(raw)
        if body.get("salt") != salt:
            db.store_report = LoadReport("other-salt", "the graph file is for another salt")
            return
        pack_name = body["pack"]
        if not (pack_name.startswith(f"values-{sid}-") and pack_name.endswith(".pack")
                and "/" not in pack_name and "\\" not in pack_name):
            raise ValueError(f"bad pack name {pack_name!r}")
        pack = _read_pack(root / pack_name)
        with _gc_paused():
            unknown = _fill(db, body, pack)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        db.store_report = LoadReport("corrupt", f"corrupt graph file {graph_path.name}: {exc}")
        log.warning("engine store: %s", db.store_report.reason)
        return
    db.store_report = LoadReport("loaded", f"loaded {len(db._memos)} keys", len(db._memos))
    if unknown:
        db.store_report.problem(f"dropped {unknown} keys of queries not declared in this "
                                "process or with undecodable arguments, with their dependents")
    if pack is None:
        db.store_report.problem(f"value pack {pack_name} is missing; values will be "
                                "recomputed when needed")


def _check_header(raw: bytes) -> dict:
    """The graph file's JSON part with its integer columns merged in."""
    header, _, body = raw.partition(b"\n")
    parts = header.split(b" ")
    if len(parts) != 3 or parts[0] != _MAGIC or parts[1] != str(FORMAT).encode():
        raise ValueError("bad header")
    if parts[2].decode() != digest(body):
        raise ValueError("checksum mismatch")
    meta_len = int.from_bytes(body[:8], "little")
    meta = json.loads(body[8:8 + meta_len])
    return meta | columns.unpack(meta["layout"], memoryview(body)[8 + meta_len:])


def _read_pack(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _fill(db, body: dict, pack: bytes | None) -> int:
    """Point the empty ``db`` at the columns of ``body`` (memos are built on first use);
    returns how many keys were dropped because their query is not declared in this process or
    their arguments do not decode (or because they depend on such a key)."""
    queries = [REGISTRY.get(ident) for ident in body["queries"]]
    seeds = {i for i, qi in enumerate(body["query"]) if queries[qi] is None}
    seeds |= {i for i, a in enumerate(body["args"]) if type(a) is not list and not _decodable(a)}
    unknown: set[int] = set()
    if seeds:
        deps_of = split_deps(body["deps_len"], body["deps"])
        unknown = _with_dependents(deps_of, seeds)
        body = without(body, deps_of, unknown)
    graph = Loaded(queries, body, pack)
    db._memos, db._tables, db._loaded = [None] * graph.count, {}, graph
    db._revision, db._clock = body["revision"], DurabilityClock(body["clock"])
    return len(unknown)


def _decodable(encoded) -> bool:
    """Whether a key's tagged arguments decode (names only registered classes): checked at load,
    so a crafted or damaged key is dropped with its dependents instead of failing a build."""
    try:
        decode_args(encoded)
    except (codec.CodecError, TypeError, KeyError):
        return False
    return True


def restore(db, memo: Memo, admit: bool) -> bool:
    """Decode a lazy value into ``memo.value``; False if there is none or it is corrupt."""
    if memo.blob is None:
        return False
    data, expected = memo.blob
    try:
        if checksum(data) != expected:
            raise codec.CodecError("checksum mismatch")
        memo.value = codec.decode(data)
    except codec.CodecError as exc:
        memo.blob = None
        db.store_report.problem(f"dropped the stored value of {memo.label()}: {exc}")
        return False
    if admit and memo.query.lru:
        db._lru.admit(memo, db._memos)
    return True
