"""The names an expression reads.

Terms:
- *free name*: an ``ast.Name`` of an expression that no list comprehension inside it binds:
  in ``[f(i, k) for i in 0..n]`` the free names are ``f``, ``k`` and ``n``.
"""

from __future__ import annotations

from tribuild.base.record import fields, is_record
from tribuild.lang.syntax import ast


def free_names(expr: ast.Expr) -> tuple[str, ...]:
    """The free names of ``expr``, each once, in order of first appearance."""
    out: dict[str, None] = {}
    stack: list[tuple[object, frozenset[str]]] = [(expr, frozenset())]
    while stack:
        node, bound = stack.pop()
        if isinstance(node, ast.Name):
            if node.id not in bound:
                out.setdefault(node.id)
        elif isinstance(node, ast.ListComp):
            stack.append((node.iterable, bound))
            stack.append((node.elem, bound | {node.var}))
        elif isinstance(node, tuple):
            stack.extend((child, bound) for child in reversed(node))
        elif is_record(node):
            children = [getattr(node, name) for name in fields(node) if name != "span"]
            stack.extend((child, bound) for child in reversed(children))
    return tuple(out)
