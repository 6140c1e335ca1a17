"""The item splitter: a file's tokens -> its items, each parsed and hashed on its own.

Terms:
- *chunk*: a piece of a file's text cut (``split_chunks``) before every line that starts, in
  column 0, with ``import``, ``from``, ``let``, ``fn`` or ``layer``: where a top-level item
  usually starts. Each chunk is lexed on its own (``lexer.scan``), so an edit re-lexes one
  chunk. When every chunk but the last ends *clean* (``lexer.scan``), the chunks' tokens,
  one after another, are exactly the file's tokens and every chunk starts an item
  (``chunked_items``); otherwise the file is lexed whole (``split_items``).
- *item start*: a token at brace depth 0 at the start of the file or right after a statement
  break that is ``import``, ``from``, ``let``, ``fn`` or ``layer``. ``import``, ``from`` and
  ``layer`` at the start of a line start an item at any depth (they never nest), so an
  unclosed brace swallows only its own item.
- *error item*: top-level tokens at the start of a line that start no item; consecutive junk
  lines form one error item.
- *item*: the tokens from one item start to the next, trailing breaks excluded.
- *item id*: stable and position-independent: the name of a let/fn/layer, ``import "p"`` or
  ``from "p"`` for imports, ``<error>`` for junk (``<const>``, ``<fn>``, ``<layer>`` when the
  name is missing); a repeated id gets ``#2``, ``#3``... in file order.
- *item hash*: hex digest of the item's (kind, text) pairs: whitespace and comments do not
  change it.
"""

from __future__ import annotations

import re

from tribuild.base.hashing import blake2b
from tribuild.base.record import record
from tribuild.lang.syntax.lexer import scan
from tribuild.lang.syntax.tokens import BREAKS, ITEM_KEYWORDS, LexResult

Pairs = tuple[tuple[str, str], ...]
"""(kind, text) of each token: what the parser reads; no offsets."""

_KINDS = {"import": "import", "from": "import", "let": "const", "fn": "fn", "layer": "layer"}
_ANY_DEPTH = frozenset(("import", "from", "layer"))
_CHUNK_START = re.compile(r"^(?=(?:import|from|let|fn|layer)(?![A-Za-z0-9_]))", re.MULTILINE)


@record
class Chunk:
    """One chunk lexed: its tokens, whether it ends clean (``lexer.scan``), and its items as
    (start, end, kind, name, base id, hash), token indices in the chunk."""

    pairs: Pairs
    clean: bool
    items: tuple[tuple[int, int, str, str | None, str, str], ...]


@record
class ItemEntry:
    id: str
    kind: str  # "import", "const", "fn", "layer" or "error"
    name: str | None
    hash: str
    start: int  # token indices in the file, half-open
    end: int


@record
class ItemPlace:
    """Where an item's tokens are: its chunk (-1 when the file was lexed whole) and the index
    in the file of that chunk's first token."""

    entry: ItemEntry
    chunk: int
    base: int


def split_chunks(text: str) -> tuple[str, ...]:
    """``text`` cut into chunks (their concatenation is ``text``). The first chunk runs to the
    second cut, so a comment added above the first item does not renumber the chunks."""
    cuts = [m.start() for m in _CHUNK_START.finditer(text)][1:]
    return tuple(text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True))


def lex_chunk(text: str) -> Chunk:
    """Lex one chunk and find its items."""
    pairs, _, clean = scan(text)
    return _chunk(tuple(pairs), clean)


def chunked_items(chunks: list[Chunk]) -> tuple[ItemPlace, ...]:
    """The items of a file from its chunks, each lexed on its own (all clean but the last):
    their entries equal ``split_items`` of the whole file's tokens."""
    return _places(chunks, whole=False)


def split_items(tokens: LexResult) -> tuple[ItemEntry, ...]:
    """The items of a file lexed whole, in order."""
    return tuple(
        p.entry
        for p in _places([_chunk(tuple((t.kind, t.text) for t in tokens), True)], whole=True)
    )


def item_tokens(tokens: LexResult, entry: ItemEntry) -> Pairs:
    """The (kind, text) pairs of one item (of a file lexed whole)."""
    return tuple((t.kind, t.text) for t in tokens[entry.start : entry.end])


def _chunk(pairs: Pairs, clean: bool) -> Chunk:
    found = []
    for start, end in _item_bounds(pairs):
        kind, name, base_id = _describe(pairs, start)
        found.append((start, end, kind, name, base_id, _digest(pairs[start:end])))
    return Chunk(pairs, clean, tuple(found))


def _places(chunks: list[Chunk], whole: bool) -> tuple[ItemPlace, ...]:
    """The items of consecutive chunks (or of the whole file as one chunk)."""
    seen: dict[str, int] = {}
    out = []
    base = 0
    for n, chunk in enumerate(chunks):
        for start, end, kind, name, base_id, digest in chunk.items:
            count = seen[base_id] = seen.get(base_id, 0) + 1
            item_id = base_id if count == 1 else f"{base_id}#{count}"
            entry = ItemEntry(item_id, kind, name, digest, base + start, base + end)
            out.append(ItemPlace(entry, -1 if whole else n, base))
        base += len(chunk.pairs)
    return tuple(out)


def _item_bounds(tokens: Pairs) -> list[tuple[int, int]]:
    """(start, end) of every item; ``end`` excludes trailing breaks."""
    starts: list[int] = []
    in_error = False
    depth = 0
    line_start = True
    for i, (kind, _) in enumerate(tokens):
        if kind in BREAKS:
            line_start = True
            continue
        if line_start and (depth == 0 or kind in _ANY_DEPTH):
            if kind in ITEM_KEYWORDS:
                starts.append(i)
                in_error, depth = False, 0
            elif not in_error:
                starts.append(i)
                in_error = True
        line_start = False
        if kind == "{":
            depth += 1
        elif kind == "}" and depth > 0:
            depth -= 1
    bounds = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(tokens)
        while tokens[end - 1][0] in BREAKS:
            end -= 1
        bounds.append((start, end))
    return bounds


def _describe(tokens: Pairs, start: int) -> tuple[str, str | None, str]:
    """(kind, name, base id) of the item starting at ``start``."""
    first = tokens[start][0]
    kind = _KINDS.get(first, "error")
    nxt_kind, nxt_text = tokens[start + 1] if start + 1 < len(tokens) else (None, None)
    if kind == "error":
        return kind, None, "<error>"
    if kind == "import":
        path = nxt_text if nxt_kind == "string" else "<error>"
        return kind, None, f"{first} {path}"
    if nxt_kind == "ident" and nxt_text is not None:
        return kind, nxt_text, nxt_text
    return kind, None, f"<{kind}>"


def _digest(pairs: Pairs) -> str:
    h = blake2b(digest_size=16)
    h.update("\x1f".join(map("\x1e".join, pairs)).encode())
    return h.hexdigest()
