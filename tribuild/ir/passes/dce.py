"""Dead-code elimination: drop every node the output does not depend on.

Terms: a node is *live* when the output reads it, directly or through live nodes; ``param``
nodes are always live (they are the function's signature). Node order is kept.
"""

from __future__ import annotations

from tribuild.ir.builder import rewrite
from tribuild.ir.graph import Graph


def live(g: Graph) -> list[bool]:
    alive = [n.op == "param" for n in g.nodes]
    alive[g.output] = True
    for i in range(len(g.nodes) - 1, -1, -1):
        if alive[i]:
            for j in g.nodes[i].inputs:
                alive[j] = True
    return alive


def dce(g: Graph) -> Graph:
    alive = live(g)
    if all(alive):
        return g
    return rewrite(g, lambda b, i, n: b.add(n) if alive[i] else -1)
