"""Names in the source: which one is under the cursor, what it names, and where else it is.

Terms:
- *occurrence*: one name written in an item: its token span (relative to the item), the
  name, its *role* and its *region*. Roles: ``item`` (the item's own name), ``bind`` (a
  parameter, `let`, member or loop variable), ``ref`` (a name read, or assigned), ``type``
  (a layer used as a type), ``import`` (a name of a ``from ... import`` list), ``keyword``
  (the name of a keyword argument; ``callee`` is the name called, if it is a name).
- *region*: 0 for what a whole item sees (a layer's construction parameters and members, a
  fn's or functional layer's body), ``i + 1`` for the ``i``-th method of a stateful layer.
- *symbol*: what an occurrence names: a user item (``ItemRef``), a local (a binding of the
  item: its path, item id, name and the span of its first binding; a dim name first written
  in a type is bound there), a built-in, a file (the string of an import), or the parameter
  of a callee (a keyword argument).

Name resolution here follows the checker's: a region's own bindings, then the item's, then
the file's scope (defined or imported), then the built-ins.
"""

from __future__ import annotations

import bisect

from tribuild.base.record import fields, is_record, record
from tribuild.lang import FUNCTIONS, LAYERS, ItemEntry, ItemRef, Token, ast
from tribuild.queries.names import Scope, imports, item_head, resolve_path, scope
from tribuild.queries.syntax import item_ast, item_index, lexed

Span = tuple[int, int]


@record
class Occurrence:
    span: Span
    name: str
    role: str
    region: int
    callee: str | None = None
    binds: str | None = None  # of a binding: "param", "member", "method", "let" or "for"


@record
class Local:
    path: str
    item_id: str
    name: str
    span: Span  # of its first binding, relative to the item
    region: int
    binds: str  # how it is first bound ("dim": first written in a type)


@record
class Builtin:
    name: str


@record
class File:
    path: str


@record
class Keyword:
    callee: object  # the symbol called
    name: str


Symbol = ItemRef | Local | Builtin | File | Keyword


@record
class Site:
    """The occurrence under the cursor, in its item, and what it names."""

    path: str
    entry: ItemEntry
    occurrence: Occurrence
    symbol: Symbol | None


def token_at(tokens: tuple[Token, ...], offset: int) -> int | None:
    """The index of the token holding ``offset``, or ending right at it (a cursor just after
    a name is on it); an identifier wins over what follows it."""
    starts = [t.offset for t in tokens]
    i = bisect.bisect_right(starts, offset) - 1
    for j in (i, i - 1):
        if 0 <= j < len(tokens):
            t = tokens[j]
            if t.offset <= offset <= t.offset + len(t.text) and t.kind != "newline":
                return j
    return None


def entry_at(entries: tuple[ItemEntry, ...], index: int) -> ItemEntry | None:
    for entry in entries:
        if entry.start <= index < entry.end:
            return entry
    return None


def occurrences(item: ast.Item) -> list[Occurrence]:
    """Every name written in ``item``, in source order."""
    out: list[Occurrence] = []
    if isinstance(item, (ast.Fn, ast.Layer, ast.Const)):
        out.append(Occurrence(item.name_span, item.name, "item", 0))
    if isinstance(item, ast.Import):
        out.extend(Occurrence(n.span, n.name, "import", 0) for n in item.names or ())
        return out
    if isinstance(item, (ast.Fn, ast.Layer)):
        _params(item.params, 0, out)
        _walk(item.ret, 0, out)
    if isinstance(item, ast.Const):
        _walk(item.type, 0, out)
        _walk(item.value, 0, out)
    if isinstance(item, ast.Fn) or (isinstance(item, ast.Layer) and item.body is not None):
        _walk(item.body, 0, out)
    if isinstance(item, ast.Layer):
        for member in item.members:
            out.append(Occurrence(member.name_span, member.name, "bind", 0, binds="member"))
            _walk(member.type, 0, out)
            _walk(member.value, 0, out)
        for region, method in enumerate(item.methods, 1):
            out.append(Occurrence(method.name_span, method.name, "bind", region, binds="method"))
            _params(method.params, region, out)
            _walk(method.ret, region, out)
            _walk(method.body, region, out)
    return sorted(out, key=lambda o: o.span)


def _params(params: tuple[ast.Param, ...], region: int, out: list[Occurrence]) -> None:
    for p in params:
        out.append(Occurrence((p.span[0], p.span[0] + 1), p.name, "bind", region, binds="param"))
        _walk(p.type, region, out)
        _walk(p.default, region, out)


def _walk(node: object, region: int, out: list[Occurrence]) -> None:
    stack = [node]
    while stack:
        node = stack.pop()
        if node is None:
            continue
        if isinstance(node, tuple):
            stack.extend(node)
            continue
        if not is_record(node):
            continue
        match node:
            case ast.Name(id=name, span=span):
                out.append(Occurrence(span, name, "ref", region))
                continue
            case ast.NamedType(name=name, span=span):
                out.append(Occurrence(span, name, "type", region))
                continue
            case ast.Let(name_span=span, name=name):
                out.append(Occurrence(span, name, "bind", region, binds="let"))
            case ast.Assign(span=span, name=name):
                out.append(Occurrence((span[0], span[0] + 1), name, "ref", region))
            case ast.For(span=span, var=var):
                out.append(Occurrence((span[0] + 1, span[0] + 2), var, "bind", region, binds="for"))
            case ast.Call(func=func, kwargs=kwargs):
                callee = func.id if isinstance(func, ast.Name) else None
                for kw in kwargs:
                    out.append(
                        Occurrence((kw.span[0], kw.span[0] + 1), kw.name, "keyword", region, callee)
                    )
        stack.extend(getattr(node, name) for name in fields(node) if name != "span")


