"""BitLinear fusion at -O3 (``tribuild.ir.passes.bitlinear``): the generated BitNet block
quantizes inside its linear layers' kernels and computes what the -O2 block computes, in eval
mode on both backends and in training mode (gradients through the straight-through
estimator)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tests.ir.helpers import lowered, ops  # noqa: E402
from tribuild.ir.pipeline import optimize  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402

SHARED = """
layer Two(d: int = 8) {
    let a = TernaryLinear(d, d)
    let b = TernaryLinear(d, d)
    fn forward(x: Tensor<float32, [N, 8]>) -> Tensor<float32, [N, 8]> {
        let q = quantize_activations(x)
        return relu(a(q)) + b(q)
    }
}
"""


def test_each_reader_of_a_quantization_takes_it_in_at_o3_only(tmp_path):
    g = lowered(tmp_path, SHARED, "Two")
    assert "call:quantize_activations" in ops(optimize(g, "2"))
    o3 = optimize(g, "3")
    assert not [op for op in ops(o3) if "quantize" in op]
    fused = [n for n in o3.nodes if n.op == "ternary"]
    assert len(fused) == 2 and all(n.attr("quantize") for n in fused)
    assert all(o3.nodes[n.inputs[0]].op == "param" for n in fused)


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    root = tmp_path_factory.mktemp("bitnet")
    args = {"dim": 32, "heads": 2, "hidden": 48}
    made = {}
    for level in ("2", "3"):
        result = build("models/bitnet.tri:BitNetBlock", args, level)
        made[level] = write_and_import(result, root / f"O{level}")
    torch.manual_seed(0)
    o2 = made["2"].Model().eval()
    o3 = made["3"].Model().eval()
    o3.load_state_dict(o2.state_dict())
    return o2, o3


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_o3_block_computes_what_o2_computes(blocks, backend):
    o2, o3 = blocks
    x = torch.randn(2, 3, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), force_backend(backend):
        torch.testing.assert_close(o3(x), o2(x), rtol=1e-4, atol=1e-4)


def test_o3_block_trains_through_the_quantization(blocks):
    o2, o3 = blocks
    x = torch.randn(2, 3, 32, generator=torch.Generator().manual_seed(2))
    grads = []
    for m in (o2, o3):
        m.train().zero_grad()
        with force_backend("torch"):
            m(x).square().mean().backward()
        grads.append(m.attn_norm.weight.grad.clone())
        m.eval()
    torch.testing.assert_close(grads[1], grads[0])
