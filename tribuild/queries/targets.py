"""What a build target, or a layer instantiated by default, reaches.

Terms:
- *root*: the instance a target builds (its entry layer with its arguments).
- *chain*: how an instance was reached from its root, as member paths
  (``("layer2[0]", "down[0]")``). An instance reachable several ways keeps the first chain in
  breadth-first order, members in source order: deterministic.
- *instance report*: every diagnostic of every instance a root reaches, each with notes
  naming its chain of instantiations, innermost first:
  ``in ResNet.layer2[0] (BasicBlock cin=64 cout=128 stride=2)``.
- *cut*: the walk does not descend into a child that is one of its own ancestors (a layer
  containing itself, E0208) or that nests deeper than ``MAX_NESTING`` (a layer building ever
  bigger copies of itself, E0209); both are reported, so every walk ends.
- *item diagnostics* of a file: a read error, or the syntax errors of each item, the
  name-resolution errors of the file and the checker's generic findings for each item.
- *file diagnostics*: what ``tribuild check`` reports for one file: its item diagnostics,
  then the instance reports of the file's layers that can be instantiated with their
  defaults. In item order; the driver sorts by position when printing.
- *import closure*: a file and every file it imports, transitively, sorted.
- *reached items*: the items a target's entry needs: itself and, transitively, the items
  its names resolve to, and the imports of each file on the way.
- *target report*: the item diagnostics of the reached items (and the file-level ones: an
  unreadable file is reported where it is imported), then its root's instance report and
  the check of its example input; each diagnostic once. So a target builds exactly when
  what it is made of has no error, whoever asks: an error in another layer of the same
  file fails `check`, not this target. (Default instances of other layers
  of those files are `tribuild check`'s and the driver's business, not the target's.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tribuild.base.record import fields, is_record, record
from tribuild.diagnostics import Diagnostic, Label, Loc, closest, register
from tribuild.engine import derived
from tribuild.lang import InstanceKey, ast, check_target_input, describe_instance
from tribuild.queries.names import import_targets, scope
from tribuild.queries.semantic import (
    has_defaults,
    instance_children,
    instance_diagnostics,
    item_diagnostics,
    layer_instance,
    signature,
)
from tribuild.queries.syntax import item_ast, item_index, item_names, read_error

Chain = tuple[tuple[str, InstanceKey], ...]
MAX_NESTING = 64
SHOWN = 6

E_CONTAINS_ITSELF = register("E0208", "a layer contains an instance of itself")
E_TOO_DEEP = register("E0209", "layer instances nest too deeply")
E_UNREADABLE = register("E0001", "a source file cannot be read")


@record
class Reach:
    """Every instance a root reaches, with its chain; and where the walk was cut: a child that
    is one of its own ancestors (``"self"``) or nests deeper than ``MAX_NESTING``."""

    instances: tuple[tuple[InstanceKey, Chain], ...]
    cut: tuple[tuple[InstanceKey, Chain, str], ...]


@derived
def reached_instances(db, root: InstanceKey) -> Reach:
    seen: dict[InstanceKey, Chain] = {root: ()}
    cut = []
    frontier = [root]
    while frontier:
        nxt = []
        for key in frontier:
            chain = seen[key]
            ancestors = {root, *(k for _, k in chain)}
            for member, child in instance_children(db, key):
                step = chain + ((member, child),)
                if child in ancestors or len(step) > MAX_NESTING:
                    cut.append((key, step, "self" if child in ancestors else "depth"))
                elif child not in seen:
                    seen[child] = step
                    nxt.append(child)
        frontier = nxt
    return Reach(tuple(seen.items()), tuple(cut))


@derived
def instance_report(db, root: InstanceKey) -> tuple[Diagnostic, ...]:
    reach = reached_instances(db, root)
    out = [_cut_diagnostic(db, root, *cut) for cut in reach.cut]
    for key, chain in reach.instances:
        notes = _chain_notes(root, chain)
        for diag in instance_diagnostics(db, key):
            out.append(
                Diagnostic(
                    diag.code,
                    diag.message,
                    diag.primary,
                    diag.secondary,
                    diag.help,
                    diag.notes + notes,
                    diag.severity,
                )
            )
    return tuple(out)


def _cut_diagnostic(
    db, root: InstanceKey, parent: InstanceKey, chain: Chain, why: str
) -> Diagnostic:
    member, child = chain[-1]
    item = item_ast(db, parent.path, parent.item_id).item
    assert isinstance(item, ast.Layer)  # an instance is of a layer
    loc = Loc(parent.path, parent.item_id, item.name_span)
    label = Label(loc, f"its member `{member}` builds {describe_instance(child)}")
    notes = _chain_notes(root, chain[:-1])
    path = _member_path(root, chain)
    if why == "self":
        return Diagnostic(
            E_CONTAINS_ITSELF,
            f"layer `{child.name}` contains an instance of itself: "
            f"{path} is {describe_instance(child)} again",
            label,
            notes=notes,
            help="a layer cannot be built from an instance of itself",
        )
    return Diagnostic(
        E_TOO_DEEP,
        f"layer instances nest more than {MAX_NESTING} levels deep",
        label,
        notes=notes,
        help="does a layer build a bigger copy of itself?",
    )


def _member_path(root: InstanceKey, chain: Chain) -> str:
    """``ResNet.layer2[0].down``; past ``SHOWN`` members, the middle ones are counted."""
    members = [m for m, _ in chain]
    if len(members) > SHOWN:
        members[SHOWN - 2 : -1] = [f"({len(members) - SHOWN + 1} more)"]
    return ".".join([root.name, *members])


def _chain_notes(root: InstanceKey, chain: Chain) -> tuple[str, ...]:
    """One note per level, innermost first; a chain longer than ``SHOWN`` levels shows its
    innermost and outermost levels around a count of those left out."""
    notes = []
    for depth in range(len(chain), -1, -1):
        path = _member_path(root, chain[:depth])
        key = chain[depth - 1][1] if depth else root
        notes.append(f"in {path} ({describe_instance(key)})")
    if len(notes) > SHOWN:
        notes[SHOWN - 2 : -1] = [f"... {len(notes) - SHOWN + 1} more levels"]
    return tuple(notes)


@record
class TargetReport:
    root: InstanceKey | None
    problem: str | None  # a target that cannot be instantiated: a config error
    diagnostics: tuple[Diagnostic, ...]


@derived
def target_report(
    db, entry_path: str, layer: str, args: tuple, input_shape: tuple | None
) -> TargetReport:
    unread = read_error(db, entry_path)
    if unread is not None:  # deleted since the configuration was read (``watch``)
        return TargetReport(None, f"cannot read the entry file `{entry_path}`: {unread}", ())
    ref = scope(db, entry_path).lookup(layer)
    if ref is None or ref.kind not in ("layer", "functional"):
        return TargetReport(None, _no_layer(db, entry_path, layer), ())
    root = layer_instance(db, ref.path, ref.item_id, args)
    if isinstance(root, str):
        return TargetReport(None, root, ())
    reached = reached_items(db, ref.path, ref.item_id)
    diags = [
        d
        for path in import_closure(db, entry_path)
        if read_error(db, path) is None
        for d in file_item_diagnostics(db, path)
        if d.primary.loc.item is None or (d.primary.loc.path, d.primary.loc.item) in reached
    ]
    diags += instance_report(db, root)
    if input_shape is not None:
        sig = signature(db, ref.path, ref.item_id).signature
        diags += check_target_input(sig, root, input_shape)
    return TargetReport(root, None, tuple(dict.fromkeys(diags)))


def _names_in(node, out: set[str]) -> None:
    """Every name an item's syntax mentions (values and type names, bound locally or not:
    a local that shadows an item only adds that item, which errs on the side of failing)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):
            stack.extend(node)
        elif isinstance(node, (ast.Name, ast.NamedType)):
            out.add(node.id if isinstance(node, ast.Name) else node.name)
        elif is_record(node):
            stack.extend(getattr(node, f) for f in fields(node) if not f.endswith("span"))


