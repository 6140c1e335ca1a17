"""BatchNorm folding: ``bn(conv(x))``, a ``BatchNorm2d`` applied to the output of a ternary
layer read by nothing else, becomes one ``ternary`` node whose epilogue folds the
BatchNorm's affine map into the layer's scale and bias (``attr bn``, the BatchNorm's member
path). The runtime folds the running statistics at inference time (``tribuild.runtime.nn``) and
falls back to the unfolded computation in training mode, so results and state_dict keys do
not change.

Terms: a *ternary producer* is an ``apply`` of a ``TernaryConv2d`` (or ``TernaryLinear``
before a BatchNorm2d, which the checker only allows on 4-d values) or a ``ternary`` node
with an empty epilogue (no bn, activation or residual yet).
"""

from __future__ import annotations

from tribuild.base.record import replace
from tribuild.ir.builder import Builder, rewrite
from tribuild.ir.graph import Graph, Node, node

TERNARY_LAYERS = ("TernaryConv2d", "TernaryLinear")


def as_ternary(n: Node) -> Node | None:
    """``n`` as a ``ternary`` node with an empty epilogue, if it is a ternary layer's output."""
    if n.op == "ternary":
        return n
    layer = n.attr("layer")
    if n.op == "apply" and layer.ref is None and layer.name in TERNARY_LAYERS:
        return node(
            "ternary",
            n.inputs,
            n.type,
            n.name,
            path=n.attr("path"),
            layer=layer,
            bn=None,
            act="none",
            residual=False,
        )
    return None


def single_use(b: Builder, uses: list[list[int]], j: int) -> bool:
    return b.origin[j] >= 0 and len(uses[b.origin[j]]) == 1


def bn_fold(g: Graph) -> Graph:
    uses = g.uses()

    def visit(b: Builder, i: int, n: Node) -> int:
        layer = n.attr("layer")
        if (
            n.op == "apply"
            and layer.ref is None
            and layer.name == "BatchNorm2d"
            and single_use(b, uses, n.inputs[0])
        ):
            producer = as_ternary(b.nodes[n.inputs[0]])
            if (
                producer is not None
                and producer.attr("bn") is None
                and producer.attr("act") == "none"
                and not producer.attr("residual")
            ):
                folded = producer.with_attrs(bn=n.attr("path"))
                return b.add(replace(folded, type=n.type, name=n.name or producer.name))
        return b.add(n)

    return rewrite(g, visit)
