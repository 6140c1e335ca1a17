"""A graph as the statements of a Python function body (`forward`, or a user `fn`).

Terms:
- *inlined* node: one read exactly once by another node and bound to no source name: its
  expression is written where it is read (``relu(self.bn1(self.conv1(x)))``), as in the
  source. Constants are always inlined. Every other node is *bound*: one assignment.
- *materialization point* of a node: the index of the statement that evaluates its text
  (its own for a bound node, its reader's for an inlined one).
- *names*: a bound node takes its source name (``y``), else ``t``; a name is reused
  (``x = self.stem(x)``) unless the value it holds is still read at or after a later
  statement, in which case the node gets ``name_1``, ``name_2``...
- *symbols*: the dims that `reshape` and friends read at run time are bound first, as
  ``N = x.shape[0]``.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.codegen.exprs import Expr, expression
from tribuild.codegen.pyname import RESERVED, ident
from tribuild.ir.graph import Graph, Node
from tribuild.lang import Sym, dims

KernelsOf = Callable[[Node], tuple[str, ...]]


def _used_symbols(g: Graph) -> set[str]:
    found: set[str] = set()

    def visit(v: object) -> None:
        if isinstance(v, Sym):
            found.update(s for s in dims.symbols(v.dim))
        elif isinstance(v, tuple):
            for x in v:
                visit(x)

    for n in g.nodes:
        if n.op == "call":
            visit(n.attr("args"))
    return found


def _inlined(g: Graph, uses: list[list[int]]) -> list[bool]:
    return [
        n.op == "const" or (n.op != "param" and not n.name and len(uses[i]) == 1)
        for i, n in enumerate(g.nodes)
    ]


def _last_reads(g: Graph, uses: list[list[int]], inlined: list[bool]) -> list[int]:
    end = len(g.nodes)
    point = list(range(end))
    for i in range(end - 1, -1, -1):
        if inlined[i] and uses[i]:
            point[i] = point[uses[i][0]] if uses[i][0] != -1 else end
    return [
        max((end if u == -1 else point[u]) for u in uses[i]) if uses[i] else i for i in range(end)
    ]


def body_lines(
    g: Graph,
    params: list[str],
    kernels_of: KernelsOf,
    fn_names: dict[Graph, str],
    names: dict[str, str],
) -> list[str]:
    """The body's statements; ``params`` are the Python names (or, for weights, expressions)
    of the param nodes, in order;
    ``names`` the members' attributes. Locals avoid the module's fn names."""
    uses = g.uses()
    inlined = _inlined(g, uses)
    last = _last_reads(g, uses, inlined)
    exprs: dict[int, Expr] = {}
    holder: dict[str, int] = {}  # Python name -> node whose value it holds
    lines: list[str] = []
    taken = RESERVED | frozenset(fn_names.values())
    param_ids = g.params()
    for pid, name in zip(param_ids, params, strict=True):
        exprs[pid] = Expr(name)
        holder[name] = pid
    symbols = {}
    for s, pid, axis in g.symbols:
        if s in _used_symbols(g):
            symbols[s] = _fresh(ident(s), holder, last, len(g.nodes) + 1, len(g.nodes), taken)
            lines.append(f"{symbols[s]} = {exprs[pid].text}.shape[{axis}]")
    for i, n in enumerate(g.nodes):
        if n.op == "param":
            continue
        e = expression(n, [exprs[j] for j in n.inputs], symbols, kernels_of(n), fn_names, names)
        if inlined[i]:
            exprs[i] = e
            continue
        name = _fresh(ident(n.name or "t"), holder, last, i, i, taken)
        lines.append(f"{name} = {e.text}")
        exprs[i] = Expr(name)
    lines.append(f"return {exprs[g.output].text}")
    return lines


def _fresh(
    base: str, holder: dict[str, int], last: list[int], at: int, node_id: int, taken: frozenset[str]
) -> str:
    """``base`` if no live value holds it (read after statement ``at``) and it is not
    ``taken``, else a suffixed name."""
    k = 0
    while True:
        name = base if k == 0 else f"{base}_{k}"
        held = holder.get(name)
        if name not in taken and (held is None or (held < len(last) and last[held] <= at)):
            holder[name] = node_id
            return name
        k += 1
