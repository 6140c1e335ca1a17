"""Imports and scopes across files, as queries.

Terms:
- *public item*: a const, fn or layer whose name does not start with ``_``; ``import "f.tri"``
  brings every public item of ``f.tri`` into scope, ``from "f.tri" import A, B`` just those.
- *import path*: relative to the importing file. An import whose path leaves the project
  root (``..`` past it, or an absolute path) is refused: nothing outside the root is read.
- *item_head(path, item_id)*: what names see of one item: its ``ItemRef`` and the span of
  its name; equal after an edit of the item's body, so ``exports`` and ``scope``, which read
  heads and ``item_names`` only, stay green after one.
- *exports(path)*: name -> ItemRef of a file's public items (first definition of a name).
- *scope(path)*: every user name visible in a file, defined or imported, plus the
  diagnostics of name resolution (duplicates, unknown imported names, missing files,
  cycles). A name promised by a failing import stays in scope, marked unresolved, so it
  is not reported again as unknown. It depends on other files only through their
  ``exports``, which stay equal when a body changes, so body edits elsewhere never re-resolve
  this file.
"""

from __future__ import annotations

import bisect
import posixpath
from functools import partial

from tribuild.base.record import record, replace
from tribuild.diagnostics import Diagnostic, Label, Loc, closest, did_you_mean, register
from tribuild.engine import derived
from tribuild.lang import ItemRef, ast
from tribuild.queries.syntax import item_ast, item_names, read_error
from tribuild.queries.walks import acyclic_and_settled, settle_deepest_first, shortest_cycle

E_DUPLICATE = register("E0201", "a name is defined twice")
E_IMPORT_CONFLICT = register("E0202", "an imported name is already taken")
E_UNKNOWN_IMPORT = register("E0203", "an imported name is not defined in that file")
E_MISSING_FILE = register("E0204", "an imported file cannot be read")
E_OUTSIDE_ROOT = register("E0205", "an import leaves the project root")
E_IMPORT_CYCLE = register("E0206", "files import each other in a cycle")

_DEFINING = ("const", "fn", "layer")


@record
class ResolvedImport:
    item_id: str
    target: str | None  # project-relative path; None if it leaves the root
    names: tuple[ast.ImportName, ...] | None
    span: ast.Span  # the path string, relative to the import item


@record
class Scope:
    names: tuple[tuple[str, ItemRef], ...]  # sorted by name, each name once
    diagnostics: tuple[Diagnostic, ...]

    def lookup(self, name: str) -> ItemRef | None:
        """Binary search of ``names`` (no dict built per lookup)."""
        i = bisect.bisect_left(self.names, name, key=lambda pair: pair[0])
        return self.names[i][1] if i < len(self.names) and self.names[i][0] == name else None


def resolve_path(importer: str, spec: str) -> str | None:
    """The project-relative path ``spec`` names from ``importer``, or None if it leaves the root."""
    if not spec or spec.startswith("/") or "\\" in spec or ":" in spec:
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
    if joined == ".." or joined.startswith("../"):
        return None
    return joined


@derived
def imports(db, path: str) -> tuple[ResolvedImport, ...]:
    out = []
    for item_id, kind, _ in item_names(db, path):
        if kind != "import":
            continue
        item = item_ast(db, path, item_id).item
        if isinstance(item, ast.Import):
            out.append(
                ResolvedImport(item_id, resolve_path(path, item.path), item.names, item.path_span)
            )
    return tuple(out)


def import_targets(db, path: str) -> tuple[str, ...]:
    """The files ``path`` imports (those inside the root), in order."""
    return tuple(dict.fromkeys(i.target for i in imports(db, path) if i.target))


@derived
def item_head(db, path: str, item_id: str) -> tuple[ItemRef, ast.Span] | None:
    """(ref, name span) of a const, fn or layer; None for other items."""
    item = item_ast(db, path, item_id).item
    if isinstance(item, ast.Layer):
        ref = ItemRef(path, item_id, "functional" if item.body is not None else "layer")
    elif isinstance(item, ast.Fn):
        ref = ItemRef(path, item_id, "fn")
    elif isinstance(item, ast.Const):
        ref = ItemRef(path, item_id, "const")
    else:
        return None
    return ref, item.name_span


def _definitions(db, path: str) -> list[tuple[str, ItemRef, ast.Span]]:
    """(name, ref, name span) of every item the file defines, duplicates included."""
    out = []
    for item_id, kind, name in item_names(db, path):
        if kind in _DEFINING and name:
            head = item_head(db, path, item_id)
            if head is not None:
                out.append((name, *head))
    return out


@derived
def exports(db, path: str) -> tuple[tuple[str, ItemRef], ...]:
    seen: dict[str, ItemRef] = {}
    for name, ref, _ in _definitions(db, path):
        if not name.startswith("_"):
            seen.setdefault(name, ref)
    return tuple(seen.items())


@derived
def import_cycle(db, path: str) -> tuple[str, ...] | None:
    """The shortest chain of imports from ``path`` back to itself, or None."""
    start = (path,)
    imported = partial(_imported, db)
    settle_deepest_first(db, import_cycle, start, imported, acyclic_and_settled(db, import_cycle))
    cycle = shortest_cycle(db, import_cycle, start, imported)
    return tuple(p for (p,) in cycle) if cycle else None


