"""Value packs: append-only files of encoded values, and how a save places each value.

Terms:
- *pack* ``values-<salt id>-<digest>.pack``: encoded values back to back, named by the
  digest of its entry list (each entry's offset, length and checksum) and never changed once
  written. The graph file lists the packs it
  uses with their *stamp* (size and mtime in ns of the file as written), and each *entry*
  (one distinct encoded value) by pack, offset, length and checksum
  (``hashing.checksum``, checked when the entry is decoded).
- *location*: where a memo's stored bytes lie: its blob is ``(data, checksum, pack,
  offset)`` once loaded from or saved to a pack (``PackFile``; ``data`` is a slice of the
  pack's mapped view, or bytes); a blob just encoded (``encoded``), or taken from a merge
  payload, is ``(bytes, checksum)``.
- *carry*: a save leaves every entry of a pack it keeps where it is, and lists them all
  again, *live* (some key of the save holds it) or *dead*. Only values whose bytes are in no
  kept pack are written, to one new pack; a value equal to a dead entry revives it (an edit
  undone writes nothing).
- *keep*: a save keeps a pack of its store whose file still has its stamp (nothing wrote
  it since it was listed, so the bytes read are its bytes) unless it compacts; *compaction*
  keeps none, when the dead bytes of the kept packs would exceed their live bytes or when
  they would number ``MAX_PACKS``. The live entries of packs not kept are copied into the
  new pack; a copied value never decoded is checked against its checksum first, and a
  damaged one is dropped (its memo re-runs when read). Packs of the salt that the new graph
  file does not list are deleted after it is written.
"""

from __future__ import annotations

import mmap
import os
from array import array

from tribuild.base.files import open_regular
from tribuild.base.hashing import checksum, digest
from tribuild.base.tempname import replace
from tribuild.engine.errors import warn
from tribuild.engine.memo import NO_VALUE
from tribuild.engine.store import codec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from tribuild.engine.memo import Memo

    Blob = tuple[Any, ...]  # a memo's: (data, checksum) or (data, checksum, PackFile, offset)
    Entry = tuple[int, int, int]  # offset, length, checksum
    Location = tuple["PackFile", int, int]  # pack, offset, entry index

PACK_BYTES = 1 << 36  # a pack is mapped, not read: the bound only refuses absurd sizes
MAX_PACKS = 8


