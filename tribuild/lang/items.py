"""The item splitter: a file's tokens -> its items, each parsed and hashed on its own.

Terms:
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

import hashlib

from tribuild.lang.tokens import BREAKS, ITEM_KEYWORDS, LexResult
from tribuild.record import record

_KINDS = {"import": "import", "from": "import", "let": "const", "fn": "fn", "layer": "layer"}
_ANY_DEPTH = frozenset(("import", "from", "layer"))


@record
class ItemEntry:
    id: str
    kind: str         # "import", "const", "fn", "layer" or "error"
    name: str | None
    hash: str
    start: int        # token indices in the file, half-open
    end: int


def split_items(tokens: LexResult) -> tuple[ItemEntry, ...]:
    """The items of a file, in order."""
    bounds = _item_bounds(tokens)
    seen: dict[str, int] = {}
    out = []
    for start, end in bounds:
        kind, name, base = _describe(tokens, start)
        count = seen[base] = seen.get(base, 0) + 1
        item_id = base if count == 1 else f"{base}#{count}"
        digest = _digest(_pairs(tokens, start, end))
        out.append(ItemEntry(item_id, kind, name, digest, start, end))
    return tuple(out)


def item_tokens(tokens: LexResult, entry: ItemEntry) -> tuple[tuple[str, str], ...]:
    """The (kind, text) pairs of one item: what the parser reads; no offsets."""
    return _pairs(tokens, entry.start, entry.end)


def _pairs(tokens: LexResult, start: int, end: int) -> tuple[tuple[str, str], ...]:
    return tuple((t.kind, t.text) for t in tokens[start:end])


def _item_bounds(tokens: LexResult) -> list[tuple[int, int]]:
    """(start, end) of every item; ``end`` excludes trailing breaks."""
    starts: list[int] = []
    in_error = False
    depth = 0
    line_start = True
    for i, tok in enumerate(tokens):
        kind = tok.kind
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
        while tokens[end - 1].kind in BREAKS:
            end -= 1
        bounds.append((start, end))
    return bounds


def _describe(tokens: LexResult, start: int) -> tuple[str, str | None, str]:
    """(kind, name, base id) of the item starting at ``start``."""
    first = tokens[start].kind
    kind = _KINDS.get(first, "error")
    nxt = tokens[start + 1] if start + 1 < len(tokens) else None
    if kind == "error":
        return kind, None, "<error>"
    if kind == "import":
        path = nxt.text if nxt is not None and nxt.kind == "string" else "<error>"
        return kind, None, f"{first} {path}"
    if nxt is not None and nxt.kind == "ident":
        return kind, nxt.text, nxt.text
    return kind, None, f"<{kind}>"


def _digest(pairs: tuple[tuple[str, str], ...]) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update("\x1f".join(f"{k}\x1e{t}" for k, t in pairs).encode())
    return h.hexdigest()
