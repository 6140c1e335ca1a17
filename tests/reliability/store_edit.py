"""Editing a saved engine store the way an attacker or a bad disk would, checksums and all.

Terms:
- *graph file*, *pack*, *entry*, *salt*: as in ``tribuild.engine.store``.
- *rewrite*: parse the graph file into its JSON part and integer columns, let a function
  change them, and write it back with a correct header digest, so the store's own integrity
  check passes and only what the edit means is tested.
"""
from __future__ import annotations

import json
from pathlib import Path

from tribuild.engine import columns, store


def graph_file(cache: Path) -> Path:
    (path,) = cache.glob("graph-*.json")
    return path


def read(path: Path) -> tuple[dict, dict]:
    """(JSON part, columns as lists) of a graph file."""
    _, _, body = path.read_bytes().partition(b"\n")
    size = int.from_bytes(body[:8], "little")
    meta = json.loads(body[8:8 + size])
    ints = columns.unpack(meta["layout"], memoryview(body)[8 + size:])
    return meta, {name: list(values) for name, values in ints.items()}


def write(path: Path, meta: dict, ints: dict, fmt: int = store.FORMAT) -> None:
    layout, data = columns.pack(ints)
    text = json.dumps(meta | {"layout": layout}, separators=(",", ":")).encode()
    body = len(text).to_bytes(8, "little") + text + data
    path.write_bytes(b"TRIBUILD-ENGINE %d %s\n" % (fmt, store.digest(body).encode()) + body)


def replace_entries(cache: Path, payload: bytes) -> int:
    """Make every value entry of the store ``payload``, with valid checksums; the count."""
    path = graph_file(cache)
    meta, ints = read(path)
    count = len(ints["entry_offset"])
    ints["entry_offset"] = [i * len(payload) for i in range(count)]
    ints["entry_length"] = [len(payload)] * count
    ints["entry_checksum"] = [store.checksum(payload)] * count
    (cache / meta["pack"]).write_bytes(payload * count)
    write(path, meta, ints)
    return count


def replace_tagged_args(cache: Path, tagged: dict) -> int:
    """Make the arguments of every key stored in tagged form ``tagged``; the count."""
    path = graph_file(cache)
    meta, ints = read(path)
    hits = [i for i, args in enumerate(meta["args"]) if isinstance(args, dict)]
    for i in hits:
        meta["args"][i] = {"$a": [tagged]}
    write(path, meta, ints)
    return len(hits)