@derived
def reached_items(db, path: str, item_id: str) -> frozenset[tuple[str, str]]:
    """The items (path, id) an entry item needs: itself, the items its names resolve to,
    transitively, and the imports of every file on the way (a failed import's name is in
    scope as unresolved: its error belongs to whoever uses the file), and the text of those
    files and the files they import that reads as no item (it could define anything)."""
    seen = {(path, item_id)}
    pending = [(path, item_id)]
    while pending:
        here, item = pending.pop()
        names: set[str] = set()
        _names_in(item_ast(db, here, item).item, names)
        found = {(here, i) for i, kind, _ in item_names(db, here) if kind in ("import", "error")}
        for imported in import_targets(db, here):  # what it may bring in, unread as items
            if read_error(db, imported) is None:
                found |= {(imported, i) for i, k, _ in item_names(db, imported) if k == "error"}
        visible = scope(db, here)
        for name in names:
            ref = visible.lookup(name)
            if ref is not None and ref.kind != "unresolved":
                found.add((ref.path, ref.item_id))
        for key in found - seen:
            seen.add(key)
            pending.append(key)
    return frozenset(seen)


HELP = "\nhelp: "  # in a problem, what follows this is its help line


def _no_layer(db, entry_path: str, layer: str) -> str:
    """The problem of an entry naming no layer, with a did-you-mean and the file's layers."""
    layers = sorted(n for n, r in scope(db, entry_path).names if r.kind in ("layer", "functional"))
    close = closest(layer, layers)
    listed = f"its layers: {', '.join(layers)}" if layers else "it defines no layer"
    hidden = _first_syntax_error(db, entry_path)
    if hidden:  # two byte order marks once hid a whole file's items behind this message
        listed += f" that parses; its first syntax error, which may hide one: {hidden}"
    guess = f"did you mean `{close}`? " if close else ""
    return f"`{entry_path}` defines no layer `{layer}`{HELP}{guess}{listed}"