class PackFile:
    """One pack of a store folder: its name, its bytes as mapped or written (None: missing),
    its *stamp* as listed (size and mtime in ns of the file when it was written) and its
    entries ``(offset, length, checksum)`` (listed lazily)."""

    __slots__ = ("root", "name", "data", "stamp", "_entries", "_offsets")

    def __init__(
        self,
        root: str,
        name: str,
        data: bytes | memoryview | None,
        stamp: list[int],
        entries: list[Entry] | Callable[[], list[Entry]],
    ) -> None:
        self.root, self.name, self.data, self.stamp = root, name, data, stamp
        self._entries = entries  # a list, or a function that lists them
        self._offsets: dict[tuple[int, int], int] | None = None

    @property
    def path(self) -> str:
        return os.path.join(self.root, self.name)

    @property
    def entries(self) -> list[tuple[int, int, int]]:
        if callable(self._entries):
            self._entries = self._entries()
        return self._entries

    def unchanged(self) -> bool | None:
        """Whether the file is as listed (same stamp: nothing wrote it since, and the bytes
        read are its bytes); None when it is gone."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (
            self.data is not None
            and [st.st_size, st.st_mtime_ns] == self.stamp
            and len(self.data) == st.st_size
        )

    def find(self, blob: Blob) -> int | None:
        """The offset of an entry holding ``blob``'s bytes, if any (asked of a kept pack:
        its bytes were read)."""
        assert self.data is not None
        if self._offsets is None:
            self._offsets = {(c, n): o for o, n, c in self.entries}
        offset = self._offsets.get((blob[1], len(blob[0])))
        if offset is None or self.data[offset : offset + len(blob[0])] != blob[0]:
            return None
        return offset


def encoded(value: Any) -> tuple[bytes, int] | None:
    """The blob of ``value`` just encoded: its bytes and their checksum; None if it cannot be
    encoded."""
    try:
        data = codec.encode(value)
    except codec.NotEncodable:
        return None
    return data, checksum(data)


def pack_name(sid: str, name: object) -> bool:
    """Whether ``name`` is a pack of salt ``sid`` in the store folder itself."""
    return (
        type(name) is str
        and name.startswith(f"values-{sid}-")
        and name.endswith(".pack")
        and "/" not in name
        and "\\" not in name
    )


def read(root: str, listed: list[list[Any]], body: dict[str, Any]) -> list[PackFile]:
    """The packs a graph file lists (``[name, size, mtime_ns]``), their bytes mapped (None
    when the file is missing); ``body`` holds the entry columns."""
    groups: dict[int, list[Entry]] | None = None

    def lister(index: int) -> Callable[[], list[Entry]]:
        def entries() -> list[Entry]:
            nonlocal groups
            if groups is None:
                groups = {}
                for p, o, n, c in zip(
                    body["entry_pack"],
                    body["entry_offset"],
                    body["entry_length"],
                    body["entry_checksum"],
                    strict=True,
                ):
                    groups.setdefault(p, []).append((o, n, c))
            return groups.get(index, [])

        return entries

    return [
        PackFile(root, name, _mapped(os.path.join(root, name)), [size, mtime], lister(i))
        for i, (name, size, mtime) in enumerate(listed)
    ]


def _mapped(path: str) -> bytes | memoryview | None:
    """A view of the file's bytes, mapped read-only (pages are read when a value is first
    used, and a slice copies nothing; packs are never changed in place, so the mapping stays
    valid), or None if it is missing or no regular file (a link, a FIFO, a folder: its
    values are then missing too, and re-run when read)."""
    try:
        with open_regular(path, PACK_BYTES) as f:
            if not os.fstat(f.fileno()).st_size:
                return b""
            return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    except OSError:
        return None


class Placement:
    """Where a save puts the values: ``values`` (entry per memo, -1: none), the entry
    columns, the packs the graph lists and the new pack (None: nothing new)."""

    def __init__(self, root: str, sid: str) -> None:
        self.root, self.sid = root, sid
        self.values: list[int] = []
        self.entries: dict[str, list[int]] = {
            "entry_pack": [],
            "entry_offset": [],
            "entry_length": [],
            "entry_checksum": [],
        }
        self.packs: list[PackFile] = []
        self.new: PackFile | None = None
        self.new_chunks: list[bytes] = []  # the new pack's values, until ``write``
        self.entry: dict[tuple[PackFile, int], int] = {}  # (pack, offset) -> entry index

    def ours(self, pack: PackFile) -> bool:
        """Whether ``pack`` is a pack of the store being written."""
        return pack.root == self.root and pack_name(self.sid, pack.name)

    def list_pack(self, pack: PackFile, looked_up: bool = True) -> None:
        """List every entry of ``pack``; ``looked_up``: by ``(pack, offset)`` in ``entry``
        too (the new pack's entries are found by their index instead)."""
        entries = pack.entries
        if not entries:
            return
        offsets, lengths, checks = zip(*entries, strict=True)
        columns = self.entries
        first = len(columns["entry_offset"])
        if looked_up:
            self.entry.update(
                zip(((pack, o) for o in offsets), range(first, first + len(offsets)), strict=True)
            )
        columns["entry_pack"] += [len(self.packs)] * len(offsets)
        columns["entry_offset"] += offsets
        columns["entry_length"] += lengths
        columns["entry_checksum"] += checks
        self.packs.append(pack)


def place(
    memos: list[Memo], blobs: list[Blob | None], root: str, sid: str, known: list[PackFile]
) -> Placement:
    """Place the ``blobs`` (one per memo, None: no value) of a save into ``root``, where
    the packs ``known`` (those loaded) may be; gives each memo the location of its value."""
    out = Placement(root, sid)
    kept = _kept_packs(memos, blobs, out, known)
    for pack in kept:
        out.list_pack(pack)
    new = _NewPack(root, sid, len(out.entries["entry_offset"]))
    keep, entry, values = set(kept), out.entry, out.values
    for memo, blob in zip(memos, blobs, strict=True):
        if blob is None:
            values.append(-1)
        elif len(blob) == 4 and blob[2] in keep:
            values.append(entry[blob[2], blob[3]])
        else:
            pack, offset, index = _carried(blob, kept, entry, new) if kept else new.add(blob)
            memo.blob = (blob[0], blob[1], pack, offset)
            values.append(index)
    if new.chunks:
        out.new, out.new_chunks = new.named(), new.chunks
        out.list_pack(out.new, looked_up=False)
    return out


def _carried(
    blob: Blob, kept: list[PackFile], entry: dict[tuple[PackFile, int], int], new: _NewPack
) -> Location:
    """``(pack, offset, entry index)`` of an equal entry of a kept pack, else of its entry in
    the new pack."""
    for pack in kept:
        offset = pack.find(blob)
        if offset is not None:
            return pack, offset, entry[pack, offset]
    return new.add(blob)


class _NewPack:
    """The bytes a save writes to its new pack (``pack``, named once complete), each
    distinct value once; its entries are numbered after the ``first`` entries of the kept
    packs."""

    def __init__(self, root: str, sid: str, first: int) -> None:
        self.sid = sid
        self._entries: list[Entry] = []
        self.pack = PackFile(root, "", None, [], self._entries)  # stamped once written
        self.chunks: list[bytes] = []
        self._found: dict[bytes, Location] = {}  # bytes -> (pack, offset, entry index)
        self._next = first
        self._size = 0

    def add(self, blob: Blob) -> Location:
        """``(pack, offset, entry index)`` of the entry holding ``blob``'s bytes, added if
        new."""
        data = blob[0]
        found = self._found.get(data)
        if found is None:
            size = self._size
            found = self._found[data] = (self.pack, size, self._next)
            self.chunks.append(data)
            self._entries.append((size, len(data), blob[1]))
            self._size, self._next = size + len(data), self._next + 1
        return found

    def named(self) -> PackFile:
        """The pack, named by the digest of its entries' list, to be written (``write``):
        their checksums stand for their bytes (hashing the whole pack cost a tenth of a
        save)."""
        listing = array("q", [n for entry in self._entries for n in entry]).tobytes()
        self.pack.name = f"values-{self.sid}-{digest(listing)}.pack"
        return self.pack


def write(placed: Placement) -> int:
    """Write the new pack of ``placed`` (fsynced; its folder is not), then map it and
    ``stamp`` it; the bytes written."""
    pack = placed.new
    assert pack is not None  # asked only of a placement with a new pack
    replace(pack.path, placed.new_chunks, sync=True)
    pack.data = _mapped(pack.path)
    st = os.stat(pack.path)
    pack.stamp = [st.st_size, st.st_mtime_ns]
    placed.new_chunks = []
    return st.st_size


def _kept_packs(
    memos: list[Memo], blobs: list[Blob | None], out: Placement, known: list[PackFile]
) -> list[PackFile]:
    """The packs this save keeps (none when it compacts): the known ones and those of
    carried blobs, when their file is as listed. Values to be copied that were never decoded
    are checked against their checksum first; damaged ones are dropped (in ``blobs`` and on
    the memos)."""
    live: dict[tuple[PackFile, int], int] = {}
    ok = {p: p.unchanged() for p in known if out.ours(p)}
    for blob in blobs:
        if blob is not None and len(blob) == 4:
            pack = blob[2]
            if pack not in ok:
                ok[pack] = out.ours(pack) and pack.unchanged()
            if ok[pack]:
                live[pack, blob[3]] = len(blob[0])
    kept = [p for p, good in ok.items() if good]
    kept_bytes = sum(len(p.data) for p in kept if p.data is not None)  # each was read
    if 2 * sum(live.values()) < kept_bytes or len(kept) >= MAX_PACKS:
        kept = []
    keep = set(kept)
    if len(keep) == len(ok):
        return kept  # no value is copied from a pack not kept
    for i, blob in enumerate(blobs):
        if (
            blob is not None
            and len(blob) == 4
            and blob[2] not in keep
            and memos[i].value is NO_VALUE
            and checksum(blob[0]) != blob[1]
        ):
            warn(f"dropped a damaged value of {memos[i].query.name}")
            memos[i].blob = blobs[i] = None
    return kept
