"""Inlining of small user fns: a ``fn_call`` whose body has at most ``INLINE_LIMIT`` nodes is
replaced by a copy of that body, its params reading the call's inputs.

Terms: the *size* of a body is its number of nodes, params and constants included; bodies
are inlined innermost first (a body's own calls were already visited by the pass that
produced it, and are inlined here recursively).
"""

from __future__ import annotations

from tribuild.ir.builder import Builder, rewrite
from tribuild.ir.graph import Graph, Node

INLINE_LIMIT = 16


def _splice(b: Builder, body: Graph, inputs: tuple[int, ...]) -> int:
    remap: dict[int, int] = {}
    params = iter(inputs)
    for i, n in enumerate(body.nodes):
        if n.op == "param":
            remap[i] = next(params)
        else:
            remap[i] = b.add(Node(n.op, tuple(remap[j] for j in n.inputs), n.attrs, n.type, n.name))
    return remap[body.output]


def inline(g: Graph) -> Graph:
    if not any(n.op == "fn_call" for n in g.nodes):
        return g

    def visit(b: Builder, i: int, n: Node) -> int:
        if n.op != "fn_call":
            return b.add(n)
        body = inline(n.attr("body"))
        if len(body.nodes) > INLINE_LIMIT:
            return b.add(n.with_attrs(body=body))
        return _splice(b, body, n.inputs)

    return rewrite(g, visit)
