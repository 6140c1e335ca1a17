"""Character offsets (code points, as Python strings count) to LSP positions and back.

Terms:
- *encoding*: how the client counts columns: ``utf-16`` (the protocol's default: code units
  of UTF-16, so a character beyond the Basic Multilingual Plane counts 2), ``utf-32`` (code
  points) or ``utf-8`` (bytes). The server takes what the client offers at ``initialize``.
- *lines*: a text's line start offsets, found once per text and kept for the last few texts
  (the same text is converted many times per request).
"""

from __future__ import annotations

import bisect

_UNITS = {"utf-8": 1, "utf-16": 2, "utf-32": 4}
_STARTS: dict[str, list[int]] = {}
_KEPT = 16


def line_starts(text: str) -> list[int]:
    starts = _STARTS.get(text)
    if starts is None:
        starts = [0]
        index = text.find("\n")
        while index >= 0:
            starts.append(index + 1)
            index = text.find("\n", index + 1)
        if len(_STARTS) >= _KEPT:
            _STARTS.pop(next(iter(_STARTS)))
        _STARTS[text] = starts
    return starts


def _width(text: str, encoding: str) -> int:
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def to_position(text: str, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
    """The 0-based (line, character) of ``offset`` in ``text``."""
    offset = max(0, min(offset, len(text)))
    starts = line_starts(text)
    line = bisect.bisect_right(starts, offset) - 1
    return line, _width(text[starts[line] : offset], encoding)


def to_offset(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """The offset of an LSP position; a position past the end of its line (or of the text)
    is clamped to it, as the protocol asks."""
    starts = line_starts(text)
    if line >= len(starts):
        return len(text)
    start = starts[max(line, 0)]
    end = starts[line + 1] - 1 if line + 1 < len(starts) else len(text)
    if encoding == "utf-32":
        return min(start + character, end)
    count = 0
    for index in range(start, end):
        if count >= character:
            return index
        count += _width(text[index], encoding)
    return end


def known_encoding(name: str | None) -> str:
    return name if name in _UNITS else "utf-16"
