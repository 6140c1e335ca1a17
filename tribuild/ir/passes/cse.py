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
    # by (op, inputs): the earlier nodes that attrs and type must then equal (comparing those
    # on a match is cheaper than hashing them for every node)
    seen: dict[tuple[str, tuple[int, ...]], list[int]] = {}

    def visit(b: Builder, i: int, n: Node) -> int:
        if not _mergeable(n):
            return b.add(n)
        earlier = seen.setdefault((n.op, n.inputs), [])
        for j in earlier:
            m = b.nodes[j]
            if m.attrs == n.attrs and m.type == n.type:
                return j
        earlier.append(b.add(n))
        return earlier[-1]

    return rewrite(g, visit)
