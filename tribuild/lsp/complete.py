"""Completion and signature help.

Terms:
- *call context*: the call the cursor is in, found from the tokens before the cursor (the
  text being typed rarely parses): the name called, the index of the argument being written,
  and the keyword arguments already given. Only a call of a name counts (``Linear(``,
  ``ResStage(``); calling a member that holds a layer (``fc(h)``) takes its ``forward``'s
  input, which has no keywords worth offering.
- *completions*, by where the cursor is:
  - in an import's string: the ``.tri`` files of the project, relative to the file;
  - after ``from "file" import``: the public names of that file;
  - elsewhere: the keyword arguments of the call it is in (``bias=``), the locals of its
    item that are bound before it (parameters, members, `let`s, loop variables), the names
    in the file's scope (defined or imported), the built-ins with their parameters, the
    type names and the keywords.
  The language has no member access through ``.`` on layers (members are named bare inside
  their layer), so there is nothing to offer after a ``.``.
"""

from __future__ import annotations

import posixpath

from lsprotocol import types as lsp

from tribuild.lang import FUNCTIONS, LAYERS, SUMMARIES, Token, ast
from tribuild.lsp.hover import builtin_header, item_header, joined
from tribuild.lsp.navigate import Resolver, entry_at, imp_path
from tribuild.lsp.symbols import TYPE_NAMES
from tribuild.project import KEYWORDS
from tribuild.queries.names import exports, resolve_path, scope
from tribuild.queries.syntax import item_ast, item_index, lexed

_ITEM_KINDS = {
    "layer": lsp.CompletionItemKind.Class,
    "functional": lsp.CompletionItemKind.Class,
    "fn": lsp.CompletionItemKind.Function,
    "const": lsp.CompletionItemKind.Constant,
}
_LOCAL_KINDS = {
    "param": lsp.CompletionItemKind.Variable,
    "member": lsp.CompletionItemKind.Field,
    "method": lsp.CompletionItemKind.Method,
}


class CallContext:
    __slots__ = ("callee", "argument", "keywords", "keyword", "index")

    def __init__(
        self, callee: str, argument: int, keywords: list[str], keyword: str | None, index: int
    ):
        self.callee = callee  # the name called
        self.argument = argument  # how many arguments come before the cursor's
        self.keywords = keywords  # keyword arguments already given
        self.keyword = keyword  # the keyword of the argument being written, if any
        self.index = index  # the callee's token index in the file


def _before(tokens: tuple[Token, ...], offset: int) -> int:
    """How many tokens end at or before ``offset`` (a token the cursor is inside is not)."""
    count = 0
    for tok in tokens:
        if tok.offset + len(tok.text) > offset:
            break
        count += 1
    return count


def call_context(tokens: tuple[Token, ...], offset: int) -> CallContext | None:
    end = _before(tokens, offset)
    depth = 0
    commas = 0
    keywords: list[str] = []
    keyword = None
    for i in range(end - 1, -1, -1):
        kind = tokens[i].kind
        if kind in (")", "]"):
            depth += 1
        elif kind in ("(", "["):
            if depth == 0:
                if kind == "[" or i == 0 or tokens[i - 1].kind != "ident":
                    return None
                keywords += _keywords_after(tokens, end)
                return CallContext(tokens[i - 1].text, commas, keywords, keyword, i - 1)
            depth -= 1
        elif depth == 0 and kind in ("{", "}", "newline", ";"):
            return None
        elif depth == 0 and kind == ",":
            commas += 1
        elif depth == 0 and kind == "=" and i > 0 and tokens[i - 1].kind == "ident":
            keywords.append(tokens[i - 1].text)
            if commas == 0:
                keyword = tokens[i - 1].text
    return None


def _keywords_after(tokens: tuple[Token, ...], start: int) -> list[str]:
    """The keyword arguments of a call after the cursor, up to its closing parenthesis."""
    depth = 0
    found = []
    for i in range(start, len(tokens)):
        kind = tokens[i].kind
        if kind in ("(", "["):
            depth += 1
        elif kind in (")", "]"):
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and kind in ("{", "}", "newline", ";"):
            break
        elif depth == 0 and kind == "=" and tokens[i - 1].kind == "ident":
            found.append(tokens[i - 1].text)
    return found


def callee_params(db, path: str, name: str) -> tuple[str, list[str]] | None:
    """(label, the label of each parameter) of what ``name`` calls in ``path``."""
    ref = scope(db, path).lookup(name)
    if ref is not None and ref.kind in ("layer", "functional", "fn"):
        item = item_ast(db, ref.path, ref.item_id).item
        entry = next((e for e in item_index(db, ref.path) if e.id == ref.item_id), None)
        if entry is None or not isinstance(item, (ast.Layer, ast.Fn)):
            return None
        tokens = lexed(db, ref.path)
        params = [
            joined(tokens[entry.start + p.span[0] : entry.start + p.span[1]]) for p in item.params
        ]
        return f"{name}({', '.join(params)})", params
    if ref is None and (name in LAYERS or name in FUNCTIONS):
        label = builtin_header(name)
        inner = label[len(name) + 1 : -1]
        return label, [p for p in inner.split(", ") if p]
    return None


