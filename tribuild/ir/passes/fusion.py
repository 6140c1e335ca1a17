"""Ternary fusion: a ternary layer's output, read once, by a residual add and/or an
activation, becomes one ``ternary`` node computing ``act(scale · acc + bias + residual)``
in its kernel's epilogue.

Terms:
- *epilogue activations*: ``EPILOGUE_ACTS``, the activations the kernels apply
  (``tribuild.runtime.epilogue``).
- *residual add*: ``t + r`` or ``r + t`` where ``t`` is the ternary output and ``r`` has the
  result's exact type (no broadcasting); fused only before an activation is (the epilogue
  adds the residual first).
- *basic* fusion (-O1) merges activations only; *full* fusion (-O2 and up) residual adds too.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.base.record import replace
from tribuild.ir.builder import Builder, rewrite
from tribuild.ir.graph import Graph, Node
from tribuild.ir.passes.bn_fold import as_ternary, single_use

EPILOGUE_ACTS = ("relu", "relu6", "silu", "gelu", "sigmoid")


def _producer(b: Builder, uses: list[list[int]], j: int) -> Node | None:
    t = as_ternary(b.nodes[j]) if single_use(b, uses, j) else None
    return t if t is not None and t.attr("act") == "none" else None


def _act(b: Builder, uses: list[list[int]], n: Node) -> int | None:
    if n.op != "call" or n.attr("fn") not in EPILOGUE_ACTS:
        return None
    t = _producer(b, uses, n.inputs[0])
    if t is None:
        return None
    return b.add(replace(t.with_attrs(act=n.attr("fn")), name=n.name or t.name))


def _residual(b: Builder, uses: list[list[int]], n: Node) -> int | None:
    if n.op != "binary" or n.attr("op") != "+":
        return None
    for main, other in ((0, 1), (1, 0)):
        t = _producer(b, uses, n.inputs[main])
        r = b.nodes[n.inputs[other]]
        if t is not None and not t.attr("residual") and r.type == n.type and t.type == n.type:
            fused = t.with_attrs(residual=True)
            return b.add(
                replace(fused, inputs=t.inputs + (n.inputs[other],), name=n.name or t.name)
            )
    return None


def fusion(full: bool) -> Callable[[Graph], Graph]:
    rules = (_residual, _act) if full else (_act,)

    def run(g: Graph) -> Graph:
        uses = g.uses()

        def visit(b: Builder, i: int, n: Node) -> int:
            for rule in rules:
                out = rule(b, uses, n)
                if out is not None:
                    return out
            return b.add(n)

        return rewrite(g, visit)

    run.__name__ = "fusion_full" if full else "fusion_basic"
    return run
