"""Line wrapping for generated Python: a statement longer than ``WIDTH`` is split at the
top-level commas of its first bracket, one item per line, recursively; a bracket holding a
single bracketed item hugs it (``nn.ModuleList([`` ... ``])``)."""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

WIDTH = 99
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_OPENERS, _CLOSERS = frozenset(_CLOSE), frozenset(_CLOSE.values())
# A string literal runs to its first quote not preceded by a backslash (to the end if none);
# every other token is one bracket or comma.
_TOKENS = re.compile(r"""'(?:[^']|(?<=\\)')*+'|"(?:[^"]|(?<=\\)")*+"|['"].*|[()\[\]{},]""", re.S)
_OPENING = re.compile(r"[(\[{]")


def _unquoted(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """``(index, char, depth)`` of each bracket and comma of ``text`` from ``start`` that is
    outside a string literal, ``depth`` counting the brackets open after it."""
    depth = 0
    for m in _TOKENS.finditer(text, start):
        c = m.group()
        if c in _OPENERS:
            depth += 1
        elif c in _CLOSERS:
            depth -= 1
        elif c != ",":
            continue
        yield m.start(), c, depth


def _matching(text: str, start: int) -> int:
    return next((i for i, c, depth in _unquoted(text, start) if c in _CLOSERS and depth == 0), -1)


def _split(inner: str) -> list[str]:
    items, start = [], 0
    for i, c, depth in _unquoted(inner):
        if c == "," and depth == 0:
            items.append(inner[start:i].strip())
            start = i + 1
    last = inner[start:].strip()
    return items + ([last] if last else [])


def wrap(line: str, indent: str) -> list[str]:
    """``line`` (without indent) as one or more lines, each prefixed by ``indent``."""
    if len(indent) + len(line) <= WIDTH:
        return [indent + line]
    opens = [m.start() for m in _OPENING.finditer(line) if not _subscript(line, m.start())]
    for start in opens:
        end = _matching(line, start)
        if end == -1 or end - start < 2:
            continue
        head, inner, tail = line[: start + 1], line[start + 1 : end], line[end:]
        items = _split(inner)
        if (
            len(items) == 1
            and items[0][:1] in _CLOSE
            and _matching(items[0], 0) == len(items[0]) - 1
        ):
            head, tail = head + items[0][0], items[0][-1] + tail
            items = _split(items[0][1:-1])
        if len(items) < 2:
            continue
        inner_lines = [ln for item in items for ln in _with_comma(wrap(item, indent + "    "))]
        return [indent + head] + inner_lines + [indent + tail]
    return [indent + line]


def _subscript(line: str, i: int) -> bool:
    """Whether the ``[`` at ``i`` indexes something (``self.blocks[0]``) rather than opens a
    list."""
    return line[i] == "[" and i > 0 and (line[i - 1].isalnum() or line[i - 1] in "_)]")


def _with_comma(lines: list[str]) -> list[str]:
    return lines[:-1] + [lines[-1] + ","]


def wrap_text(text: str, width: int = 92) -> str:
    """Prose (a docstring paragraph) filled to ``width`` columns."""
    out, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join(out + [line])
