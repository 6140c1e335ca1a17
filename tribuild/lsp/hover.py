"""Hover: what a name is, as Markdown.

- A user item: its header as written (parameters, defaults, forward's types), the comment
  lines right above it, and for a layer the instances the project builds of it.
- A local (parameter, `let`, member, loop variable, dim name): its type or value from the
  item's generic check (symbolic construction parameters), then its concrete type or value in
  each instance the project builds, named by instance and by target.
- A built-in: its parameters and one line about it (``lang.builtins.docs``).
- A keyword argument: the callee's parameter. An import's string: the file, or why it
  cannot be read.
"""

from __future__ import annotations

from tribuild.lang import FUNCTIONS, LAYERS, REQUIRED, SUMMARIES, ItemRef, ast, describe_instance
from tribuild.lsp.navigate import Builtin, File, Keyword, Local, Site
from tribuild.queries.editor import instance_bindings, item_bindings
from tribuild.queries.syntax import item_ast, item_index, lexed, read_error

SHOWN_INSTANCES = 8


class Built:
    """An instance the project builds: its key, the targets that reach it, and the example
    input of the target whose own instance it is (None for others)."""

    __slots__ = ("key", "targets", "input")

    def __init__(self, key, targets: list[str], input: tuple[int, ...] | None) -> None:
        self.key, self.targets, self.input = key, targets, input


def hover_text(db, site: Site, instances) -> str | None:
    """Markdown for ``site``; ``instances(path, item_id)`` lists the instances the project
    builds of an item (``Built``)."""
    symbol = site.symbol
    if isinstance(symbol, ItemRef):
        return item_text(db, symbol, instances)
    if isinstance(symbol, Local):
        return local_text(db, site, symbol, instances)
    if isinstance(symbol, Builtin):
        return _code(builtin_header(symbol.name)) + "\n\n" + SUMMARIES.get(symbol.name, "")
    if isinstance(symbol, File):
        error = read_error(db, symbol.path)
        return f"`{symbol.path}`" + (f": cannot be read: {error}" if error else "")
    if isinstance(symbol, Keyword):
        return keyword_text(db, symbol)
    return None


def _code(text: str) -> str:
    return f"```tri\n{text}\n```"


def builtin_header(name: str) -> str:
    if name in LAYERS:
        params = [
            f"{n}: {kind}" + ("" if d is REQUIRED else f" = {_literal(d)}")
            for n, kind, d in LAYERS[name].params
        ]
    else:
        params = [
            n + ("" if d is REQUIRED else f" = {_literal(d)}") for n, d in FUNCTIONS[name].params
        ]
    return f"{name}({', '.join(params)})"


def _literal(value: object) -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def item_header(db, path: str, item_id: str) -> str:
    """An item as written up to its body, on one line."""
    entry = next((e for e in item_index(db, path) if e.id == item_id), None)
    if entry is None:
        return item_id
    tokens = lexed(db, path)[entry.start : entry.end]
    depth = 0
    out = []
    for i, tok in enumerate(tokens):
        if tok.kind in ("(", "["):
            depth += 1
        elif tok.kind in (")", "]"):
            depth -= 1
        elif tok.kind == "{" and depth == 0 and i > 0:
            break
        if tok.kind != "newline":
            out.append(tok)
    return joined(out)


def joined(tokens) -> str:
    """Tokens as one line of source, spaced as people write them."""
    text = ""
    for prev, tok in zip([None, *tokens], tokens, strict=False):
        glue = "" if prev is None or _tight(prev.kind, tok.kind) else " "
        text += glue + tok.text
    return text


def param_text(db, local: Local) -> str | None:
    """A parameter as declared (``stride: int = 1``)."""
    item = item_ast(db, local.path, local.item_id).item
    params = list(getattr(item, "params", ()))
    for method in getattr(item, "methods", ()):
        params += method.params
    param = next((p for p in params if p.span[0] == local.span[0]), None)
    entry = next((e for e in item_index(db, local.path) if e.id == local.item_id), None)
    if param is None or entry is None:
        return None
    start = entry.start + param.span[0]
    return joined(lexed(db, local.path)[start : entry.start + param.span[1]])


def _tight(before: str, after: str) -> bool:
    return before in ("(", "[", ".", "<") or after in (")", "]", ",", ".", ":", "(", ">", "<")


