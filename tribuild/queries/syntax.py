"""Lexing, item splitting and parsing as queries.

Terms:
- *read_error(path)*: why a file could not be read, or None.
- *lexed(path)*: the file's tokens, with character offsets; re-runs on every edit.
- *item_index(path)*: the file's items (``ItemEntry``: id, kind, name, hash, token range).
  Token indices do not move when comments or whitespace change, so after such an edit this
  query re-runs and yields an equal value: the rebuild stops here (early cutoff).
- *item_tokens(path, item_id)*: one item's (kind, text) pairs, no offsets; equal after any
  edit that leaves the item's own tokens alone.
- *item_ast(path, item_id)*: the parsed item and its syntax diagnostics. Depends only on
  that item's tokens, so editing one item re-parses that item alone.
"""
from __future__ import annotations


from tribuild.diagnostics import Diagnostic
from tribuild.engine import derived
from tribuild.lang import ast
from tribuild.lang.items import ItemEntry, item_tokens as slice_item, split_items
from tribuild.lang.lexer import lex
from tribuild.lang.parser import parse_item
from tribuild.lang.tokens import LexResult
from tribuild.queries.inputs import source_text
from tribuild.record import record


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
def item_index(db, path: str) -> tuple[ItemEntry, ...]:
    return split_items(lexed(db, path))


def item_entry(db, path: str, item_id: str) -> ItemEntry | None:
    """The entry of ``item_id`` in ``path`` (a plain helper: reads item_index)."""
    return next((e for e in item_index(db, path) if e.id == item_id), None)


@derived
def item_tokens(db, path: str, item_id: str) -> tuple[tuple[str, str], ...]:
    entry = item_entry(db, path, item_id)
    return () if entry is None else slice_item(lexed(db, path), entry)


@derived
def item_ast(db, path: str, item_id: str) -> Parsed:
    item, diags = parse_item(item_tokens(db, path, item_id), path, item_id)
    return Parsed(item, diags)
