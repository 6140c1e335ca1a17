"""Zero-skip: every ternary layer's kernel is told to skip what its codes make zero.

Terms: which channels and K blocks are zero is known only once weights are packed, so the
pass marks the ``ternary`` nodes (``zero_skip=True``; plain applications of ternary layers
become ``ternary`` nodes with an empty epilogue) and the runtime finds the zero output
channels and all-zero K blocks once per packed weight (``tribuild.runtime.skip``), computes
only the rest, and gives skipped channels their epilogue over a zero accumulator.
"""

from __future__ import annotations

from tribuild.ir.builder import Builder, rewrite
from tribuild.ir.graph import Graph, Node
from tribuild.ir.passes.bn_fold import as_ternary


def zero_skip(g: Graph) -> Graph:
    def visit(b: Builder, i: int, n: Node) -> int:
        t = as_ternary(n)
        return b.add(n if t is None else t.with_attrs(zero_skip=True))

    return rewrite(g, visit)
