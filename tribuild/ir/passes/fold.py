"""Constant folding: an operator whose operands are all constants becomes a constant.

Terms: *foldable* nodes are ``unary`` and ``binary`` nodes over ``const`` nodes (scalars;
tensors are never constant in a `forward`). Arithmetic follows Python's, which matches the
generated code's: `/` is true division, `//` floors.
"""

from __future__ import annotations

import math
import operator

from tribuild.ir.builder import Builder, const_node, rewrite
from tribuild.ir.graph import Graph, Node

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
}
_UNARY: dict[str, Callable[[Any], Any]] = {"-": operator.neg, "+": operator.pos}


def fold_value(n: Node, args: list[object]) -> object | None:
    """The folded value of ``n`` over constant ``args``, None when it does not fold."""
    try:
        if n.op == "binary" and n.attr("op") in _BINARY:
            out = _BINARY[n.attr("op")](*args)
        elif n.op == "unary" and n.attr("op") in _UNARY:
            out = _UNARY[n.attr("op")](args[0])
        else:
            return None
    except (ArithmeticError, ValueError, TypeError):
        return None  # left for run time, where it fails as the source would
    if isinstance(out, float) and not math.isfinite(out):
        return None
    return out if isinstance(out, (int, float)) else None


def fold(g: Graph) -> Graph:
    def visit(b: Builder, i: int, n: Node) -> int:
        producers = [b.nodes[j] for j in n.inputs]
        if n.op in ("unary", "binary") and producers and all(p.op == "const" for p in producers):
            value = fold_value(n, [p.attr("value") for p in producers])
            if value is not None:
                return b.add(const_node(value))
        return b.add(n)

    return rewrite(g, visit)
