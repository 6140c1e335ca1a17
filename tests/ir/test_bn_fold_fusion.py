"""BatchNorm folding and ternary fusion (activation and residual add in the epilogue)."""

from __future__ import annotations

from tests.ir.helpers import lowered, ops
from tribuild.ir.passes.bn_fold import bn_fold
from tribuild.ir.passes.dce import dce
from tribuild.ir.passes.fusion import fusion
from tribuild.ir.passes.simplify import simplify
from tribuild.ir.pipeline import LEVELS, optimize, passes

BLOCK = """
layer Block(c: int = 4) {
    let conv1 = TernaryConv2d(c, c, kernel=3, padding=1)
    let bn1 = BatchNorm2d(c)
    let conv2 = TernaryConv2d(c, c, kernel=3, padding=1)
    let bn2 = BatchNorm2d(c)
    let down = Sequential([TernaryConv2d(c, c, kernel=1), BatchNorm2d(c)])
    fn forward(x: Tensor<float32, [N, 4, H, W]>) -> Tensor<float32, [N, 4, H, W]> {
        let y = relu(bn1(conv1(x)))
        y = bn2(conv2(y))
        return relu(y + down(x))
    }
}
"""


def full(g):
    return dce(fusion(full=True)(dce(bn_fold(simplify(g)))))


def test_bn_folds_into_the_ternary_conv_before_it(tmp_path):
    g = dce(bn_fold(simplify(lowered(tmp_path, BLOCK, "Block"))))
    assert ops(g) == [
        "ternary:conv1[bn=bn1]",
        "call:relu",
        "ternary:conv2[bn=bn2]",
        "ternary:down.0[bn=down.1]",
        "binary:+",
        "call:relu",
    ]


def test_full_fusion_takes_the_residual_and_activation(tmp_path):
    g = full(lowered(tmp_path, BLOCK, "Block"))
    assert ops(g) == [
        "ternary:conv1[bn=bn1,relu]",
        "ternary:down.0[bn=down.1]",
        "ternary:conv2[bn=bn2,relu,res]",
    ]
    assert g.nodes[g.output].name == "y"


def test_basic_fusion_takes_activations_only(tmp_path):
    src = BLOCK.replace("relu(bn1(conv1(x)))", "relu(conv1(x))")
    g = dce(fusion(full=False)(lowered(tmp_path, src, "Block")))
    assert ops(g)[:2] == ["ternary:conv1[relu]", "apply:conv2"]
    assert "binary:+" in ops(g)


def test_a_value_read_twice_is_not_fused(tmp_path):
    src = BLOCK.replace(
        "let y = relu(bn1(conv1(x)))", "let y = conv1(x)\n        y = relu(bn1(y)) + y"
    )
    g = full(lowered(tmp_path, src, "Block"))
    assert ops(g)[0] == "apply:conv1" and "apply:bn1" in ops(g)


def test_levels(tmp_path):
    g = lowered(tmp_path, BLOCK, "Block")
    assert optimize(g, "0") == g and passes("0") == ()
    assert optimize(g, "2") == optimize(g, "3") == optimize(g, "s")
    assert len(passes("1")) < len(passes("s")) < len(passes("2"))
    try:
        passes("4")
    except ValueError as err:
        assert all(level in str(err) for level in LEVELS)
    else:
        raise AssertionError("level 4 accepted")


def test_zero_skip_marks_every_ternary_layer(tmp_path):
    from tribuild.ir.passes.zero_skip import zero_skip

    g = zero_skip(full(lowered(tmp_path, BLOCK, "Block")))
    assert [n.attr("zero_skip") for n in g.nodes if n.op != "param"] == [True, True, True]
    assert optimize(lowered(tmp_path, BLOCK, "Block"), "2") == g