def signature_help(db, path: str, offset: int) -> lsp.SignatureHelp | None:
    context = call_context(lexed(db, path), offset)
    if context is None:
        return None
    found = callee_params(db, path, context.callee)
    if found is None:
        return None
    label, params = found
    names = [p.split(":")[0].split("=")[0].strip() for p in params]
    if context.keyword is not None and context.keyword in names:
        active = names.index(context.keyword)
    else:
        active = context.argument
    start = len(context.callee) + 1
    infos = []
    for param in params:
        infos.append(lsp.ParameterInformation(label=(start, start + len(param))))
        start += len(param) + 2
    doc = SUMMARIES.get(context.callee) if scope(db, path).lookup(context.callee) is None else None
    return lsp.SignatureHelp(
        signatures=[
            lsp.SignatureInformation(
                label=label, parameters=infos, documentation=doc, active_parameter=active
            )
        ],
        active_signature=0,
        active_parameter=active,
    )


def completions(
    db, path: str, offset: int, files: list[str], position_at
) -> list[lsp.CompletionItem]:
    """The completions at ``offset``; ``files`` are the project's .tri files, ``position_at``
    turns an offset of this file into an LSP position."""
    tokens = lexed(db, path)
    inside = next(
        (i for i, t in enumerate(tokens) if t.offset < offset < t.offset + len(t.text)), None
    )
    if inside is not None and tokens[inside].kind == "string":
        return _file_names(path, tokens[inside], offset, files, position_at)
    end = _before(tokens, offset)
    import_names = _import_list(db, path, tokens, end)
    if import_names is not None:
        return import_names
    out: list[lsp.CompletionItem] = []
    context = call_context(tokens, offset)
    if context is not None:
        found = callee_params(db, path, context.callee)
        params = found[1] if found else []
        for position, param in enumerate(params):
            name = param.split(":")[0].split("=")[0].strip()
            if name not in context.keywords and position >= context.argument:
                out.append(
                    lsp.CompletionItem(
                        label=f"{name}=",
                        kind=lsp.CompletionItemKind.Property,
                        detail=param,
                        sort_text=f"0{name}",
                        insert_text=f"{name}=",
                    )
                )
    out += _locals(db, path, tokens, end)
    for name, ref in scope(db, path).names:
        if ref.kind in _ITEM_KINDS:
            out.append(
                lsp.CompletionItem(
                    label=name,
                    kind=_ITEM_KINDS[ref.kind],
                    detail=item_header(db, ref.path, ref.item_id),
                    sort_text=f"2{name}",
                )
            )
    taken = {item.label for item in out}
    for name in sorted({*LAYERS, *FUNCTIONS} - taken):
        out.append(
            lsp.CompletionItem(
                label=name,
                kind=lsp.CompletionItemKind.Class
                if name in LAYERS
                else lsp.CompletionItemKind.Function,
                detail=builtin_header(name),
                documentation=SUMMARIES.get(name),
                sort_text=f"3{name}",
            )
        )
    out += [
        lsp.CompletionItem(label=n, kind=lsp.CompletionItemKind.TypeParameter, sort_text=f"4{n}")
        for n in sorted(TYPE_NAMES)
    ]
    out += [
        lsp.CompletionItem(label=k, kind=lsp.CompletionItemKind.Keyword, sort_text=f"5{k}")
        for k in sorted(KEYWORDS)
    ]
    return out


def _file_names(path: str, string: Token, offset: int, files: list[str], position_at) -> list:
    """The project's files, as the import string of ``path`` would name them; each replaces
    the string's text up to the cursor."""
    folder = posixpath.dirname(path)
    start = position_at(string.offset + 1)
    end = position_at(offset)
    out = []
    for target in files:
        if target == path:
            continue
        rel = posixpath.relpath(target, folder or ".")
        out.append(
            lsp.CompletionItem(
                label=rel,
                kind=lsp.CompletionItemKind.File,
                text_edit=lsp.TextEdit(range=lsp.Range(start=start, end=end), new_text=rel),
            )
        )
    return out


def _import_list(db, path: str, tokens: tuple[Token, ...], end: int) -> list | None:
    """The public names of the file of ``from "file" import ...`` when the cursor is in
    that list; None elsewhere."""
    i = end - 1
    while i >= 0 and tokens[i].kind in ("ident", ","):
        i -= 1
    if i < 1 or tokens[i].kind != "import" or tokens[i - 1].kind != "string":
        return None
    if i < 2 or tokens[i - 2].kind != "from":
        return None
    target = resolve_path(path, imp_path(tokens[i - 1].text))
    if target is None:
        return []
    return [
        lsp.CompletionItem(
            label=name,
            kind=_ITEM_KINDS.get(ref.kind, lsp.CompletionItemKind.Text),
            detail=item_header(db, ref.path, ref.item_id),
        )
        for name, ref in exports(db, target)
    ]


def _locals(db, path: str, tokens: tuple[Token, ...], end: int) -> list[lsp.CompletionItem]:
    """The names bound in the cursor's item before it, in its region."""
    index = max(end - 1, 0)
    entry = entry_at(item_index(db, path), index)
    if entry is None:
        return []
    rel = index - entry.start
    resolver = Resolver(db, path)
    occurrences = resolver.occurrences(entry.id)
    item = item_ast(db, path, entry.id).item
    region = 0
    for i, method in enumerate(getattr(item, "methods", ()), 1):
        if method.span[0] <= rel < method.span[1]:
            region = i
    seen: dict[str, lsp.CompletionItem] = {}
    for occ in occurrences:
        if occ.role == "bind" and occ.region in (0, region) and occ.span[0] <= rel:
            if occ.name not in seen and occ.binds != "method":
                seen[occ.name] = lsp.CompletionItem(
                    label=occ.name,
                    kind=_LOCAL_KINDS.get(occ.binds or "", lsp.CompletionItemKind.Variable),
                    sort_text=f"1{occ.name}",
                )
    return list(seen.values())
