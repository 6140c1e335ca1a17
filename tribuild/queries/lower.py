"""Lowering and optimization as queries, per layer instance.

Terms:
- *ir(key)*: the graph of one checked instance's `forward` (``tribuild.ir.lower``), or, when
  the instance has errors or uses a construct codegen cannot express, no graph and the
  diagnostics that say why (the instance's own errors are reported by the target report).
- *optimized_ir(key, opt_level)*: ``ir(key)`` through the passes of ``opt_level``
  (``tribuild.ir.pipeline``). Editing one layer's body re-lowers its instances only; an
  equal graph stops the rebuild there.
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.diagnostics import Diagnostic, Label, Loc
from tribuild.engine import derived
from tribuild.ir.graph import Graph
from tribuild.ir.lower import UNSUPPORTED, Unsupported, lower_instance
from tribuild.ir.pipeline import optimize
from tribuild.lang import InstanceKey, ItemRef, ast
from tribuild.queries.semantic import QueryEnv, checked_instance, signature
from tribuild.queries.syntax import item_ast
from tribuild.queries.targets import reached_instances


@record
class Lowering:
    graph: Graph | None
    diagnostics: tuple[Diagnostic, ...]


@derived
def ir(db, key: InstanceKey) -> Lowering:
    checked = checked_instance(db, key)
    if any(d.severity == "error" for d in checked.diagnostics):
        return Lowering(None, ())

    def fn_item(ref: ItemRef):
        return item_ast(db, ref.path, ref.item_id).item, signature(
            db, ref.path, ref.item_id
        ).signature

    item = item_ast(db, key.path, key.item_id).item
    assert isinstance(item, ast.Layer)  # an instance is of a layer
    sig = signature(db, key.path, key.item_id).signature
    try:
        graph = lower_instance(item, sig, key, checked.members, QueryEnv(db, key.path), fn_item)
    except Unsupported as err:
        loc = Loc(key.path, key.item_id, err.span)
        return Lowering(
            None, (Diagnostic(UNSUPPORTED, f"cannot generate code: {err.message}", Label(loc)),)
        )
    return Lowering(graph, ())


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
