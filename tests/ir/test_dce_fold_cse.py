"""Dead-code elimination, constant folding and common-subexpression elimination."""

from __future__ import annotations

import operator

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tests.ir.helpers import lowered, ops
from tribuild.ir.builder import Builder, const_node
from tribuild.ir.graph import Graph, node
from tribuild.ir.passes.cse import cse
from tribuild.ir.passes.dce import dce
from tribuild.ir.passes.fold import fold, fold_value
from tribuild.lang.types import ScalarT, TensorT

T = TensorT("float32", None)


def test_dce_drops_what_the_output_does_not_read_but_keeps_params(tmp_path):
    src = """
layer L(c: int = 4) {
    let a = Linear(c, c)
    let b = Linear(c, c)
    fn forward(x: Tensor<float32, [N, 4]>,
               unused: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
        let dead = b(x)
        relu(dead)
        return a(x)
    }
}
"""
    g = lowered(tmp_path, src, "L")
    assert ops(g) == ["apply:b", "call:relu", "apply:a"]
    out = dce(g)
    assert ops(out) == ["apply:a"] and len(out.params()) == 2
    assert out.nodes[out.output].attr("path") == ("a",)


def _binary(op: str, a: object, b: object) -> Graph:
    b_ = Builder()
    x = b_.add(node("param", (), T, "x", index=0))
    left, right = b_.const(a), b_.const(b)
    c = b_.add(node("binary", (left, right), ScalarT("float32"), op=op))
    out = b_.add(node("binary", (x, c), T, op="*"))
    return Graph(tuple(b_.nodes), out)


def test_fold_replaces_constant_arithmetic():
    g = dce(fold(_binary("+", 2, 3.5)))
    assert ops(g) == ["const:5.5", "binary:*"]


def test_fold_leaves_division_by_zero_for_run_time():
    g = fold(_binary("/", 1.0, 0.0))
    assert "binary:/" in ops(g)


@settings(max_examples=examples(100), deadline=None)
@given(st.sampled_from(["+", "-", "*", "//", "%", "**"]), st.integers(-20, 20), st.integers(-5, 5))
def test_fold_agrees_with_python(op, a, b):
    fns = {
        "+": operator.add,
        "-": operator.sub,
        "*": operator.mul,
        "//": operator.floordiv,
        "%": operator.mod,
        "**": operator.pow,
    }
    n = node("binary", (0, 1), ScalarT("int64"), op=op)
    try:
        want = fns[op](a, b)
    except ZeroDivisionError:
        want = None
    assert fold_value(n, [a, b]) == want
    assert const_node(7).type == ScalarT("int64") and const_node(0.5).type == ScalarT("float32")


def test_cse_merges_equal_nodes_but_not_dropout(tmp_path):
    src = """
layer L(c: int = 4) {
    let fc = Linear(c, c)
    let drop = Dropout(0.1)
    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
        let a = relu(fc(x)) + relu(fc(x))
        return a + drop(x) + drop(x)
    }
}
"""
    g = dce(cse(lowered(tmp_path, src, "L")))
    assert ops(g) == [
        "apply:fc",
        "call:relu",
        "binary:+",
        "apply:drop",
        "binary:+",
        "apply:drop",
        "binary:+",
    ]
