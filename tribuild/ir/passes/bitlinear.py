"""BitLinear fusion (-O3): a ``TernaryLinear`` whose input is ``quantize_activations(x)``
becomes one ``ternary`` node on ``x`` with ``quantize=True``, so that its kernel quantizes
the activations itself (the decode kernel, ``tribuild.runtime.kernels.triton.ternary_decode``,
in its prologue; the other kernels launch ``act_quant`` first, as the unfused code did).

Terms: the quantization may feed several layers (attention's projections): each is fused,
and the quantization node is left to dead-code elimination once nothing else reads it. Only
at -O3, where the autotuner times the fused kernel against the others: the lower levels'
code does not change.
"""

from __future__ import annotations

from tribuild.base.record import replace
from tribuild.ir.builder import Builder, rewrite
from tribuild.ir.graph import Graph, Node


def bitlinear(g: Graph) -> Graph:
    def visit(b: Builder, i: int, n: Node) -> int:
        if n.op == "ternary" and n.attr("layer").name == "TernaryLinear" and n.inputs:
            q = b.nodes[n.inputs[0]]
            if q.op == "call" and q.attr("fn") == "quantize_activations":
                fused = n.with_attrs(quantize=True)
                return b.add(replace(fused, inputs=(q.inputs[0], *n.inputs[1:])))
        return b.add(n)

    return rewrite(g, visit)
