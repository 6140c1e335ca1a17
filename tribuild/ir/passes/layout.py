"""Memory layout: run a conv chain channels-last where a measurement says it pays.

Terms:
- *chain member*: a node whose value is a 4-D tensor and whose operation keeps a memory
  format: a *conv* (``TernaryConv2d``/``Conv2d``, applied or as a ``ternary`` node), and
  *neutral* ops: ``BatchNorm2d``, pools, ``Dropout``, ``Identity``, activation layers and
  calls, pooling calls, and elementwise ``unary``/``binary`` nodes. A *chain* is a connected
  set of members (an edge is one member reading another). User layers, ``fn`` calls,
  reshapes, reductions and everything else are outside.
- *entry*: an edge from a non-member (or a ``param``) into a member; *exit*: a member read
  by a non-member, or returned. A chain that pays gets a ``layout`` node ``channels_last``
  on each 4-D entry and ``nchw`` on each exit (one per value), so a graph never returns a
  channels-last tensor and never hands one to a node outside the chain.
- *op class* of a conv: ``depthwise`` (groups = in channels > 1), ``pointwise`` (kernel 1)
  or ``dense``. ``SPEEDUP`` is NCHW time / channels-last time for a chain of two
  conv -> BatchNorm -> ReLU blocks of that class, by channels and spatial size, conversions
  at entry and exit included: ``benchmarks/bench_layout.py``, results in
  ``benchmarks/results/layout.md`` (torch 2.13, this CPU, one thread). A size the graph does
  not pin (a symbolic ``H``) uses the geometric mean over sizes; the nearest measured
  channels and size stand for others.
- *pays*: the chain's estimated channels-last time, ``Σ w / speedup`` with ``w`` a conv's
  weight count (``cin/groups · cout · k²``, its work per output pixel) over its convs,
  is at most ``1 - MARGIN`` of ``Σ w``. A chain without convs never converts.

On CUDA the Triton kernels read NCHW, so the runtime's conversions
(``tribuild.runtime.model.channels_last``) are no-ops there: the decision is CPU-only.
"""

from __future__ import annotations

import math

from tribuild.ir.builder import Builder, rewrite
from tribuild.ir.graph import Graph, Node, int_args, node, sequential_layers
from tribuild.lang import LayerV, TensorT, dims

MARGIN = 0.05
CHANNELS = (8, 16, 32, 64, 128, 256)
SIZES = (8, 14, 28, 56)
SPEEDUP = {  # [op class][channels] = speedups at SIZES (benchmarks/results/layout.md)
    "dense": {
        8: (0.79, 0.70, 0.49, 0.86),
        16: (0.89, 0.87, 0.71, 0.97),
        32: (0.98, 1.11, 1.00, 1.00),
        64: (0.84, 1.01, 1.07, 1.19),
        128: (0.68, 0.81, 1.12, 0.97),
        256: (0.57, 0.68, 0.86, 0.87),
    },
    "pointwise": {
        8: (0.83, 0.77, 0.58, 0.44),
        16: (0.77, 0.72, 0.57, 0.44),
        32: (0.75, 0.70, 0.53, 0.52),
        64: (0.68, 0.68, 0.56, 0.53),
        128: (0.74, 0.73, 0.65, 0.58),
        256: (0.65, 0.88, 0.80, 0.60),
    },
    "depthwise": {
        8: (1.35, 1.35, 1.28, 1.17),
        16: (1.33, 1.29, 1.12, 0.89),
        32: (1.32, 1.25, 0.95, 0.82),
        64: (1.28, 1.20, 0.85, 0.82),
        128: (1.01, 1.31, 0.82, 0.69),
        256: (1.09, 0.91, 0.74, 0.55),
    },
}
CONVS = ("TernaryConv2d", "Conv2d")
NEUTRAL_LAYERS = (
    "BatchNorm2d",
    "MaxPool2d",
    "AvgPool2d",
    "Dropout",
    "Identity",
    "ReLU",
    "ReLU6",
    "GELU",
    "SiLU",
    "Sigmoid",
    "Tanh",
)
NEUTRAL_CALLS = (
    "relu",
    "relu6",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "sqrt",
    "exp",
    "max_pool2d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
)


def _nearest(values: tuple[int, ...], x: int) -> int:
    return min(values, key=lambda v: abs(math.log(v) - math.log(max(x, 1))))


def speedup(op_class: str, channels: int, size: int | None) -> float:
    """The measured speedup of a conv of ``op_class`` at ``channels`` (input size ``size``)."""
    row = SPEEDUP[op_class][_nearest(CHANNELS, channels)]
    if size is None:
        return math.exp(sum(math.log(s) for s in row) / len(row))
    return row[SIZES.index(_nearest(SIZES, size))]


