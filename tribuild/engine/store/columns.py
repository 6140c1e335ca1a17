"""Integer columns for the store's graph file.

Terms:
- *column*: a named sequence of Python ints that fit in 64 bits, stored as a little-endian
  int64 array. Reading one is a copy into an ``array('q')``, returned as is: no parsing, no
  per-value object, fast for 100k keys.
- *layout*: ``[[name, length], ...]``, the order and lengths of the columns in the bytes.
"""

from __future__ import annotations

import sys
from array import array

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any


def pack(columns: Mapping[str, Iterable[int]]) -> tuple[list[list[object]], bytes]:
    layout: list[list[object]] = []
    chunks: list[bytes] = []
    for name, values in columns.items():
        column = array("q", values)
        if sys.byteorder == "big":
            column.byteswap()
        layout.append([name, len(column)])
        chunks.append(column.tobytes())
    return layout, b"".join(chunks)


def size(layout: list[list[int]]) -> int:
    """The number of bytes the columns of ``layout`` take."""
    return 8 * sum(length for _, length in layout)


def unpack(layout: list[list[Any]], data: bytes | memoryview) -> dict[str, array[int]]:
    out: dict[str, array[int]] = {}
    offset = 0
    for name, length in layout:
        if type(length) is not int or length < 0:
            raise ValueError(f"column {name} has a bad length")
        end = offset + 8 * length
        if end > len(data):
            raise ValueError(f"column {name} is truncated")
        column = array("q")
        column.frombytes(data[offset:end])
        if sys.byteorder == "big":
            column.byteswap()
        out[name] = column
        offset = end
    if offset != len(data):
        raise ValueError("trailing bytes after the columns")
    return out
