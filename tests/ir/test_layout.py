"""The layout pass: which conv chains go channels-last (the measured table), where the
conversions sit (entries, exits, the output), and at which levels the pass runs."""

from __future__ import annotations

import pytest

from tests.ir.helpers import lowered, ops
from tribuild.ir.passes import layout as L
from tribuild.ir.pipeline import optimize, passes

CHAIN = """
layer Net(c: int = 8, groups: int = 8, k: int = 3) {
    let conv1 = TernaryConv2d(c, c, kernel=k, padding=k / 2, groups=groups)
    let bn1 = BatchNorm2d(c)
    let conv2 = TernaryConv2d(c, c, kernel=k, padding=k / 2, groups=groups)
    let fc = TernaryLinear(c, 2)
    fn forward(x: Tensor<float32, [N, c, H, W]>) -> Tensor<float32, [N, 2]> {
        let y = relu(bn1(conv1(x)))
        y = conv2(y) + y
        return fc(flatten(mean(y, [2, 3], true), 1))
    }
}
"""


def layouts(g) -> list[str]:
    return [f"{n.attr('format')}<-{g.nodes[n.inputs[0]].op}" for n in g.nodes if n.op == "layout"]


def test_a_depthwise_chain_converts_at_its_entry_and_back_at_its_exit(tmp_path):
    g = L.layout(lowered(tmp_path, CHAIN, "Net"))
    assert ops(g)[:2] == ["layout", "apply:conv1"] and layouts(g) == [
        "channels_last<-param",
        "nchw<-binary",
    ]
    exit_ = next(i for i, n in enumerate(g.nodes) if n.attr("format") == "nchw")
    assert g.nodes[exit_ + 1].attr("fn") == "mean" and g.nodes[exit_ + 1].inputs == (exit_,)
    assert all(n.type == g.nodes[n.inputs[0]].type for n in g.nodes if n.op == "layout")


@pytest.mark.parametrize(
    "args", [(("groups", 1), ("k", 1)), (("groups", 1), ("c", 256))], ids=["pointwise", "dense-256"]
)
def test_chains_the_measurement_says_lose_are_left_alone(tmp_path, args):
    g = lowered(tmp_path, CHAIN, "Net", args)
    assert L.paying_chains(g) == set() and L.layout(g) is g


def test_a_returned_chain_value_goes_back_to_nchw_and_conversions_are_shared(tmp_path):
    src = """
layer Net(c: int = 16) {
    let a = TernaryConv2d(c, c, kernel=3, padding=1, groups=c)
    let b = TernaryConv2d(c, c, kernel=3, padding=1, groups=c)
    fn forward(x: Tensor<float32, [N, c, H, W]>) -> Tensor<float32, [N, c, H, W]> {
        return a(x) + b(x)
    }
}
"""
    g = L.layout(lowered(tmp_path, src, "Net"))
    assert layouts(g) == [
        "channels_last<-param",
        "nchw<-binary",
    ]  # one conversion read by both convs
    assert g.nodes[g.output].attr("format") == "nchw"


def test_a_known_spatial_size_picks_its_column(tmp_path):
    src = CHAIN.replace("[N, c, H, W]", "[N, c, 56, 56]")
    assert L.speedup("depthwise", 256, 56) < 1 < L.speedup("depthwise", 256, 8)
    assert (
        L.layout(lowered(tmp_path, src, "Net", (("c", 256), ("groups", 256)))).nodes[0].op
        == "param"
    )
    assert ops(L.layout(lowered(tmp_path, src, "Net")))[0] == "layout"  # 8 channels at 56x56: 1.17


def test_nearest_measured_point_stands_for_unmeasured_ones():
    assert L.speedup("dense", 48, 30) == L.SPEEDUP["dense"][64][2]
    assert L.speedup("pointwise", 1000, None) < 1


def test_user_layers_and_convs_without_a_chain_do_not_convert(tmp_path):
    src = """
layer Inner(c: int = 8) {
    let dw = TernaryConv2d(c, c, kernel=3, padding=1, groups=c)
    fn forward(x: Tensor<float32, [N, c, H, W]>) -> Tensor<float32, [N, c, H, W]> {
        return dw(x)
    }
}
layer Outer {
    let inner = Inner(8)
    fn forward(x: Tensor<float32, [N, 8, H, W]>) -> Tensor<float32, [N, 8, H, W]> {
        return relu(inner(x))
    }
}
"""
    assert L.layout(lowered(tmp_path, src, "Outer")) == lowered(tmp_path, src, "Outer")
    assert layouts(L.layout(lowered(tmp_path, src, "Inner"))) == [
        "channels_last<-param",
        "nchw<-apply",
    ]


def test_levels_run_layout_at_O2_and_O3_only(tmp_path):
    assert L.layout in passes("2") and L.layout in passes("3")
    assert L.layout not in passes("1") + passes("s") + passes("0")
    g = lowered(tmp_path, CHAIN, "Net")
    assert "layout" in ops(optimize(g, "2")) and "layout" not in ops(optimize(g, "s"))