def doc_comment(db, path: str, item_id: str, text: str) -> str:
    """The ``#`` comment lines right above an item."""
    entry = next((e for e in item_index(db, path) if e.id == item_id), None)
    if entry is None:
        return ""
    start = lexed(db, path)[entry.start].offset
    lines = text[:start].split("\n")[:-1]
    out: list[str] = []
    for line in reversed(lines):
        stripped = line.strip()
        if not stripped.startswith("#"):
            break
        out.append(stripped.lstrip("#").strip())
    return "\n".join(reversed(out)).strip()


def item_text(db, ref: ItemRef, instances) -> str:
    from tribuild.queries.inputs import source_text

    parts = [_code(item_header(db, ref.path, ref.item_id))]
    doc = doc_comment(db, ref.path, ref.item_id, source_text(db, ref.path).text or "")
    if doc:
        parts.append(doc)
    built = instances(ref.path, ref.item_id)
    if built:
        lines = [f"- `{describe_instance(b.key)}`{_labels(b.targets)}" for b in built]
        parts.append(_listed("Instances built:", lines))
    return "\n\n".join(parts)


def _labels(targets: list[str], input: tuple[int, ...] | None = None) -> str:
    shown = ", ".join(targets)
    if input is not None:
        shown += f"; input {list(input)}"
    return f" (in {shown})" if targets else ""


def _listed(title: str, lines: list[str]) -> str:
    if len(lines) > SHOWN_INSTANCES:
        lines = lines[:SHOWN_INSTANCES] + [f"- ... and {len(lines) - SHOWN_INSTANCES} more"]
    return title + "\n" + "\n".join(lines)


def local_text(db, site: Site, local: Local, instances) -> str:
    item = item_ast(db, local.path, local.item_id).item
    is_binding = site.occurrence.role == "bind" or (
        site.occurrence.role == "ref" and _is_assign(item, site.occurrence.span)
    )
    span = site.occurrence.span
    generic = _value_at(item_bindings(db, local.path, local.item_id), local.name, span, is_binding)
    declared = param_text(db, local) if local.binds == "param" else None
    if declared and (not generic or generic == local.name):
        parts = [_code(declared)]
    else:
        parts = [_code(f"{local.name}: {generic}" if generic else local.name)]
    lines = []
    for built in instances(local.path, local.item_id):
        bindings = instance_bindings(db, built.key, built.input)
        value = _value_at(bindings, local.name, span, is_binding)
        if value:
            where = describe_instance(built.key)
            lines.append(f"- `{value}` in `{where}`{_labels(built.targets, built.input)}")
    if lines:
        parts.append(_listed("In each instance:", lines))
    return "\n\n".join(parts)


def _is_assign(item: ast.Item, span: tuple[int, int]) -> bool:
    from tribuild.base.record import fields, is_record

    stack: list = [item]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):
            stack.extend(node)
        elif isinstance(node, ast.Assign) and node.span[0] == span[0]:
            return True
        elif is_record(node):
            stack.extend(getattr(node, f) for f in fields(node) if f != "span")
    return False


def _value_at(bindings, name: str, span: tuple[int, int], is_binding: bool) -> str | None:
    """The value ``name`` has at ``span``: its binding there, else the last binding before it
    (a loop that binds it several times shows each value)."""
    mine = [(s, v) for s, n, v in bindings if n == name]
    if is_binding:
        values = [v for s, v in mine if s == span]
    else:
        before = [s for s, _ in mine if s is not None and s[0] < span[0]]
        last = max(before) if before else None
        values = [v for s, v in mine if s == last]
    if not values:
        values = [v for s, v in mine if s is None]
    values = list(dict.fromkeys(values))
    return " | ".join(values[:4]) + (" | ..." if len(values) > 4 else "") if values else None


def keyword_text(db, symbol: Keyword) -> str | None:
    callee = symbol.callee
    if isinstance(callee, Builtin):
        return (
            _code(builtin_header(callee.name)) + f"\n\nparameter `{symbol.name}` of `{callee.name}`"
        )
    if isinstance(callee, ItemRef):
        return _code(item_header(db, callee.path, callee.item_id)) + (
            f"\n\nparameter `{symbol.name}`"
        )
    return None
