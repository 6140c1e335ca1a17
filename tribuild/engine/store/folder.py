"""A store folder seen from outside the engine: which files belong to which stored graph,
their size, and whether they are intact. The driver's cache management (``driver.cache``)
uses this instead of knowing the engine's file names and formats.

Terms:
- *stored graph*: what one salt keeps in the folder: its graph file (``graph-<id>.json``,
  first) and the value packs of the same id (``values-<id>-*.pack``); ``id`` is
  ``store_id(salt)``.
- *store file*: a graph file or a value pack, of any id.
"""

from __future__ import annotations

import os
import re

from tribuild.base.files import read_regular
from tribuild.base.hashing import checksum
from tribuild.base.record import record
from tribuild.engine.store import disk
from tribuild.engine.store.packs import PACK_BYTES, pack_name

_STORE_FILE = re.compile(r"graph-.+\.json|values-.+\.pack")


@record
class StoredGraph:
    id: str
    files: tuple[str, ...]  # paths: the graph file first, then its packs, sorted


def store_id(salt: str) -> str:
    """The id of the graph that ``Database.save(folder, salt)`` writes."""
    return disk.salt_id(salt)


def is_store_file(name: str) -> bool:
    """Whether ``name`` (a file name, no folder) is a graph file or a value pack."""
    return _STORE_FILE.fullmatch(name) is not None


def stored_graphs(folder: str, names: list[str]) -> list[StoredGraph]:
    """The stored graphs among ``names`` (the listing of ``folder``), in listing order. A
    pack whose graph file is gone belongs to none."""
    out = []
    for graph in names:
        sid = disk.graph_sid(graph)
        if sid is None:
            continue
        packs = sorted(n for n in names if pack_name(sid, n))
        out.append(StoredGraph(sid, tuple(os.path.join(folder, n) for n in (graph, *packs))))
    return out


def store_bytes(folder: str) -> int:
    """The size of every store file in ``folder`` (one scan of the folder)."""
    try:
        with os.scandir(folder) as entries:
            return sum(e.stat().st_size for e in entries if is_store_file(e.name))
    except FileNotFoundError:
        return 0


def problem(graph: StoredGraph) -> str | None:
    """What is wrong with ``graph``, re-read from disk: a graph file that does not read, a
    pack it lists that is missing, or an entry that fails its checksum; None if intact."""
    try:
        path = graph.files[0]
        body = disk.read_graph(read_regular(path, PACK_BYTES))
        names = [name for name, _, _ in disk.pack_list(body, graph.id)]
        data = [read_regular(os.path.join(os.path.dirname(path), n), PACK_BYTES) for n in names]
        entries = zip(
            body["entry_pack"],
            body["entry_offset"],
            body["entry_length"],
            body["entry_checksum"],
            strict=True,
        )
        for index, (pack, offset, length, expected) in enumerate(entries):
            if checksum(data[pack][offset : offset + length]) != expected:
                return f"entry {index} of {names[pack]} fails its checksum"
    except FileNotFoundError as err:
        return f"missing {os.path.basename(err.filename)}"
    except OSError as err:  # a link, a FIFO, a folder, an absurd size
        return f"unreadable {os.path.basename(err.filename or '')}: {err.strerror}"
    except (ValueError, KeyError, TypeError, IndexError) as err:
        return f"unreadable graph file: {err}"
    return None
