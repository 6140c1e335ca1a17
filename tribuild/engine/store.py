"""The on-disk store: a database's graph, input values and derived values.

Terms:
- *salt*: the caller's digest of tribuild's source and options. Its hash (with the format
  version) names every file, and the full salt is checked inside the graph file, so stores of
  other versions or options are never read.
- *graph file* ``graph-<salt id>.json``: a header line ``TRIBUILD-ENGINE <format> <digest>``
  and a JSON body holding the revision, the per-durability clock, the query idents and one row
  per key: query index, encoded args, changed_at, verified_at, durability, deps (null for
  inputs) and the value's entry (null when not stored).
- *pack* ``values-<salt id>-<pack digest>.pack``: the encoded values, one *entry* per distinct
  content (content-addressed: equal values share it), each referenced as
  ``[offset, length, digest]``. An entry is checked against its digest when first decoded.
- *lazy value*: after a load, a memo holds its entry's bytes (``memo.blob``) and decodes them
  on first use. An entry that fails its digest or does not decode is dropped (the memo
  forgets its value and re-runs when the value is needed) and reported once.
Files are written to a temporary file, fsynced and renamed into place, pack first.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import codec
from .durability import DurabilityClock
from .memo import NO_VALUE, Memo
from .query import REGISTRY

FORMAT = 1
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


@dataclass(frozen=True, slots=True)
class SaveReport:
    keys: int
    values: int
    bytes: int
    unencodable: dict[str, int]   # query name -> values not stored (the key itself is kept)
    dropped_keys: int             # keys with unencodable args or unknown queries, + dependents


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def salt_id(salt: str) -> str:
    return digest(f"{FORMAT}\0{salt}".encode())[:16]


# -- save --------------------------------------------------------------------------------

def save(db, path, salt: str) -> SaveReport:
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    sid = salt_id(salt)
    memos = db._memos
    args = [_encode_args(m) for m in memos]
    dropped = _with_dependents([m.deps for m in memos],
                               {i for i, a in enumerate(args) if a is None})
    kept = [m for m in memos if m.id not in dropped]
    new_id = {m.id: i for i, m in enumerate(kept)}
    queries = {m.query: None for m in kept}
    query_index = {q: i for i, q in enumerate(queries)}
    entries: dict[str, list] = {}
    chunks: list[bytes] = []
    unencodable: dict[str, int] = {}
    offset = 0
    rows = []
    for m in kept:
        entry = None
        data = _blob(m, unencodable)
        if data is not None:
            entry = entries.get(data[1])
            if entry is None:
                entry = entries[data[1]] = [offset, len(data[0]), data[1]]
                chunks.append(data[0])
                offset += len(data[0])
        deps = None if m.deps is None else [new_id[d] for d in m.deps]
        rows.append([query_index[m.query], args[m.id], m.changed_at, m.verified_at,
                     int(m.durability), deps, entry])
    pack = b"".join(chunks)
    pack_name = f"values-{sid}-{digest(pack)}.pack"
    body = json.dumps({"salt": salt, "revision": db._revision, "clock": db._clock.changed,
                       "queries": [q.ident for q in queries], "pack": pack_name,
                       "keys": rows}, separators=(",", ":")).encode()
    if not (root / pack_name).exists():
        write_atomic(root / pack_name, pack)
    graph = b"%s %d %s\n" % (_MAGIC, FORMAT, digest(body).encode()) + body
    write_atomic(root / f"graph-{sid}.json", graph)
    for old in root.glob(f"values-{sid}-*.pack"):
        if old.name != pack_name:
            old.unlink(missing_ok=True)
    return SaveReport(len(kept), len(entries), len(pack) + len(graph), unencodable, len(dropped))


def _encode_args(memo: Memo):
    if REGISTRY.get(memo.query.ident) is not memo.query:
        return None
    try:
        return codec.to_json(memo.args)
    except codec.NotEncodable:
        return None


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


def _blob(memo: Memo, unencodable: dict[str, int]):
    """The memo's encoded value and its digest (cached on the memo), or None."""
    if memo.blob is None and memo.value is not NO_VALUE:
        try:
            data = codec.encode(memo.value)
        except codec.NotEncodable:
            name = memo.query.name
            unencodable[name] = unencodable.get(name, 0) + 1
            return None
        memo.blob = (data, digest(data))
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
        body = _check_header(raw)
        if body.get("salt") != salt:
            db.store_report = LoadReport("other-salt", "the graph file is for another salt")
            return
        pack_name = body["pack"]
        if not (pack_name.startswith(f"values-{sid}-") and pack_name.endswith(".pack")
                and "/" not in pack_name and "\\" not in pack_name):
            raise ValueError(f"bad pack name {pack_name!r}")
        pack = _read_pack(root / pack_name)
        unknown = _fill(db, body, pack)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        db.store_report = LoadReport("corrupt", f"corrupt graph file {graph_path.name}: {exc}")
        log.warning("engine store: %s", db.store_report.reason)
        return
    db.store_report = LoadReport("loaded", f"loaded {len(db._memos)} keys", len(db._memos))
    if unknown:
        db.store_report.problem(f"dropped {unknown} keys of queries not declared in this "
                                "process, with their dependents")
    if pack is None:
        db.store_report.problem(f"value pack {pack_name} is missing; values will be "
                                "recomputed when needed")


