"""Lexing, item splitting and parsing as queries.

Terms:
- *read_error(path)*: why a file could not be read, or None.
- *lexed(path)*: the file's tokens, with character offsets: what locating a diagnostic needs
  (and the item index of a file whose chunks do not all end clean).
- *chunks(path)*, *chunk_text(path, i)*, *chunk_lexed(path, i)*: the file's text cut into
  chunks (``tribuild.lang.syntax.items``), one chunk's text, and its tokens and items (no offsets).
  An edit re-lexes the chunks whose text changed; a comment or whitespace edit yields equal
  tokens, and the rebuild stops there (early cutoff).
- *item_places(path)*: the file's items and the chunk holding each (``ItemPlace``).
- *item_index(path)*: the file's items (``ItemEntry``: id, kind, name, hash, token range in
  the file). Equal after a comment or whitespace edit (token indices do not move).
- *item_names(path)*: the (id, kind, name) of each item: equal after an edit that adds,
  removes or renames no item, so name resolution, which reads it, stays green after a body edit.
- *item_tokens(path, item_id)*: one item's (kind, text) pairs, no offsets; equal after any
  edit that leaves the item's own tokens alone.
- *item_ast(path, item_id)*: the parsed item and its syntax diagnostics. Depends only on
  that item's tokens, so editing one item re-parses that item alone.
- *item_construction(path, item_id)*: the parameters and ``let`` members of a layer (empty for
  any other item): equal after an edit of the layer's methods, so what only evaluates members
  stays green.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.base.record import record
from tribuild.diagnostics import Diagnostic
from tribuild.engine import derived
from tribuild.lang import (
    Chunk,
    ItemEntry,
    ItemPlace,
    LexResult,
    Pairs,
    ast,
    chunked_items,
    lex,
    lex_chunk,
    parse_item,
    split_chunks,
    split_items,
)
from tribuild.lang import item_tokens as slice_item
from tribuild.queries.inputs import source_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@record
class Parsed:
    item: ast.Item
    diagnostics: tuple[Diagnostic, ...]


@derived
def read_error(db, path: str) -> str | None:
    """Why ``path`` has no text (None when it has): a narrow view of the input that stays
    equal across edits, so readers that only care whether a file exists stay green."""
    src = source_text(db, path)
    return None if src.text is not None else (src.error or "cannot be read")


@derived
def lexed(db, path: str) -> LexResult:
    return lex(source_text(db, path).text or "")


@derived
def chunks(db, path: str) -> tuple[str, ...]:
    return split_chunks(source_text(db, path).text or "")


@derived
def chunk_text(db, path: str, index: int) -> str:
    texts = chunks(db, path)
    return texts[index] if index < len(texts) else ""


@derived
def chunk_lexed(db, path: str, index: int) -> Chunk:
    return lex_chunk(chunk_text(db, path, index))


@derived
def item_places(db, path: str) -> tuple[ItemPlace, ...]:
    lexes = [chunk_lexed(db, path, i) for i in range(len(chunks(db, path)))]
    if all(c.clean for c in lexes[:-1]):
        return chunked_items(lexes)
    return tuple(ItemPlace(e, -1, 0) for e in split_items(lexed(db, path)))


@derived
def item_index(db, path: str) -> tuple[ItemEntry, ...]:
    return tuple(p.entry for p in item_places(db, path))


@derived
def item_names(db, path: str) -> tuple[tuple[str, str, str | None], ...]:
    """(id, kind, name) of each item, in order: ``item_index`` less hashes and token ranges."""
    return tuple((p.entry.id, p.entry.kind, p.entry.name) for p in item_places(db, path))


_INDEXES: dict[tuple[str, str], tuple[object, dict]] = {}


def indexed(kind: str, path: str, value: Any, build: Callable[[Any], dict]) -> dict:
    """``build(value)``, a dict over a memoized value, built once per value: kept, with the
    value it was built from, for the last value of each ``(kind, path)`` (so looking items up
    in a file of n items costs O(n), not O(n) per item)."""
    held = _INDEXES.get((kind, path))
    if held is None or held[0] is not value:
        held = _INDEXES[(kind, path)] = (value, build(value))
    return held[1]


@derived
def item_tokens(db, path: str, item_id: str) -> Pairs:
    places = item_places(db, path)
    place = indexed("places", path, places, lambda ps: {p.entry.id: p for p in ps}).get(item_id)
    if place is None:
        return ()
    if place.chunk < 0:
        return slice_item(lexed(db, path), place.entry)
    start, end = place.entry.start - place.base, place.entry.end - place.base
    return chunk_lexed(db, path, place.chunk).pairs[start:end]


@derived
def item_ast(db, path: str, item_id: str) -> Parsed:
    item, diags = parse_item(item_tokens(db, path, item_id), path, item_id)
    return Parsed(item, diags)


@derived
def item_construction(
    db, path: str, item_id: str
) -> tuple[tuple[ast.Param, ...], tuple[ast.Let, ...]]:
    item = item_ast(db, path, item_id).item
    return (item.params, item.members) if isinstance(item, ast.Layer) else ((), ())
