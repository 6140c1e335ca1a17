"""Editing a saved engine store the way an attacker or a bad disk would, checksums and all.

Terms:
- *graph file*, *pack*, *entry*, *salt*: as in ``tribuild.engine.store.disk``.
- *rewrite*: parse the graph file into its JSON part and integer columns, let a function
  change them, and write it back with a correct header digest, so the store's own integrity
  check passes and only what the edit means is tested.
"""

from __future__ import annotations

import json
from pathlib import Path

from tribuild.engine.store import argtable, columns
from tribuild.engine.store import disk as store


def graph_file(cache: Path) -> Path:
    (path,) = cache.glob("graph-*.json")
    return path


def read(path: Path) -> tuple[dict, dict]:
    """(JSON part with the argument nodes as ``"elements"``, columns as lists) of a graph
    file."""
    body = store.read_graph(path.read_bytes())
    ints = {name: list(body.pop(name)) for name, _ in body["layout"]}
    return body | {"elements": argtable.parse(body["elements"])}, ints


def write(path: Path, meta: dict, ints: dict, fmt: int = store.FORMAT) -> None:
    layout, data = columns.pack(ints)
    meta = dict(meta)
    elements = "\n".join(
        json.dumps(node, separators=(",", ":")) for node in meta.pop("elements")
    ).encode()
    text = json.dumps(meta | {"layout": layout}, separators=(",", ":")).encode()
    body = len(text).to_bytes(8, "little") + text + data + elements
    path.write_bytes(b"TRIBUILD-ENGINE %d %s\n" % (fmt, store.digest(body).encode()) + body)


def replace_entries(cache: Path, payload: bytes) -> int:
    """Make every value entry of the store ``payload``, in its first pack, with valid
    checksums; the count."""
    path = graph_file(cache)
    meta, ints = read(path)
    count = len(ints["entry_offset"])
    ints["entry_pack"] = [0] * count
    ints["entry_offset"] = [i * len(payload) for i in range(count)]
    ints["entry_length"] = [len(payload)] * count
    ints["entry_checksum"] = [store.checksum(payload)] * count
    name = meta["packs"][0][0]
    (cache / name).write_bytes(payload * count)
    stat = (cache / name).stat()
    meta["packs"] = [[name, stat.st_size, stat.st_mtime_ns]]
    write(path, meta, ints)
    return count


def replace_tagged_args(cache: Path, tagged: dict) -> int:
    """Make every argument node stored in tagged form (a record, a set) ``tagged``; the
    count."""
    path = graph_file(cache)
    meta, ints = read(path)
    hits = [i for i, element in enumerate(meta["elements"]) if isinstance(element, dict)]
    for i in hits:
        meta["elements"][i] = tagged
    write(path, meta, ints)
    return len(hits)
