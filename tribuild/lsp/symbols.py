"""A file's outline (document symbols) and the classes of its tokens (semantic tokens).

Terms:
- *outline*: one symbol per item: a layer (with its members and methods as children), a
  function, a constant, an import. Ranges come from the items' token ranges.
- *semantic token*: a keyword, number, string, type name, or an identifier classed by what
  it names: a layer (``class``), a function (``function``), a constant (``variable`` +
  ``readonly``), a parameter, a member (``property``) or a local (``variable``); built-ins
  carry ``defaultLibrary``. Comments are not tokens to the lexer: the editor's grammar
  colours them.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from tribuild.diagnostics import Loc
from tribuild.lang import ItemRef, ast
from tribuild.lsp.navigate import Builtin, Local, Resolver
from tribuild.lsp.positions import to_position
from tribuild.project import KEYWORDS
from tribuild.queries.inputs import source_text
from tribuild.queries.syntax import item_ast, item_index, lexed

TOKEN_TYPES = (
    "keyword",
    "number",
    "string",
    "type",
    "class",
    "function",
    "variable",
    "parameter",
    "property",
    "operator",
)
TOKEN_MODIFIERS = ("declaration", "readonly", "defaultLibrary")
TYPE_NAMES = frozenset(
    (
        "trit",
        "bool",
        "int",
        "int8",
        "int32",
        "int64",
        "float",
        "float16",
        "bfloat16",
        "float32",
        "Tensor",
        "tensor",
        "TernaryTensor",
    )
)
_KINDS = {
    "layer": lsp.SymbolKind.Class,
    "functional": lsp.SymbolKind.Class,
    "fn": lsp.SymbolKind.Function,
    "const": lsp.SymbolKind.Constant,
    "import": lsp.SymbolKind.Module,
}


def document_symbols(db, path: str, range_of) -> list[lsp.DocumentSymbol]:
    """The outline of ``path``; ``range_of(loc)`` turns a Loc into an LSP range."""
    out = []
    for entry in item_index(db, path):
        item = item_ast(db, path, entry.id).item
        whole = range_of(Loc(path, entry.id, (0, entry.end - entry.start)))
        if isinstance(item, ast.Import):
            name, selection, kind = (
                item.path,
                range_of(Loc(path, entry.id, item.path_span)),
                "import",
            )
        elif isinstance(item, (ast.Layer, ast.Fn, ast.Const)):
            name, selection = item.name, range_of(Loc(path, entry.id, item.name_span))
            kind = entry.kind
        else:
            continue
        children = []
        if isinstance(item, ast.Layer):
            for member in item.members:
                children.append(
                    lsp.DocumentSymbol(
                        name=member.name,
                        kind=lsp.SymbolKind.Field,
                        range=range_of(Loc(path, entry.id, member.span)),
                        selection_range=range_of(Loc(path, entry.id, member.name_span)),
                    )
                )
            for method in item.methods:
                children.append(
                    lsp.DocumentSymbol(
                        name=method.name,
                        kind=lsp.SymbolKind.Method,
                        range=range_of(Loc(path, entry.id, method.span)),
                        selection_range=range_of(Loc(path, entry.id, method.name_span)),
                    )
                )
        out.append(
            lsp.DocumentSymbol(
                name=name or entry.id,
                kind=_KINDS[kind],
                range=whole,
                selection_range=selection,
                detail=entry.kind,
                children=children or None,
            )
        )
    return out


def semantic_tokens(db, path: str, encoding: str) -> list[int]:
    """The protocol's relative encoding: five integers per token."""
    text = source_text(db, path).text or ""
    tokens = lexed(db, path)
    classes: dict[int, tuple[str, int]] = {}  # token index in the file -> (type, modifiers)
    resolver = Resolver(db, path)
    for entry in item_index(db, path):
        for occ in resolver.occurrences(entry.id):
            symbol = resolver.resolve(entry.id, occ)
            cls = _class_of(symbol, occ.role)
            if cls is not None:
                classes[entry.start + occ.span[0]] = cls
    data: list[int] = []
    last_line = last_char = 0
    for index, tok in enumerate(tokens):
        cls = classes.get(index) or _plain(tok.kind, tok.text)
        if cls is None:
            continue
        line, char = to_position(text, tok.offset, encoding)
        end_line, end_char = to_position(text, tok.offset + len(tok.text), encoding)
        if end_line != line:  # a token spanning lines (a string cannot): skip it
            continue
        kind, modifiers = cls
        data += [
            line - last_line,
            char - last_char if line == last_line else char,
            end_char - char,
            TOKEN_TYPES.index(kind),
            modifiers,
        ]
        last_line, last_char = line, char
    return data


def _bits(*names: str) -> int:
    return sum(1 << TOKEN_MODIFIERS.index(n) for n in names)


def _plain(kind: str, text: str) -> tuple[str, int] | None:
    if kind in KEYWORDS:
        return ("keyword", 0)
    if kind in ("int", "float"):
        return ("number", 0)
    if kind == "string":
        return ("string", 0)
    if kind == "ident" and text in TYPE_NAMES:
        return ("type", _bits("defaultLibrary"))
    return None


def _class_of(symbol, role: str) -> tuple[str, int] | None:
    declaration = _bits("declaration") if role in ("item", "bind") else 0
    if isinstance(symbol, ItemRef):
        kind = {
            "layer": "class",
            "functional": "class",
            "fn": "function",
            "const": "variable",
        }.get(symbol.kind)
        if kind is None:
            return None
        readonly = _bits("readonly") if symbol.kind == "const" else 0
        return (kind, declaration | readonly)
    if isinstance(symbol, Builtin):
        from tribuild.lang import LAYERS

        return ("class" if symbol.name in LAYERS else "function", _bits("defaultLibrary"))
    if isinstance(symbol, Local):
        kinds = {"param": "parameter", "member": "property", "method": "function"}
        return (kinds.get(symbol.binds, "variable"), declaration)
    return None
