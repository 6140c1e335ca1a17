"""Rename: a user item (layer, function, constant) across the project's files, or a local
within its item; refused, with a message saying why, when the new name would clash.

A rename is refused when the new name:
- is not an identifier, or is a keyword;
- names a built-in (it would shadow it wherever the item is used);
- is already defined or imported in a file that defines or uses the item;
- is bound in an item that uses the item (a parameter, member or `let` would capture it);
- starts with ``_`` while other files import the item (it would become private to its file).
For a local, the new name must not be bound or used anywhere in its item.
"""

from __future__ import annotations

import re

from tribuild.lang import FUNCTIONS, LAYERS, ItemRef
from tribuild.lsp.navigate import Local, Resolver, definition_span, references
from tribuild.project import KEYWORDS
from tribuild.queries.names import scope

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Refused(Exception):
    """Why a rename cannot be done (shown to the user)."""


def renameable(symbol) -> bool:
    return isinstance(symbol, Local) or (
        isinstance(symbol, ItemRef) and symbol.kind in ("layer", "functional", "fn", "const")
    )


def rename_edits(db, symbol, old: str, new: str, files: list[str]) -> list[tuple[str, str, tuple]]:
    """The (path, item id, span) of every occurrence to rewrite; raises ``Refused``."""
    if not renameable(symbol):
        raise Refused(
            f"`{old}` cannot be renamed here: only layers, functions, constants and locals"
        )
    if not _IDENTIFIER.match(new) or new in KEYWORDS:
        raise Refused(f"`{new}` is not a valid name: use letters, digits and `_`, not a keyword")
    if new == old:
        return []
    found = references(db, symbol, files)
    if isinstance(symbol, Local):
        resolver = Resolver(db, symbol.path)
        if any(o.name == new for o in resolver.occurrences(symbol.item_id)):
            raise Refused(f"`{new}` is already used in `{symbol.item_id}`: pick another name")
        return found
    if new in LAYERS or new in FUNCTIONS:
        raise Refused(f"`{new}` is a built-in: renaming `{old}` to it would shadow it")
    definition = definition_span(db, symbol)
    uses = [ref for ref in found if tuple(ref) != tuple(definition or ())]
    for path in sorted({symbol.path, *(p for p, _, _ in found)}):
        if scope(db, path).lookup(new) is not None:
            raise Refused(f"`{new}` is already defined or imported in `{path}`")
        resolver = Resolver(db, path)
        for item_id in sorted({i for p, i, _ in uses if p == path}):
            if any(o.name == new and o.role == "bind" for o in resolver.occurrences(item_id)):
                raise Refused(f"`{new}` is bound in `{item_id}` of `{path}`, which uses `{old}`")
    others = sorted({p for p, _, _ in found if p != symbol.path})
    if new.startswith("_") and others:
        raise Refused(
            f"`{new}` would be private to `{symbol.path}`, but `{others[0]}` imports `{old}`"
        )
    return found
