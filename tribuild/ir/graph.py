"""The IR: a typed graph of one `forward` (or `fn`) body, in SSA form.

Terms:
- *node*: ``Node(op, inputs, attrs, type, name)``. Node ``i`` of ``Graph.nodes`` has id ``i``;
  its ``inputs`` are ids of earlier nodes, so the tuple is in topological order. ``type`` is
  the checker's semantic type of the value it yields (``TensorT`` with a shape, dims symbolic
  where the shape depends on the input, or ``ScalarT``); every value has one.
  ``name`` is the source name the value was bound to (`let y = ...`), a hint for codegen.
- *ops* (``OPS``): ``param`` (a forward input; attr ``index``; ``weight=True`` for a weight of
  a functional entry, held by the module, ``tribuild.ir.lower``), ``const`` (a scalar; attr
  ``value``), ``apply`` (a member layer applied to ``inputs[0]``; attrs ``path``, the member
  path such as ``("layer1", 0)``, and ``layer``, its ``LayerV``; a ``Sequential`` also has
  ``steps``, the type after each of its layers), ``call`` (a built-in function;
  attrs ``fn`` and ``args``, every argument by parameter name with tensors as ``In``/``InList``
  references into ``inputs``), ``unary`` and ``binary`` (attr ``op``, a `.tri` operator),
  ``fn_call`` (a user `fn`; attrs ``fn`` and ``body``, its own Graph, called on ``inputs``),
  ``ternary``, a ternary layer with a fused epilogue, made by the passes (attrs ``path``,
  ``layer``, ``bn`` (the folded BatchNorm's path or None), ``act``, ``residual`` (bool: the
  last input is added before ``act``), ``zero_skip`` (bool), ``quantize`` (bool, absent for
  false: a ``TernaryLinear`` quantizing its input, BitLinear, at -O3)), and ``layout``, a
  memory-format conversion of ``inputs[0]`` made by the layout pass (attr ``format``:
  ``channels_last`` or ``nchw``; the value, and so its type, is unchanged).
- *symbols*: where each dim name of the inputs can be read at run time: ``(name, param id,
  axis)``; a `reshape` to ``[N, T, d]`` needs ``N`` and ``T``.
- *attrs*: sorted ``(key, value)`` pairs of plain or codec-registered values, so graphs compare
  by value, hash, and persist in the query store.
"""

from __future__ import annotations

from tribuild.base.record import record, replace
from tribuild.lang import LayerV, ScalarT, TensorT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OPS = ("param", "const", "apply", "call", "unary", "binary", "fn_call", "ternary", "layout")

Type = TensorT | ScalarT
MemberPath = tuple[str | int, ...]
"""Where a member is in its instance: ``("stages", 3)`` is ``stages[3]``."""


@record
class In:
    """Argument ``index`` of a call's ``inputs``."""

    index: int


@record
class InList:
    """A list argument whose elements are ``inputs[i]`` for ``i`` in ``indices``."""

    indices: tuple[int, ...]


@record
class Node:
    op: str
    inputs: tuple[int, ...]
    attrs: tuple[tuple[str, object], ...]
    type: Type
    name: str = ""

    def attr(self, key: str, default: Any = None) -> Any:
        """The attribute ``key`` (each op has its own: the module doc lists them)."""
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def tensor_type(self) -> TensorT:
        """``type``, of a node known to yield a tensor (a weight, a layer applied...)."""
        assert isinstance(self.type, TensorT), self
        return self.type

    def with_attrs(self, **changes: object) -> Node:
        merged = dict(self.attrs)
        merged.update(changes)
        return replace(self, attrs=tuple(sorted(merged.items())))


def node(op: str, inputs: tuple[int, ...], type: Type, name: str = "", /, **attrs: object) -> Node:
    assert op in OPS, op
    return Node(op, tuple(inputs), tuple(sorted(attrs.items())), type, name)


@record
class Graph:
    nodes: tuple[Node, ...]
    output: int
    symbols: tuple[tuple[str, int, int], ...] = ()

    def params(self) -> tuple[int, ...]:
        return tuple(i for i, n in enumerate(self.nodes) if n.op == "param")

    def weights(self) -> tuple[int, ...]:
        """The params that are weights of a functional entry (``attr weight``)."""
        return tuple(i for i in self.params() if self.nodes[i].attr("weight"))

    def uses(self) -> list[list[int]]:
        """For each node, the ids of the nodes that read it (the output counts as a use by -1)."""
        out: list[list[int]] = [[] for _ in self.nodes]
        for i, n in enumerate(self.nodes):
            for j in n.inputs:
                out[j].append(i)
        out[self.output].append(-1)
        return out


def sequential_layers(layer: LayerV) -> tuple[LayerV, ...]:
    """The layers of a ``Sequential`` (its checked argument ``layers``)."""
    layers = dict(layer.args)["layers"]
    assert isinstance(layers, tuple), layers
    out = tuple(x for x in layers if isinstance(x, LayerV))
    assert len(out) == len(layers), layers
    return out


def int_args(layer: LayerV, *names: str) -> tuple[int, ...]:
    """The arguments ``names`` of a built-in layer that the checker holds to ints (a conv's
    channels, kernel size...): an instance's members are built from known values."""
    args = dict(layer.args)
    out = []
    for name in names:
        value = args[name]
        assert isinstance(value, int), (layer.name, name, value)
        out.append(value)
    return tuple(out)


def is_tensor(n: Node) -> bool:
    return isinstance(n.type, TensorT)
