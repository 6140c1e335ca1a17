"""Integer columns for the store's graph file.

Terms:
- *column*: a named sequence of Python ints that fit in 64 bits, stored as a little-endian
  array of the narrowest of 8, 16, 32 and 64-bit signed integers that holds every value.
  Reading one is a copy into an ``array``, returned as is: no parsing, no per-value object,
  fast for 100k keys.
- *layout*: ``[[name, length, typecode], ...]``, the order, lengths and ``array`` typecodes
  of the columns in the bytes.
"""
from __future__ import annotations

import sys
from array import array

_TYPECODES = {"b": 1, "h": 2, "i": 4, "q": 8}    # typecode -> bytes per value


def _typecode(values) -> str:
    if not len(values):
        return "b"
    low, high = min(values), max(values)
    for code, size in _TYPECODES.items():
        bound = 1 << (8 * size - 1)
        if -bound <= low and high < bound:
            return code
    raise OverflowError("a column value does not fit in 64 bits")


def pack(columns: dict) -> tuple[list, bytes]:
    layout, chunks = [], []
    for name, values in columns.items():
        code = _typecode(values)
        column = array(code, values)
        if sys.byteorder == "big":
            column.byteswap()
        layout.append([name, len(column), code])
        chunks.append(column.tobytes())
    return layout, b"".join(chunks)


def size(layout: list) -> int:
    """The number of bytes the columns of ``layout`` take (KeyError: unknown typecode)."""
    return sum(length * _TYPECODES[code] for _, length, code in layout)


def unpack(layout: list, data: bytes | memoryview) -> dict[str, array]:
    out, offset = {}, 0
    for name, length, code in layout:
        if type(length) is not int or length < 0:
            raise ValueError(f"column {name} has a bad length")
        end = offset + _TYPECODES[code] * length
        if end > len(data):
            raise ValueError(f"column {name} is truncated")
        column = array(code)
        column.frombytes(data[offset:end])
        if sys.byteorder == "big":
            column.byteswap()
        out[name] = column
        offset = end
    if offset != len(data):
        raise ValueError("trailing bytes after the columns")
    return out
