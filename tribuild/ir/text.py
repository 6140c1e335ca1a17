"""The optimised IR as text, for ``tribuild build --dump-ir``.

Terms:
- *node line*: ``%i = op(%a, %b) [key=value, ...] : type  # name``: node ``i`` of the graph,
  its inputs by id, its attributes in their stored (sorted) order, the type of the value it
  yields and the source name it was bound to, if any. A call's tensor arguments (``In``,
  ``InList``) are shown as the ids of the nodes they refer to, a member path as
  ``layer1.0``, layers and constants in `.tri` spelling (``values.format_value``).
- *body*: a ``fn_call``'s own graph, printed under its node line, indented.
- *graph lines*: the node lines of a graph and ``return %i``, then ``symbols N=%0.shape[0],
  ...`` (where each input dim is read at run time) when there are any. The driver puts them
  under each instance's header (``tribuild.driver.dump``).
The text depends only on the graphs, so it is the same on every run and for any ``--jobs``.
"""

from __future__ import annotations

from tribuild.ir.graph import Graph, In, InList, Node
from tribuild.lang import ScalarT, TensorT, format_value


def graph_lines(graph: Graph, indent: str = "") -> list[str]:
    """The node lines of ``graph`` (bodies nested), its return and its symbols."""
    lines = []
    for i, node in enumerate(graph.nodes):
        lines.append(indent + node_line(i, node))
        for key, value in node.attrs:
            if isinstance(value, Graph):
                lines.append(f"{indent}  {key}:")
                lines += graph_lines(value, indent + "    ")
    lines.append(f"{indent}return %{graph.output}")
    if graph.symbols:
        lines.append(
            indent
            + "symbols "
            + ", ".join(f"{name}=%{param}.shape[{axis}]" for name, param, axis in graph.symbols)
        )
    return lines


def node_line(i: int, node: Node) -> str:
    inputs = ", ".join(f"%{j}" for j in node.inputs)
    attrs = [
        f"{key}={_attr(key, value, node)}"
        for key, value in node.attrs
        if not isinstance(value, Graph)
    ]
    line = f"%{i} = {node.op}({inputs})"
    if attrs:
        line += " [" + ", ".join(attrs) + "]"
    line += f" : {node.type}"
    return line + (f"  # {node.name}" if node.name else "")


def _attr(key: str, value: object, node: Node) -> str:
    if key == "path" and isinstance(value, tuple):
        return ".".join(str(part) for part in value)
    return _value(value, node)


def _value(value: object, node: Node) -> str:
    if isinstance(value, In):
        return f"%{node.inputs[value.index]}"
    if isinstance(value, InList):
        return "[" + ", ".join(f"%{node.inputs[i]}" for i in value.indices) + "]"
    if isinstance(value, (TensorT, ScalarT)):
        return str(value)
    if value is None:
        return "none"
    if isinstance(value, tuple):
        if value and all(
            isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) for x in value
        ):
            return "{" + ", ".join(f"{k}: {_value(v, node)}" for k, v in value) + "}"
        return "(" + ", ".join(_value(x, node) for x in value) + ")"
    # any other attr is a checker value; format_value spells the rest with repr
    return format_value(value)  # type: ignore[arg-type]