class Resolver:
    """Resolves the occurrences of one file (each item's occurrences found once)."""

    def __init__(self, db, path: str) -> None:
        self.db, self.path = db, path
        self._occurrences: dict[str, list[Occurrence]] = {}
        self._scope: Scope | None = None

    def occurrences(self, item_id: str) -> list[Occurrence]:
        found = self._occurrences.get(item_id)
        if found is None:
            item = item_ast(self.db, self.path, item_id).item
            found = self._occurrences[item_id] = occurrences(item)
        return found

    def lookup(self, name: str) -> ItemRef | None:
        if self._scope is None:
            self._scope = scope(self.db, self.path)
        return self._scope.lookup(name)

    def resolve(self, item_id: str, occ: Occurrence) -> Symbol | None:
        if occ.role == "item":
            head = item_head(self.db, self.path, item_id)
            return head[0] if head is not None else None
        if occ.role == "import":
            ref = self.lookup(occ.name)
            return ref if ref is not None and ref.kind != "unresolved" else None
        if occ.role == "keyword":
            if occ.callee is None:
                return None
            callee = self._name(item_id, occ.callee, occ.region, occ.span)
            return Keyword(callee, occ.name) if callee is not None else None
        return self._name(item_id, occ.name, occ.region, occ.span)

    def _name(self, item_id: str, name: str, region: int, span: Span) -> Symbol | None:
        local = self._local(item_id, name, region)
        if local is not None:
            return local
        ref = self.lookup(name)
        if ref is not None:
            return ref if ref.kind != "unresolved" else None
        if name in LAYERS or name in FUNCTIONS:
            return Builtin(name)
        # a dim name first written in a type: bound where it is first written
        for occ in self.occurrences(item_id):
            if occ.name == name and occ.role == "ref" and occ.region in (region, 0):
                return Local(self.path, item_id, name, occ.span, occ.region, "dim")
        return None

    def _local(self, item_id: str, name: str, region: int) -> Local | None:
        binds = [
            o
            for o in self.occurrences(item_id)
            if o.name == name and o.role == "bind" and o.region in (region, 0)
        ]
        own = [o for o in binds if o.region == region] or binds
        if not own:
            return None
        return Local(self.path, item_id, name, own[0].span, own[0].region, own[0].binds or "let")


def site_at(db, path: str, offset: int) -> Site | None:
    """The name at ``offset`` in ``path`` and what it names; None where there is no name (an
    import's string is a name of its file)."""
    tokens = lexed(db, path)
    index = token_at(tokens, offset)
    if index is None:
        return None
    entry = entry_at(item_index(db, path), index)
    if entry is None:
        return None
    rel = index - entry.start
    resolver = Resolver(db, path)
    if tokens[index].kind == "string" and entry.kind == "import":
        for imp in imports(db, path):
            if imp.item_id == entry.id and imp.span[0] <= rel < max(imp.span[1], imp.span[0] + 1):
                occ = Occurrence(imp.span, tokens[index].text, "file", 0)
                target = resolve_path(path, imp_path(tokens[index].text))
                return Site(path, entry, occ, File(target) if target else None)
        return None
    for occ in resolver.occurrences(entry.id):
        if occ.span[0] <= rel < occ.span[1]:
            return Site(path, entry, occ, resolver.resolve(entry.id, occ))
    return None


def imp_path(literal: str) -> str:
    """The path an import's string literal spells (its quotes removed)."""
    return literal[1:-1] if len(literal) >= 2 and literal[0] == '"' else literal


def definition_span(db, symbol: Symbol) -> tuple[str, str | None, Span] | None:
    """(path, item id, span relative to the item) where ``symbol`` is defined."""
    if isinstance(symbol, ItemRef):
        if symbol.kind == "unresolved":
            return None
        item = item_ast(db, symbol.path, symbol.item_id).item
        span = getattr(item, "name_span", None)
        return (symbol.path, symbol.item_id, span) if span is not None else None
    if isinstance(symbol, Local):
        return symbol.path, symbol.item_id, symbol.span
    if isinstance(symbol, File):
        return symbol.path, None, (0, 0)
    if isinstance(symbol, Keyword) and isinstance(symbol.callee, ItemRef):
        ref = symbol.callee
        item = item_ast(db, ref.path, ref.item_id).item
        for p in getattr(item, "params", ()):
            if p.name == symbol.name:
                return ref.path, ref.item_id, (p.span[0], p.span[0] + 1)
    return None


def references(db, symbol: Symbol, paths: list[str]) -> list[tuple[str, str, Span]]:
    """Every occurrence that names ``symbol``, definition included: (path, item id, span),
    in ``paths`` for a user item, in its own item for a local."""
    if isinstance(symbol, Local):
        resolver = Resolver(db, symbol.path)
        return [
            (symbol.path, symbol.item_id, occ.span)
            for occ in resolver.occurrences(symbol.item_id)
            if occ.name == symbol.name
            and occ.role != "keyword"
            and resolver.resolve(symbol.item_id, occ) == symbol
        ]
    if not isinstance(symbol, ItemRef):
        return []
    name = next((n for i, _, n in _names(db, symbol.path) if i == symbol.item_id), None)
    out = []
    for path in paths:
        resolver = Resolver(db, path)
        for entry in item_index(db, path):
            for occ in resolver.occurrences(entry.id):
                if occ.name == name and occ.role != "keyword":
                    if resolver.resolve(entry.id, occ) == symbol:
                        out.append((path, entry.id, occ.span))
    return out


def _names(db, path: str):
    return [(e.id, e.kind, e.name) for e in item_index(db, path)]
