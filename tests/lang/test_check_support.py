"""Test support for the checker: a whole program parsed into a dict-backed Env.

``load_program(files)`` takes ``{path: text}`` (paths relative to one root) and resolves
imports relative to each importing file, as the query layer does through queries.
``run_program`` checks every item generically and every layer whose construction parameters
all have defaults as an instance (walking children), and renders each diagnostic as
``path:line:col: CODE: message``.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from tribuild.lang.check.checker import (
    check_instance,
    check_item,
    const_value_of,
    describe_instance,
    instance_key,
)
from tribuild.lang.check.env import DictEnv, ItemRef
from tribuild.lang.signature import signature_of
from tribuild.lang.syntax import ast
from tribuild.lang.syntax.items import item_tokens, split_items
from tribuild.lang.syntax.lexer import lex
from tribuild.lang.syntax.locate import char_range, line_col
from tribuild.lang.syntax.parser import parse_item

KIND = {ast.Fn: "fn", ast.Const: "const"}


def _kind(item: ast.Item) -> str | None:
    if isinstance(item, ast.Layer):
        return "functional" if item.body is not None else "layer"
    return KIND.get(type(item))


@dataclass
class Program:
    texts: dict[str, str]
    items: dict[ItemRef, ast.Item] = field(default_factory=dict)
    order: list[tuple[str, str, ast.Item]] = field(default_factory=list)
    diags: list = field(default_factory=list)
    env: DictEnv | None = None

    def locate(self, d) -> str:
        tokens = lex(self.texts[d.primary.loc.path])
        start, _ = char_range(tokens, split_items(tokens), d.primary.loc)
        line, col = line_col(self.texts[d.primary.loc.path], start)
        return f"{d.primary.loc.path}:{line}:{col}: {d.code}: {d.message}"


class ProgramEnv(DictEnv):
    """DictEnv whose constants are evaluated on first use."""

    program: Program

    def const_value(self, ref: ItemRef):
        if ref not in self.consts:
            item = self.program.items[ref]
            self.consts[ref] = const_value_of(
                item, self.signatures[ref], ref.path, ref.item_id, self.scope_of(ref)
            )
        return self.consts[ref]

    def scope_of(self, ref: ItemRef) -> ProgramEnv:
        env = ProgramEnv(ref.path, self.names, self.signatures, self.consts)
        env.program = self.program
        return env


def load_program(texts: dict[str, str]) -> Program:
    program = Program(texts)
    names: dict[str, dict[str, ItemRef]] = {}
    signatures = {}
    imports = []
    for path, text in texts.items():
        tokens = lex(text)
        names[path] = {}
        for entry in split_items(tokens):
            item, diags = parse_item(item_tokens(tokens, entry), path, entry.id)
            program.diags += diags
            program.order.append((path, entry.id, item))
            sig, sig_diags = signature_of(item, path, entry.id)
            program.diags += sig_diags
            kind = _kind(item)
            if isinstance(item, ast.Import):
                imports.append((path, item))
            elif kind is not None:
                ref = ItemRef(path, entry.id, kind)
                names[path][item.name] = ref
                signatures[ref] = sig
                program.items[ref] = item
    own = {path: dict(table) for path, table in names.items()}
    for path, imp in imports:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), imp.path))
        if target not in own:  # the import's own error (E02xx) is the query layer's
            chosen = {n.name: ItemRef(target, n.name, "unresolved") for n in imp.names or ()}
        else:
            wanted = own[target]
            chosen = (
                wanted
                if imp.names is None
                else {n.name: wanted[n.name] for n in imp.names if n.name in wanted}
            )
        names[path].update(chosen)
    env = ProgramEnv("", names, signatures, {})
    env.program = program
    program.env = env
    return program


def run_program(program: Program, instances: bool = True) -> list[str]:
    """Rendered diagnostics of parsing, signatures, generic checks and default instances."""
    diags = list(program.diags)
    for path, item_id, item in program.order:
        env = program.env.scope_of(ItemRef(path, item_id, ""))
        sig, _ = signature_of(item, path, item_id)
        diags += check_item(item, sig, path, item_id, env)
    if instances:  # an instance repeats no generic error (same code and place)
        generic = {(d.code, d.primary.loc) for d in diags}
        diags += [d for d in _instances(program) if (d.code, d.primary.loc) not in generic]
    return [program.locate(d) for d in dict.fromkeys(diags)]


def _instances(program: Program) -> list:
    out, seen = [], set()
    pending = []
    for ref in program.items:
        sig = program.env.signatures[ref]
        if ref.kind == "layer" and all(p.default is not None for p in sig.params):
            pending.append(
                (instance_key(ref.path, ref.item_id, sig, {}, program.env.scope_of(ref)), None)
            )
    while pending:
        key, chain = pending.pop()
        if key in seen:
            continue
        seen.add(key)
        ref = ItemRef(key.path, key.item_id, "layer")
        checked = check_instance(
            program.items[ref], program.env.signatures[ref], key, program.env.scope_of(ref)
        )
        out += checked.diagnostics
        pending += [(child, describe_instance(key)) for _, child in checked.children]
    return out


def load_dir(root: Path, pattern: str = "**/*.tri") -> Program:
    return load_program(
        {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.glob(pattern))}
    )
