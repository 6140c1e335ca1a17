"""Algebraic simplification and inlining of small fns."""

from __future__ import annotations

from tests.ir.helpers import lowered, ops
from tribuild.ir.passes.dce import dce
from tribuild.ir.passes.inline import INLINE_LIMIT, inline
from tribuild.ir.passes.simplify import simplify

SRC = """
layer L(c: int = 4) {
    let id = Identity()
    let act = ReLU()
    let seq = Sequential([Linear(c, c), GELU(), Identity()])
    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
        let y = act(id(x)) * 1 + 0
        y = transpose(transpose(y, 0, 1), 1, 0)
        return -(-seq(reshape(y, [N, 4])))
    }
}
"""


def test_simplify_removes_identities_and_expands_sequential(tmp_path):
    g = dce(simplify(lowered(tmp_path, SRC, "L")))
    assert ops(g) == ["call:relu", "apply:seq.0", "call:gelu"]
    assert g.nodes[g.output].name == ""


def test_simplify_keeps_a_broadcasting_identity(tmp_path):
    src = """
layer L(c: int = 4) {
    let fc = Linear(c, c)
    fn forward(x: Tensor<float32, [N, 1]>, z: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
        return fc(x + 0 * z)
    }
}
"""
    g = dce(simplify(lowered(tmp_path, src, "L")))
    assert "binary:+" in ops(g)


FNS = """
fn small(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
    return relu(x) + x
}
fn big(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
    BODY
    return x
}
layer L(c: int = 4) {
    let fc = Linear(c, c)
    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
        return big(small(fc(x)))
    }
}
"""


def test_inline_splices_small_bodies_only(tmp_path):
    body = "\n    ".join(["x = relu(x) + x"] * INLINE_LIMIT)
    g = lowered(tmp_path, FNS.replace("BODY", body), "L")
    assert ops(g) == ["apply:fc", "fn_call:small", "fn_call:big"]
    out = dce(inline(g))
    assert ops(out) == ["apply:fc", "call:relu", "binary:+", "fn_call:big"]
