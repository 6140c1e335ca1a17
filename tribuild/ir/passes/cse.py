"""Common-subexpression elimination: a node equal to an earlier one is replaced by it.

Terms: two nodes are *equal* when op, inputs (after renaming), attributes and type are; the
later one's readers read the earlier one. Not merged: ``param`` nodes, and layers that are
random in training mode (``Dropout``), whose two applications are two different masks.
"""
from __future__ import annotations

from tribuild.ir.builder import Builder, rewrite
from tribuild.ir.graph import Graph, Node

_RANDOM = frozenset({"Dropout"})


def _mergeable(n: Node) -> bool:
    if n.op == "param":
        return False
    layer = n.attr("layer")
    return not (layer is not None and layer.name in _RANDOM)


def cse(g: Graph) -> Graph:
    seen: dict[tuple, int] = {}

    def visit(b: Builder, i: int, n: Node) -> int:
        if not _mergeable(n):
            return b.add(n)
        key = (n.op, n.inputs, n.attrs, n.type)
        if key not in seen:
            seen[key] = b.add(n)
        return seen[key]
    return rewrite(g, visit)
