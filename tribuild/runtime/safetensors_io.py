"""Reading ``.safetensors`` files one tensor at a time, into memory the process owns; writing
one, and mapping a whole one copy-on-write (the weight cache's entries, ``weight_cache``).

Terms:
- *file layout* (safetensors' own): an 8-byte little-endian header size ``n``, ``n`` bytes of
  JSON mapping each key to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets
  into the bytes after the header; ``__metadata__`` is not a tensor), then the data,
  little-endian, row-major.
- *entry* (``Entry``): a tensor's file, dtype, shape and byte range, read from the header
  alone: a loader checks every key and shape before it reads any data.
- ``Entry.read()`` reads the bytes into a new tensor with plain file reads; ``Entry.map()``
  maps the tensor's byte range alone, for a tensor consumed and dropped at once. Not
  ``safetensors.safe_open``, which maps the whole file: every tensor read through it keeps
  its file's pages in the process's resident memory until the last one is freed, so a
  loader that packs a float checkpoint tensor by tensor would still peak at the file's size.
- ``write`` puts each tensor's data at a multiple of ``ALIGN`` bytes from the file's start
  (what a SIMD kernel reading it in place wants): the format allows no holes between data, so
  a gap is a filler tensor ``__pad<i>`` (U8) that readers of the file skip by name.
- ``map_copy_on_write`` maps a whole file privately (``MAP_PRIVATE``, readable and writable):
  pages are read when first touched, and a write lands in the process's own copy of its
  page, never in the file. For tensors a module keeps (a map of the whole file, then).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import struct
import warnings
from pathlib import Path
from typing import BinaryIO, NamedTuple

import torch

DTYPES = {
    "BOOL": torch.bool,
    "U8": torch.uint8,
    "I8": torch.int8,
    "I16": torch.int16,
    "I32": torch.int32,
    "I64": torch.int64,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F32": torch.float32,
    "F64": torch.float64,
}
NAMES = {dtype: name for name, dtype in DTYPES.items()}
_MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header
ALIGN = 64  # a cache line, and every vector width the kernels use
PAD = "__pad"


class FileError(ValueError):
    """A file that is not a readable safetensors file; the message names it and why."""


class Entry(NamedTuple):
    """One tensor of a file (see the module doc)."""

    path: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    begin: int  # absolute byte offsets in the file
    end: int

    def read(self) -> torch.Tensor:
        """The tensor, in a buffer of its own."""
        size = self.end - self.begin
        out = torch.empty(size, dtype=torch.uint8)
        view = out.numpy().data  # the tensor's own bytes, written by readinto
        with open(self.path, "rb", buffering=0) as f:
            f.seek(self.begin)
            done = 0
            while done < size:  # one read returns at most ~2 GiB on Linux
                got = f.readinto(view[done:])
                if not got:
                    raise FileError(f"{self.path}: the file ends inside a tensor's data")
                done += got
        return out.view(self.dtype).reshape(self.shape)

    def map(self, populate: bool = True, private: bool = False) -> torch.Tensor:
        """The tensor over the file's own pages: a read-only map of its byte range, faulted in
        at once (``MAP_POPULATE``, unless ``populate`` is false: then a page is read when first
        touched), that lives as long as the tensor and its views do. A loader that ternarizes
        each weight and drops it copies nothing and keeps no page resident past its weight (a
        map of the whole file would keep them all); an embedding read a row at a time keeps
        only the rows it looked up. ``private``: mapped copy-on-write instead (writable; a
        write changes the process's copy of the page, never the file)."""
        size = self.end - self.begin
        if size == 0:
            return torch.empty(self.shape, dtype=self.dtype)
        start = self.begin - self.begin % mmap.ALLOCATIONGRANULARITY
        # (Linux populates a private writable map with write faults, copying every page: a
        # private map is for tensors read lazily, populate=False)
        share = mmap.MAP_PRIVATE if private else mmap.MAP_SHARED
        flags = share | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if private else 0)
        with open(self.path, "rb") as f:
            length = self.end - start
            region = mmap.mmap(f.fileno(), length, flags=flags, prot=prot, offset=start)
        with warnings.catch_warnings():  # "not writable": nothing writes to it
            warnings.simplefilter("ignore", UserWarning)
            flat = torch.frombuffer(
                region, dtype=torch.uint8, count=size, offset=self.begin - start
            )
        return flat.view(self.dtype).reshape(self.shape)  # the tensor holds the map


