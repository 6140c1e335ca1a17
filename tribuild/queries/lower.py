"""Lowering and optimization as queries, per layer instance.

Terms:
- *ir(key)*: the graph of one checked instance's `forward` (``tribuild.ir.lower``), or, when
  the instance has errors or uses a construct codegen cannot express, no graph and the
  diagnostics that say why (the instance's own errors are reported by the target report).
- *generic_ir(path, item_id)*: the same for a layer with its construction parameters
  symbolic (``lower_generic``): what codegen refuses whatever the arguments; nothing where
  it depends on them.
- *file lowering report* (``file_lowering_report``): what codegen would refuse in each layer
  of a file, target or not: its default instance and every instance that reaches, for a
  layer whose parameters all have defaults, else its generic lowering. A layer with an
  error of the checker's is left out (that error is reported, and lowering needs a sound
  instance), so `check` of a file reports E0601 wherever `compile` or `build` would.
- *optimized_ir(key, opt_level)*: ``ir(key)`` through the passes of ``opt_level``
  (``tribuild.ir.pipeline``). Editing one layer's body re-lowers its instances only; an
  equal graph stops the rebuild there.
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.diagnostics import Diagnostic, Label, Loc
from tribuild.engine import derived
from tribuild.ir.graph import Graph
from tribuild.ir.lower import (
    QUOTE,
    UNSUPPORTED,
    Undecided,
    Unsupported,
    lower_generic,
    lower_instance,
)
from tribuild.ir.pipeline import optimize
from tribuild.lang import InstanceKey, ItemRef, ast
from tribuild.queries.semantic import (
    QueryEnv,
    checked_instance,
    generic_members,
    has_defaults,
    item_diagnostics,
    signature,
)
from tribuild.queries.syntax import item_ast, item_index, item_tokens, read_error
from tribuild.queries.targets import (
    file_item_diagnostics,
    import_closure,
    reached_instances,
    reached_items,
    target_report,
)


@record
class Lowering:
    graph: Graph | None
    diagnostics: tuple[Diagnostic, ...]


@derived
def ir(db, key: InstanceKey) -> Lowering:
    checked = checked_instance(db, key)
    if any(d.severity == "error" for d in checked.diagnostics):
        return Lowering(None, ())
    fn_item = _fn_item(db)
    item = item_ast(db, key.path, key.item_id).item
    assert isinstance(item, ast.Layer)  # an instance is of a layer
    sig = signature(db, key.path, key.item_id).signature
    try:
        graph = lower_instance(item, sig, key, checked.members, QueryEnv(db, key.path), fn_item)
    except Unsupported as err:
        return Lowering(None, (_refused(db, key.path, key.item_id, err),))
    return Lowering(graph, ())


def _fn_item(db):
    def fn_item(ref: ItemRef):
        return item_ast(db, ref.path, ref.item_id).item, signature(
            db, ref.path, ref.item_id
        ).signature

    return fn_item


def _refused(db, path: str, item_id: str, err: Unsupported) -> Diagnostic:
    """The E0601 of ``err``: at its cause, with its uses as second labels."""
    help = err.help
    if help is not None and err.quote is not None:
        help = help.replace(QUOTE, _quoted(item_tokens(db, path, item_id)[slice(*err.quote)]))
    return Diagnostic(
        UNSUPPORTED,
        f"cannot generate code: {err.message}",
        Label(Loc(path, item_id, err.span), err.label),
        tuple(Label(Loc(path, item_id, span), text) for span, text in err.uses),
        help,
    )


_TIGHT_AFTER = frozenset("([.")
_TIGHT_BEFORE = frozenset(")],.([")


def _quoted(pairs) -> str:
    """Tokens as one line of source (``Linear(10, 10)``): spaces where a formatter puts them."""
    out: list[str] = []
    depth = 0
    for i, (_, text) in enumerate(pairs):
        prev = pairs[i - 1][1] if i else ""
        tight = (
            not out
            or prev in _TIGHT_AFTER
            or (text in _TIGHT_BEFORE and (text not in "([" or prev[-1:].isalnum() or prev in ")]"))
            or (depth and "=" in (text, prev))
        )
        out.append(text if tight else " " + text)
        depth += (text in "([") - (text in ")]")
    return "".join(out)


@derived
def generic_ir(db, path: str, item_id: str) -> Lowering:
    """The generic lowering of a layer without errors of the checker's (else none)."""
    item = item_ast(db, path, item_id).item
    if not isinstance(item, ast.Layer) or any(
        d.severity == "error" for d in item_diagnostics(db, path, item_id)
    ):
        return Lowering(None, ())
    sig = signature(db, path, item_id).signature
    members = generic_members(db, path, item_id) if item.body is None else None
    scope = members.scope if members is not None else ()
    try:
        graph = lower_generic(
            item,
            sig,
            path,
            item_id,
            scope,
            members.members if members is not None else (),
            QueryEnv(db, path),
            _fn_item(db),
        )
    except Undecided:
        return Lowering(None, ())
    except Unsupported as err:
        return Lowering(None, (_refused(db, path, item_id, err),))
    except Exception:  # noqa: BLE001
        # The lowering follows concrete instances; a symbolic value it cannot follow yet
        # leaves this layer undecided here. Every instance a build makes is still lowered,
        # and refused there with its own diagnostic, so nothing is hidden from a build.
        return Lowering(None, ())
    return Lowering(graph, ())


@derived
def file_lowering_report(db, path: str) -> tuple[Diagnostic, ...]:
    out: list[Diagnostic] = []
    for entry in item_index(db, path):
        if entry.kind not in ("layer", "functional") or entry.name is None:
            continue
        if has_defaults(signature(db, path, entry.id).signature):
            # as the target `compile FILE --target LAYER` makes: items, imports, instances
            report = target_report(db, path, entry.name, (), None)
            if report.root is not None and not _errors(report.diagnostics):
                out.extend(lowering_report(db, report.root))
        elif not _errors(_reached_item_diagnostics(db, path, entry.id)):
            out.extend(generic_ir(db, path, entry.id).diagnostics)
    return tuple(out)


def _errors(diags: tuple[Diagnostic, ...]) -> bool:
    return any(d.severity == "error" for d in diags)


def _reached_item_diagnostics(db, path: str, item_id: str) -> tuple[Diagnostic, ...]:
    """The item diagnostics a target of this item would report (``target_report``'s first
    part): a layer whose imports or callees have errors is not lowered."""
    reached = reached_items(db, path, item_id)
    return tuple(
        d
        for p in import_closure(db, path)
        if read_error(db, p) is None
        for d in file_item_diagnostics(db, p)
        if d.primary.loc.item is None or (d.primary.loc.path, d.primary.loc.item) in reached
    )


@derived
def optimized_ir(db, key: InstanceKey, opt_level: str) -> Lowering:
    lowered = ir(db, key)
    if lowered.graph is None:
        return lowered
    return Lowering(optimize(lowered.graph, opt_level), ())


@derived
def lowering_report(db, root: InstanceKey) -> tuple[Diagnostic, ...]:
    return tuple(
        d for key, _ in reached_instances(db, root).instances for d in ir(db, key).diagnostics
    )