def _conv_layers(n: Node) -> tuple[LayerV, ...]:
    """The conv layers a member node runs (a Sequential's too), () for neutral members."""
    layer = n.attr("layer")
    if layer is None:
        return ()
    if layer.name in CONVS:
        return (layer,)
    if layer.name == "Sequential":
        return tuple(x for x in sequential_layers(layer) if x.name in CONVS)
    return ()


def _chain_layer(layer: LayerV) -> bool:
    if layer.ref is not None:
        return False
    if layer.name == "Sequential":
        return all(_chain_layer(x) for x in sequential_layers(layer))
    return layer.name in CONVS or layer.name in NEUTRAL_LAYERS


def _four_d_dims(n: Node) -> tuple[dims.DimLike, ...] | None:
    """The dims of a node that yields a 4-d tensor, else None."""
    t = n.type
    return t.dims if isinstance(t, TensorT) and t.dims is not None and len(t.dims) == 4 else None


def _four_d(n: Node) -> bool:
    return _four_d_dims(n) is not None


def is_member(n: Node) -> bool:
    if not _four_d(n):
        return False
    if n.op in ("apply", "ternary"):
        return _chain_layer(n.attr("layer"))
    if n.op == "call":
        return n.attr("fn") in NEUTRAL_CALLS
    return n.op in ("unary", "binary")


def _cost(g: Graph, n: Node) -> tuple[float, float]:
    """``(NCHW work, estimated channels-last work)`` of a member's convs."""
    x = g.nodes[n.inputs[0]]
    x_dims = _four_d_dims(x)
    size = dims.as_int(x_dims[2]) if x_dims is not None else None
    work = cl = 0.0
    for layer in _conv_layers(n):
        cin, groups, k, cout = int_args(layer, "in_channels", "groups", "kernel", "out_channels")
        op_class = "depthwise" if groups == cin > 1 else "pointwise" if k == 1 else "dense"
        w = cin // groups * cout * k * k
        work += w
        cl += w / speedup(op_class, cin, size)
    return work, cl


def chains(g: Graph) -> list[int]:
    """The chain id of every node (its smallest member id), -1 for non-members."""
    parent = list(range(len(g.nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    member = [is_member(n) for n in g.nodes]
    for i, n in enumerate(g.nodes):
        for j in n.inputs:
            if member[i] and member[j]:
                a, b = find(i), find(j)
                parent[max(a, b)] = min(a, b)
    return [find(i) if member[i] else -1 for i in range(len(g.nodes))]


def paying_chains(g: Graph, chain: list[int] | None = None) -> set[int]:
    """The chains that pay (``chain``: ``chains(g)``, when already known)."""
    chain = chains(g) if chain is None else chain
    totals: dict[int, list[float]] = {}
    for i, n in enumerate(g.nodes):
        if chain[i] >= 0:
            work, cl = _cost(g, n)
            t = totals.setdefault(chain[i], [0.0, 0.0])
            t[0] += work
            t[1] += cl
    return {c for c, (work, cl) in totals.items() if work > 0 and cl <= (1 - MARGIN) * work}


def layout(g: Graph) -> Graph:
    chain = chains(g)
    pays = paying_chains(g, chain)
    if not pays:
        return g
    converted: dict[tuple[int, str], int] = {}  # (new id, format) -> its conversion's id

    def convert(b: Builder, j: int, fmt: str) -> int:
        if (j, fmt) not in converted:
            converted[j, fmt] = b.add(node("layout", (j,), b.nodes[j].type, "", format=fmt))
        return converted[j, fmt]

    def edge(b: Builder, reader: int, j: int, old: int) -> int:
        """The id ``reader`` reads for input ``j`` (old id ``old``), converted at chain borders."""
        if chain[reader] in pays and chain[old] != chain[reader] and _four_d(b.nodes[j]):
            return convert(b, j, "channels_last")
        if chain[old] in pays and chain[reader] != chain[old]:
            return convert(b, j, "nchw")
        return j

    def visit(b: Builder, i: int, n: Node) -> int:
        inputs = tuple(
            edge(b, i, j, old) for j, old in zip(n.inputs, g.nodes[i].inputs, strict=True)
        )
        return b.add(Node(n.op, inputs, n.attrs, n.type, n.name))

    out = rewrite(g, visit)
    if chain[g.output] not in pays:
        return out
    back = node("layout", (out.output,), out.nodes[out.output].type, "", format="nchw")
    return Graph(out.nodes + (back,), len(out.nodes), out.symbols)