def _check_header(raw: bytes) -> dict:
    header, _, body = raw.partition(b"\n")
    parts = header.split(b" ")
    if len(parts) != 3 or parts[0] != _MAGIC or parts[1] != str(FORMAT).encode():
        raise ValueError("bad header")
    if parts[2].decode() != digest(body):
        raise ValueError("checksum mismatch")
    return json.loads(body)


def _read_pack(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _fill(db, body: dict, pack: bytes | None) -> int:
    """Build the memos of ``body`` into ``db``; returns how many keys were dropped because
    their query (or one they depend on) is not declared in this process."""
    queries = [REGISTRY.get(ident) for ident in body["queries"]]
    rows = body["keys"]
    unknown = _with_dependents([row[5] for row in rows],
                               {i for i, row in enumerate(rows) if queries[row[0]] is None})
    new_id = _renumber(len(rows), unknown)
    memos: list[Memo] = []
    tables: dict = {}
    for i, (qi, args, changed_at, verified_at, durability, deps, entry) in enumerate(rows):
        if i in unknown:
            continue
        query = queries[qi]
        memo = Memo(len(memos), query, codec.from_json(args))
        memo.changed_at = changed_at
        memo.durability = durability
        if deps is not None:
            memo.verified_at = verified_at
            memo.deps = tuple(deps) if new_id is None else tuple(new_id[d] for d in deps)
        if entry is not None and pack is not None:
            memo.blob = (pack[entry[0]:entry[0] + entry[1]], entry[2])
        memos.append(memo)
        tables.setdefault(query, {})[memo.args] = memo
    clock = DurabilityClock(body["clock"])
    db._memos, db._tables, db._revision, db._clock = memos, tables, body["revision"], clock
    return len(unknown)


def _renumber(count: int, dropped: set[int]) -> list[int] | None:
    if not dropped:
        return None
    new_id, next_id = [-1] * count, 0
    for i in range(count):
        if i not in dropped:
            new_id[i] = next_id
            next_id += 1
    return new_id


def restore(db, memo: Memo, admit: bool) -> bool:
    """Decode a lazy value into ``memo.value``; False if there is none or it is corrupt."""
    if memo.blob is None:
        return False
    data, expected = memo.blob
    try:
        if digest(data) != expected:
            raise codec.CodecError("checksum mismatch")
        memo.value = codec.decode(data)
    except codec.CodecError as exc:
        memo.blob = None
        db.store_report.problem(f"dropped the stored value of {memo.label()}: {exc}")
        return False
    if admit and memo.query.lru:
        db._lru.admit(memo, db._memos)
    return True