def entries(path: str | Path) -> dict[str, Entry]:
    """Every tensor of the file ``path``, by key, from its header."""
    return header(path)[0]


def header(
    path: str | Path, file: BinaryIO | None = None
) -> tuple[dict[str, Entry], dict[str, str]]:
    """Every tensor of the file ``path`` by key, and its ``__metadata__``, from its header;
    FileError when the header does not fit the file (a truncated file among them). ``file``:
    ``path`` open already (read from its start), so that what the caller maps of it is the
    file this header describes, not one renamed over ``path`` since."""
    path = Path(path)
    with open(path, "rb") if file is None else contextlib.nullcontext(file) as f:
        f.seek(0)
        head = f.read(8)
        if len(head) < 8:
            raise FileError(f"{path}: too short for a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            raise FileError(f"{path}: a header of {n} bytes; not a safetensors file")
        try:
            table = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise FileError(f"{path}: its header is not JSON ({e})") from None
        f.seek(0, 2)
        length = f.tell()
    if not isinstance(table, dict):
        raise FileError(f"{path}: its header is not a JSON object")
    out: dict[str, Entry] = {}
    start = 8 + n
    meta = table.get("__metadata__") or {}
    if not isinstance(meta, dict):
        raise FileError(f"{path}: its __metadata__ is not a JSON object")
    for key, info in table.items():
        if key == "__metadata__":
            continue
        try:
            dtype = DTYPES[info["dtype"]]
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (start + int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise FileError(
                f"{path}: tensor {key} has no dtype tribuild reads ({', '.join(DTYPES)}), "
                "shape or data offsets"
            ) from None
        count = 1
        for d in shape:
            count *= d
        if end - begin != count * dtype.itemsize or begin < start or end > length:
            raise FileError(f"{path}: tensor {key}'s data offsets do not fit its shape and file")
        out[key] = Entry(path, dtype, shape, begin, end)
    return out, meta


def write(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """``tensors`` (CPU) and ``metadata`` as the safetensors file ``path``, each tensor's data
    at a multiple of ``ALIGN`` bytes (see the module doc). Written in place: a caller that
    must not leave half a file writes to a temporary name and renames it."""
    layout: dict[str, dict[str, object]] = {}
    data: list[tuple[int, torch.Tensor]] = []
    offset = 0
    for key, tensor in tensors.items():
        if gap := -offset % ALIGN:
            layout[f"{PAD}{len(layout)}"] = {
                "dtype": "U8",
                "shape": [gap],
                "data_offsets": [offset, offset + gap],
            }
            offset += gap
        size = tensor.numel() * tensor.element_size()
        layout[key] = {
            "dtype": NAMES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        data.append((offset, tensor))
        offset += size
    text = json.dumps({"__metadata__": metadata, **layout}, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % ALIGN)  # spaces pad the header: data starts aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        start = f.tell()
        for at, tensor in data:
            f.write(b"\0" * (start + at - f.tell()))
            if tensor.numel():
                flat = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
                f.write(flat.numpy().data)


def map_copy_on_write(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The file's tensors (fillers left out) over one private map of the whole file (see the
    module doc), and its ``__metadata__``; the map lives while any of them does. The header
    and the map are of one open file: a file renamed over ``path`` meanwhile (a weight cache
    entry replaced) is neither's."""
    with open(path, "rb") as f:
        found, meta = header(path, f)
        region = mmap.mmap(
            f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE
        )
    out = {}
    for key, e in found.items():
        if key.startswith(PAD):
            continue
        count = e.end - e.begin
        flat = (
            torch.frombuffer(region, dtype=torch.uint8, count=count, offset=e.begin)
            if count
            else torch.empty(0, dtype=torch.uint8)
        )
        out[key] = flat.view(e.dtype).reshape(e.shape)
    return out, meta
