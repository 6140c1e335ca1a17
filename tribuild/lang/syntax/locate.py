"""From a ``Loc`` (item id + token span) back to characters, lines and columns.

Terms:
- *char range*: ``(start, end)`` character offsets in the file, half-open. An empty token span
  ``(i, i)`` points just after token ``i - 1`` (where something was missing), or at token
  ``i`` when it opens its item.
- *line/col*: 1-based; columns count characters (code points) from the start of the line.

The mapping is a pure function over ``(tokens, items)`` so that callers holding memoized
tokens (the query layer) reuse it; ``SourceMap`` bundles it with one file's text.
"""

from __future__ import annotations

from tribuild.diagnostics import Loc
from tribuild.lang.syntax.items import ItemEntry, split_items
from tribuild.lang.syntax.lexer import lex
from tribuild.lang.syntax.tokens import LexResult


def char_range(tokens: LexResult, items: tuple[ItemEntry, ...], loc: Loc) -> tuple[int, int]:
    """Character range of ``loc``; ``(0, 0)`` when its item is not in ``items``."""
    if loc.item is None:
        base, limit = 0, len(tokens)
    else:
        entry = next((e for e in items if e.id == loc.item), None)
        if entry is None:
            return (0, 0)
        base, limit = entry.start, entry.end
    first = min(base + max(loc.span[0], 0), limit)
    last = min(max(base + loc.span[1], first), limit)
    if last > first:
        end_tok = tokens[last - 1]
        return (tokens[first].offset, end_tok.offset + len(end_tok.text))
    if first > base:
        before = tokens[first - 1]
        offset = before.offset + len(before.text)
    else:
        offset = tokens[first].offset if first < len(tokens) else 0
    return (offset, offset)


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset."""
    offset = max(0, min(offset, len(text)))
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


class SourceMap:
    """One file's text with its tokens and items, for locating its Locs."""

    __slots__ = ("text", "tokens", "items")

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: LexResult = lex(text)
        self.items: tuple[ItemEntry, ...] = split_items(self.tokens)

    def char_range(self, loc: Loc) -> tuple[int, int]:
        return char_range(self.tokens, self.items, loc)

    def line_col(self, offset: int) -> tuple[int, int]:
        return line_col(self.text, offset)
