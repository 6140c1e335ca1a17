"""Algebraic simplification: rewrite nodes into simpler equivalents.

Terms (each rule keeps the value and its type exactly):
- *identity element*: ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1``,
  ``x ** 1`` are ``x`` when ``x`` already has the result's type (no broadcast, no promotion);
  ``-(-x)`` is ``x``.
- *no-op layers and shape ops*: applying ``Identity``; `reshape`/`flatten` to the input's own
  shape; `transpose(transpose(x, a, b), a, b)`.
- *activation layers* (``ReLU()`` members...) become the function calls (`relu(x)`), which
  the fusion pass can merge into a kernel's epilogue.
- *Sequential expansion*: applying a ``Sequential`` member becomes applying each of its
  layers in turn (paths ``down[0]``, ``down[1]``...), so BatchNorm folding and fusion see
  inside it; nested Sequentials stay whole.
"""

from __future__ import annotations

from tribuild.base.record import replace
from tribuild.ir.builder import Builder, rewrite
from tribuild.ir.graph import Graph, In, Node, node
from tribuild.lang import TensorT

ACTIVATION_LAYERS = {
    "ReLU": "relu",
    "ReLU6": "relu6",
    "GELU": "gelu",
    "SiLU": "silu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
}
_IDENTITY_RIGHT = {"+": 0, "-": 0, "*": 1, "/": 1, "**": 1}
_IDENTITY_LEFT = {"+": 0, "*": 1}


def _const(n: Node, value: int) -> bool:
    return n.op == "const" and type(n.attr("value")) in (int, float) and n.attr("value") == value


def _binary(b: Builder, n: Node) -> int | None:
    op = n.attr("op")
    left, right = (b.nodes[j] for j in n.inputs)
    if op in _IDENTITY_RIGHT and _const(right, _IDENTITY_RIGHT[op]) and left.type == n.type:
        return n.inputs[0]
    if op in _IDENTITY_LEFT and _const(left, _IDENTITY_LEFT[op]) and right.type == n.type:
        return n.inputs[1]
    return None


def _call(b: Builder, n: Node) -> int | None:
    fn, args = n.attr("fn"), dict(n.attr("args"))
    x = b.nodes[n.inputs[0]] if n.inputs else None
    if (
        fn in ("reshape", "flatten")
        and x is not None
        and x.type == n.type
        and isinstance(x.type, TensorT)
        and isinstance(n.type, TensorT)
        and x.type.dims is not None
        and n.type.dims is not None
        and all(d == e for d, e in zip(x.type.dims, n.type.dims, strict=True))
    ):
        return n.inputs[0]
    if fn == "transpose" and x is not None and x.op == "call" and x.attr("fn") == "transpose":
        inner = dict(x.attr("args"))
        if {inner["dim0"], inner["dim1"]} == {args["dim0"], args["dim1"]} and b.nodes[
            x.inputs[0]
        ].type == n.type:
            return x.inputs[0]
    return None


def _apply(b: Builder, n: Node) -> int | None:
    layer = n.attr("layer")
    if layer.ref is not None:
        return None
    if layer.name == "Identity":
        return n.inputs[0]
    if layer.name in ACTIVATION_LAYERS:
        return b.add(
            node(
                "call",
                n.inputs,
                n.type,
                n.name,
                fn=ACTIVATION_LAYERS[layer.name],
                args=(("x", In(0)),),
            )
        )
    if layer.name == "Sequential" and n.attr("steps") is not None:
        x = n.inputs[0]
        for i, (elem, t) in enumerate(
            zip(dict(layer.args)["layers"], n.attr("steps"), strict=True)
        ):
            x = b.add(node("apply", (x,), t, "", path=n.attr("path") + (i,), layer=elem))
            x = _apply(b, b.nodes[x]) or x
        return x
    return None


def simplify(g: Graph) -> Graph:
    def visit(b: Builder, i: int, n: Node) -> int:
        if n.op == "unary" and n.attr("op") == "-":
            x = b.nodes[n.inputs[0]]
            if x.op == "unary" and x.attr("op") == "-":
                return x.inputs[0]
        rule = {"binary": _binary, "call": _call, "apply": _apply}.get(n.op)
        out = rule(b, n) if rule else None
        if out is None:
            return b.add(n)
        if n.name and not b.nodes[out].name:  # the source name moves to what replaces the node
            b.nodes[out] = replace(b.nodes[out], name=n.name)
        return out

    return rewrite(g, visit)
