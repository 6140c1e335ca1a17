"""The passes run at each optimization level.

Terms:
- *level*: ``"0"`` (no pass), ``"1"`` (dead code, constant folding, common subexpressions,
  basic fusion: a ternary layer with its activation), ``"2"`` (all passes: also algebraic
  simplification, inlining of small fns, BatchNorm folding, full fusion with the residual
  add, zero-skip, channels-last layout where it pays), ``"3"`` (as 2, with BitLinear fusion:
  ternary linear layers quantize their own input; codegen adds autotune configs to the
  kernels) and ``"s"`` (smallest code: as 2 without inlining and without
  layout conversions).
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.ir.graph import Graph
from tribuild.ir.passes.bitlinear import bitlinear
from tribuild.ir.passes.bn_fold import bn_fold
from tribuild.ir.passes.cse import cse
from tribuild.ir.passes.dce import dce
from tribuild.ir.passes.fold import fold
from tribuild.ir.passes.fusion import fusion
from tribuild.ir.passes.inline import inline
from tribuild.ir.passes.layout import layout
from tribuild.ir.passes.simplify import simplify
from tribuild.ir.passes.zero_skip import zero_skip

Pass = Callable[[Graph], Graph]
LEVELS = ("0", "1", "2", "3", "s")
_BASIC = (fold, cse, fusion(full=False), dce)
_FULL = (simplify, fold, cse, dce, bn_fold, fusion(full=True), dce, zero_skip)


def passes(level: str) -> tuple[Pass, ...]:
    if level not in LEVELS:
        raise ValueError(f"unknown optimization level {level!r}; expected one of {LEVELS}")
    if level == "0":
        return ()
    if level == "1":
        return (dce,) + _BASIC
    if level == "s":
        return _FULL
    if level == "3":
        return (inline,) + _FULL + (bitlinear, dce, layout)
    return (inline,) + _FULL + (layout,)


def optimize(graph: Graph, level: str) -> Graph:
    for p in passes(level):
        graph = p(graph)
    return graph
