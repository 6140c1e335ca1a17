"""What a build target, or a layer instantiated by default, reaches.

Terms:
- *root*: the instance a target builds (its entry layer with its arguments).
- *chain*: how an instance was reached from its root, as member paths
  (``("layer2[0]", "down[0]")``). An instance reachable several ways keeps the first chain in
  breadth-first order, members in source order: deterministic.
- *instance report*: every diagnostic of every instance a root reaches, each with notes
  naming its chain of instantiations, innermost first:
  ``in ResNet.layer2[0] (BasicBlock cin=64 cout=128 stride=2)``.
"""
from __future__ import annotations

from dataclasses import dataclass

from tribuild.diagnostics import Diagnostic
from tribuild.engine import derived
from tribuild.lang.check import check_target_input
from tribuild.lang.values import InstanceKey, describe_instance
from tribuild.queries.names import scope
from tribuild.queries.semantic import (has_defaults, instance_children, instance_diagnostics,
                                       layer_instance, signature)
from tribuild.queries.syntax import item_index, read_error

Chain = tuple[tuple[str, InstanceKey], ...]


@derived
def reached_instances(db, root: InstanceKey) -> tuple[tuple[InstanceKey, Chain], ...]:
    seen: dict[InstanceKey, Chain] = {root: ()}
    frontier = [root]
    while frontier:
        nxt = []
        for key in frontier:
            for member, child in instance_children(db, key):
                if child not in seen:
                    seen[child] = seen[key] + ((member, child),)
                    nxt.append(child)
        frontier = nxt
    return tuple(seen.items())


@derived
def instance_report(db, root: InstanceKey) -> tuple[Diagnostic, ...]:
    out = []
    for key, chain in reached_instances(db, root):
        notes = _chain_notes(root, chain)
        for diag in instance_diagnostics(db, key):
            out.append(Diagnostic(diag.code, diag.message, diag.primary, diag.secondary,
                                  diag.help, diag.notes + notes, diag.severity))
    return tuple(out)


def _chain_notes(root: InstanceKey, chain: Chain) -> tuple[str, ...]:
    notes = []
    for depth in range(len(chain), -1, -1):
        path = root.name + "".join(f".{member}" for member, _ in chain[:depth])
        key = chain[depth - 1][1] if depth else root
        notes.append(f"in {path} ({describe_instance(key)})")
    return tuple(notes)


@dataclass(frozen=True, slots=True)
class TargetReport:
    root: InstanceKey | None
    problem: str | None                 # a target that cannot be instantiated: a config error
    diagnostics: tuple[Diagnostic, ...]


@derived
def target_report(db, entry_path: str, layer: str, args: tuple, input_shape: tuple | None) -> TargetReport:
    ref = scope(db, entry_path).lookup(layer) if read_error(db, entry_path) is None else None
    if ref is None or ref.kind not in ("layer", "functional"):
        return TargetReport(None, f"`{entry_path}` defines no layer `{layer}`", ())
    root = layer_instance(db, ref.path, ref.item_id, args)
    if isinstance(root, str):
        return TargetReport(None, root, ())
    diags = instance_report(db, root)
    if input_shape is not None:
        sig = signature(db, ref.path, ref.item_id).signature
        diags += check_target_input(sig, root, input_shape)
    return TargetReport(root, None, diags)


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
