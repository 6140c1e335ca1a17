"""Graphs for pass tests: a `.tri` snippet in a one-file project, lowered through the queries,
and small summaries of graphs that tests compare (op names, fused epilogues)."""

from __future__ import annotations

from tribuild.driver.sources import load_sources
from tribuild.engine import Database
from tribuild.ir.graph import Graph
from tribuild.queries.lower import ir
from tribuild.queries.semantic import layer_instance


def lowered(tmp_path, source: str, layer: str, args: tuple = ()) -> Graph:
    (tmp_path / "m.tri").write_text(source)
    db = Database()
    load_sources(db, str(tmp_path), ("m.tri",))
    key = layer_instance(db, "m.tri", layer, args)
    assert not isinstance(key, str), key
    result = ir(db, key)
    assert result.graph is not None, result.diagnostics
    return result.graph


def lowering_problem(tmp_path, source: str, layer: str) -> str:
    (tmp_path / "m.tri").write_text(source)
    db = Database()
    load_sources(db, str(tmp_path), ("m.tri",))
    result = ir(db, layer_instance(db, "m.tri", layer, ()))
    assert result.graph is None
    return result.diagnostics[0].message


def ops(g: Graph) -> list[str]:
    """Each non-param node as ``op`` or ``op:detail`` (function, operator, member path,
    epilogue)."""
    out = []
    for n in g.nodes:
        if n.op == "param":
            continue
        detail = {
            "call": n.attr("fn"),
            "binary": n.attr("op"),
            "unary": n.attr("op"),
            "const": n.attr("value"),
            "fn_call": n.attr("fn"),
        }.get(n.op)
        if n.op in ("apply", "ternary"):
            detail = ".".join(map(str, n.attr("path")))
        if n.op == "ternary":
            extra = [
                f"bn={'.'.join(map(str, n.attr('bn')))}" if n.attr("bn") else "",
                n.attr("act"),
                "res" if n.attr("residual") else "",
            ]
            detail += "[" + ",".join(e for e in extra if e and e != "none") + "]"
        out.append(f"{n.op}:{detail}" if detail is not None else n.op)
    return out
