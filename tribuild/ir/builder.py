"""Building graphs, and rewriting one into another node by node.

Terms:
- *Builder*: an append-only list of nodes; ``add`` returns the new node's id. During a
  rewrite, ``origin[j]`` is the id, in the old graph, of the node whose visit added node ``j``
  (passes read the old graph's use counts through it).
- *rewrite*: ``rewrite(graph, visit)`` walks the nodes in order; each node, its inputs already
  renamed to the new graph's ids, goes to ``visit(builder, old_id, node)``, which returns the
  id that stands for it in the new graph (usually ``builder.add(node)``; a pass may return an
  earlier id to replace the node, or add several nodes). Every pass is a ``rewrite``.
- *scalar constants* (``const_node``): ``const`` nodes typed by their Python value.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.ir.graph import Graph, Node, node
from tribuild.lang import ScalarT


class Builder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.origin: list[int] = []
        self.visiting = -1

    def add(self, n: Node) -> int:
        self.nodes.append(n)
        self.origin.append(self.visiting)
        return len(self.nodes) - 1

    def const(self, value: object) -> int:
        return self.add(const_node(value))


def const_node(value: object) -> Node:
    dtype = "bool" if type(value) is bool else "int64" if isinstance(value, int) else "float32"
    return node("const", (), ScalarT(dtype), value=value)


Visit = Callable[[Builder, int, Node], int]


def keep(b: Builder, i: int, n: Node) -> int:
    return b.add(n)


def rewrite(g: Graph, visit: Visit) -> Graph:
    b = Builder()
    remap: list[int] = []
    for i, n in enumerate(g.nodes):
        if n.inputs:
            inputs = tuple([remap[j] for j in n.inputs])
            if inputs != n.inputs:
                n = Node(n.op, inputs, n.attrs, n.type, n.name)
        b.visiting = i
        remap.append(visit(b, i, n))
    symbols = tuple((s, remap[p], axis) for s, p, axis in g.symbols)
    return Graph(tuple(b.nodes), remap[g.output], symbols)
