"""Lowering: shapes on every value, unrolled loops, resolved ifs, member paths, symbols, and
constructs codegen cannot express reported as diagnostics."""

from __future__ import annotations

from tests.ir.helpers import lowered, lowering_problem, ops
from tribuild.lang import dims
from tribuild.lang.types import TensorT

BLOCKS = """
layer Net(n: int = 3, wide: bool = false) {
    let fcs = [TernaryLinear(8, 8) for i in 0..n]
    let head = wide ? Linear(8, 16) : Linear(8, 4)
    fn forward(x: Tensor<float32, [N, 8]>) -> Tensor<float32, [N, ?]> {
        for f in fcs {
            x = relu(f(x))
        }
        if wide {
            x = x * 2.0
        }
        return head(x)
    }
}
"""


def test_loops_unroll_over_member_paths_and_ifs_resolve(tmp_path):
    g = lowered(tmp_path, BLOCKS, "Net", (("n", 2),))
    assert ops(g) == ["apply:fcs.0", "call:relu", "apply:fcs.1", "call:relu", "apply:head"]
    assert g.nodes[-1].type == TensorT("float32", (dims.sym("N"), dims.const(4)))
    wide = lowered(tmp_path, BLOCKS, "Net", (("n", 1), ("wide", True)))
    assert ops(wide) == ["apply:fcs.0", "call:relu", "const:2.0", "binary:*", "apply:head"]


def test_every_value_has_a_type_and_names_follow_lets(tmp_path):
    g = lowered(tmp_path, BLOCKS, "Net")
    assert all(isinstance(n.type, TensorT) for n in g.nodes if n.op != "const")
    assert [n.name for n in g.nodes if n.op == "call"] == ["x", "x", "x"]


def test_reshape_dims_come_from_input_symbols(tmp_path):
    src = """
layer Heads(d: int = 8, h: int = 2) {
    let proj = Linear(d, d)
    fn forward(x: Tensor<float32, [N, T, d]>) -> Tensor<float32, [N, h, T, d / h]> {
        return transpose(reshape(proj(x), [N, T, h, d / h]), 1, 2)
    }
}
"""
    g = lowered(tmp_path, src, "Heads")
    assert g.symbols == (("N", 0, 0), ("T", 0, 1))
    reshape = next(n for n in g.nodes if n.attr("fn") == "reshape")
    assert [str(v) for v in dict(reshape.attr("args"))["shape"]][2:] == ["2", "4"]


FUNCTIONAL = """
layer Fc(w: TernaryTensor<trit, [8, 4]>, b: Tensor<float32, [4]>, x: Tensor<float32, [?, 8]>)
         -> Tensor<float32, [?, 4]> {
    return x @ w + b
}
"""


def test_a_functional_entry_takes_its_last_data_tensor_and_holds_the_rest_as_weights(tmp_path):
    g = lowered(tmp_path, FUNCTIONAL, "Fc")
    assert [g.nodes[i].name for i in g.params()] == ["w", "b", "x"]
    assert [g.nodes[i].name for i in g.weights()] == ["w", "b"]
    assert ops(g) == ["binary:@", "binary:+"]


def test_a_functional_entry_with_a_scalar_parameter_is_a_diagnostic(tmp_path):
    src = FUNCTIONAL.replace("b: Tensor<float32, [4]>", "b: Tensor<float32, [4]>, s: float32")
    assert "`s` of the functional layer `Fc` is not a tensor" in lowering_problem(
        tmp_path, src, "Fc"
    )


def test_a_layer_built_inside_forward_is_a_diagnostic(tmp_path):
    src = """
layer Bad(c: int = 4) {
    let fc = Linear(c, c)
    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
        return Linear(4, 4)(x)
    }
}
"""
    assert "must be a member" in lowering_problem(tmp_path, src, "Bad")