def _first_syntax_error(db, path: str) -> str | None:
    """``line L, column C: message`` of a file's first syntax error, or None."""
    from tribuild.queries.report import QuerySources  # the report builds on this module

    for entry in item_index(db, path):
        for diag in item_ast(db, path, entry.id).diagnostics:
            sources = QuerySources(db)
            text = sources.text(path)
            start, _ = sources.char_range(diag.primary.loc)
            line = text.count("\n", 0, start) + 1
            column = start - text.rfind("\n", 0, start)
            return f"line {line}, column {column}: {diag.message}"
    return None


def import_closure(db, entry_path: str) -> tuple[str, ...]:
    """``entry_path`` and every file it imports, transitively, sorted (paths as queries see
    them: relative to the project root)."""
    return closure_of(entry_path, lambda path: import_targets(db, path))


def closure_of(entry_path: str, imported: Callable[[str], Iterable[str]]) -> tuple[str, ...]:
    """``entry_path`` and every file reached from it through ``imported`` (the files one file
    imports), sorted: ``import_closure`` with the import lists taken from elsewhere."""
    seen = {entry_path}
    pending = [entry_path]
    while pending:
        for target in imported(pending.pop()):
            if target not in seen:
                seen.add(target)
                pending.append(target)
    return tuple(sorted(seen))


@derived
def file_diagnostics(db, path: str) -> tuple[Diagnostic, ...]:
    return file_item_diagnostics(db, path) + default_instances_report(db, path)


@derived
def file_item_diagnostics(db, path: str) -> tuple[Diagnostic, ...]:
    error = read_error(db, path)
    if error is not None:
        return (
            Diagnostic(
                E_UNREADABLE,
                f"cannot read `{path}`: {error}",
                Label(Loc(path, None, (0, 0)), error),
            ),
        )
    out: list[Diagnostic] = []
    for entry in item_index(db, path):
        out.extend(item_ast(db, path, entry.id).diagnostics)
    out.extend(scope(db, path).diagnostics)
    for entry in item_index(db, path):
        out.extend(item_diagnostics(db, path, entry.id))
    return tuple(out)


@derived
def default_instances_report(db, path: str) -> tuple[Diagnostic, ...]:
    """The instance reports of every layer of ``path`` whose parameters all have defaults."""
    out: list[Diagnostic] = []
    for entry in item_index(db, path):
        if entry.kind == "layer" and has_defaults(signature(db, path, entry.id).signature):
            root = layer_instance(db, path, entry.id, ())
            if not isinstance(root, str):
                out.extend(instance_report(db, root))
    return tuple(out)
