"""Line wrapping for generated Python: a statement longer than ``WIDTH`` is split at the
top-level commas of its first bracket, one item per line, recursively; a bracket holding a
single bracketed item hugs it (``nn.ModuleList([`` ... ``])``)."""
from __future__ import annotations

WIDTH = 99
_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _unquoted(text: str, start: int = 0):
    """``(index, char, depth)`` of each character of ``text`` from ``start`` that is outside a
    string literal, ``depth`` counting the brackets open after it."""
    depth, quote = 0, None
    for i in range(start, len(text)):
        c = text[i]
        if quote:
            quote = None if c == quote and text[i - 1] != "\\" else quote
            continue
        if c in "'\"":
            quote = c
            continue
        if c in _CLOSE:
            depth += 1
        elif c in ")]}":
            depth -= 1
        yield i, c, depth


def _matching(text: str, start: int) -> int:
    return next((i for i, c, depth in _unquoted(text, start) if c in ")]}" and depth == 0), -1)


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
    opens = [i for i, c in enumerate(line) if c in _CLOSE and not _subscript(line, i)]
    for start in opens:
        end = _matching(line, start)
        if end == -1 or end - start < 2:
            continue
        head, inner, tail = line[:start + 1], line[start + 1:end], line[end:]
        items = _split(inner)
        if len(items) == 1 and items[0][:1] in _CLOSE and _matching(items[0], 0) == len(items[0]) - 1:
            head, tail = head + items[0][0], items[0][-1] + tail
            items = _split(items[0][1:-1])
        if len(items) < 2:
            continue
        inner_lines = [ln for item in items for ln in _with_comma(wrap(item, indent + "    "))]
        return [indent + head] + inner_lines + [indent + tail]
    return [indent + line]


def _subscript(line: str, i: int) -> bool:
    """Whether the ``[`` at ``i`` indexes something (``self.blocks[0]``) rather than opens a list."""
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