def _imported(db, node: tuple[str]) -> list[tuple[str]]:
    """The readable files a file imports, as nodes of ``walks``."""
    return [(target,) for target in import_targets(db, node[0]) if _readable(db, target)]


def _readable(db, path: str) -> bool:
    return read_error(db, path) is None


@derived
def scope(db, path: str) -> Scope:
    diags: list[Diagnostic] = []
    names: dict[str, tuple[ItemRef, Loc]] = {}
    for name, ref, span in _definitions(db, path):
        loc = Loc(path, ref.item_id, span)
        if name in names:
            diags.append(_twice(name, loc, names[name][1], E_DUPLICATE, "defined"))
        else:
            names[name] = (ref, loc)
    for imp in imports(db, path):
        diags.extend(_bring_in(db, path, imp, names))
    cycle = import_cycle(db, path)
    if cycle:
        diags.append(_cycle(path, cycle, imports(db, path)))
    return Scope(tuple(sorted((n, r) for n, (r, _) in names.items())), tuple(diags))


def _bring_in(db, path: str, imp: ResolvedImport, names: dict) -> list[Diagnostic]:
    here = Loc(path, imp.item_id, imp.span)
    if imp.target is None:
        _promise(imp, names, here)
        return [
            Diagnostic(
                E_OUTSIDE_ROOT,
                "this import leaves the project root",
                Label(here, "outside the project"),
                help="imports are resolved relative to the importing file and may "
                "not reach above the folder holding Tribuild.toml",
            )
        ]
    error = read_error(db, imp.target)
    if error is not None:
        _promise(imp, names, here)
        return [
            Diagnostic(
                E_MISSING_FILE,
                f"cannot read imported file `{imp.target}`: {error}",
                Label(here, error),
            )
        ]
    public = dict(exports(db, imp.target))
    if imp.names is None:
        wanted = [(n, here) for n in public]
    else:
        wanted = [(n.name, Loc(path, imp.item_id, n.span)) for n in imp.names]
    diags = []
    for name, loc in wanted:
        ref = public.get(name)
        if ref is None:
            names.setdefault(name, (ItemRef(imp.target, name, "unresolved"), loc))
            # the name it most likely meant too: its uses are the same mistake, which the
            # import's did-you-mean already reports (not one E0307 per use)
            meant = closest(name, list(public))
            if meant is not None:
                names.setdefault(meant, (ItemRef(imp.target, meant, "unresolved"), loc))
            diags.append(_unknown_import(name, imp.target, loc, public))
        elif name in names and names[name][0] != ref:
            diags.append(_twice(name, loc, names[name][1], E_IMPORT_CONFLICT, "imported"))
        else:
            names.setdefault(name, (ref, loc))
    return diags


def _promise(imp: ResolvedImport, names: dict, loc: Loc) -> None:
    """Names a failing ``from`` import promised stay in scope as *unresolved*: the checker
    uses them silently, so the one import error is not followed by unknown-name errors."""
    for n in imp.names or ():
        names.setdefault(n.name, (ItemRef(imp.target or "", n.name, "unresolved"), loc))


def _twice(name: str, loc: Loc, first: Loc, code: str, verb: str) -> Diagnostic:
    return Diagnostic(
        code,
        f"`{name}` is {verb} here but the name is already taken",
        Label(loc, f"`{name}` {verb} again"),
        (Label(first, "first defined here"),),
        help="rename one of them",
    )


def _unknown_import(name: str, target: str, loc: Loc, public: dict) -> Diagnostic:
    return Diagnostic(
        E_UNKNOWN_IMPORT,
        f"`{name}` is not a public item of `{target}`",
        Label(loc, "not found there"),
        help=did_you_mean(name, list(public)),
    )


def _cycle(path: str, cycle: tuple[str, ...], imps: tuple[ResolvedImport, ...]) -> Diagnostic:
    first = next(i for i in imps if i.target == cycle[1])
    return Diagnostic(
        E_IMPORT_CYCLE,
        "import cycle: " + " -> ".join(cycle),
        Label(Loc(path, first.item_id, first.span), f"imports `{cycle[1]}`"),
        help="move what both files need into a third file that both import",
    )


_UNKNOWN = {"E0307": "unknown name `", "E0301": "unknown type `"}
UNKNOWN_CODES = frozenset(_UNKNOWN)  # the codes ``with_import_help`` may give a better help


def with_import_help(db, diags, files) -> list[Diagnostic]:
    """``diags`` with the help of each unknown name (E0307) or type (E0301) that another of
    ``files`` (project paths) defines as a public item replaced by the import that brings it
    in: ``import it: from "blocks.tri" import TransformerBlock``, rather than a similar local
    name. Done where diagnostics are printed, which knows the project's files; the files are
    read only when such a diagnostic exists."""
    defined: dict[str, str] | None = None
    out = []
    for d in diags:
        prefix = _UNKNOWN.get(d.code)
        if prefix is not None and d.message.startswith(prefix) and d.message.endswith("`"):
            if defined is None:
                defined = {}
                for path in sorted(files):
                    if read_error(db, path) is None:
                        for name, _ in exports(db, path):
                            defined.setdefault(name, path)
            name = d.message[len(prefix) : -1]
            source = defined.get(name)
            here = d.primary.loc.path
            if source is not None and source != here:
                spec = posixpath.relpath(source, posixpath.dirname(here) or ".")
                d = replace(d, help=f'import it: from "{spec}" import {name}')
        out.append(d)
    return out
