"""Channels-last at run time: a generated module whose conv chain the layout pass converts
computes what -O0 computes, its convolutions see channels-last inputs on the torch backend
and NCHW ones on the Triton backend (the interpreter), and it returns NCHW."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.driver.sources import load_sources  # noqa: E402
from tribuild.engine import Database  # noqa: E402
from tribuild.runtime import model as gpu_model  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402

SRC = """
layer Net(c: int = 8) {
    let dw1 = TernaryConv2d(c, c, kernel=3, padding=1, groups=c)
    let bn1 = BatchNorm2d(c)
    let dw2 = TernaryConv2d(c, c, kernel=3, padding=1, groups=c, bias=true)
    let fc = TernaryLinear(c, 3)
    fn forward(x: Tensor<float32, [N, c, H, W]>) -> Tensor<float32, [N, 3]> {
        let y = relu6(bn1(dw1(x)))
        y = dw2(y) + y
        return fc(flatten(adaptive_avg_pool2d(y, 1), 1))
    }
}
"""


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    root = tmp_path_factory.mktemp("layout")
    (root / "m.tri").write_text(SRC)
    db = Database()
    load_sources(db, str(root), ("m.tri",))
    return {lv: write_and_import(build("m.tri:Net", {}, lv, db=db), root / f"O{lv}") for lv in "02"}


def loaded(gen, seed: int = 0):
    torch.manual_seed(seed)
    state = {
        k: (torch.randn(v.shape[0], 1, 3, 3) if k.startswith("dw") else torch.randn(3, 8))
        if v.dtype == torch.uint8
        else torch.rand(v.shape) + 0.5
        for k, v in gen.build().state_dict().items()
        if not k.endswith("_scale") and "latent_" not in k  # the packed form's keys
    }
    return gen.Model.from_float(state).eval()


def test_O2_converts_the_depthwise_chain(modules):
    text = open(modules["2"].__file__).read()
    assert "model.channels_last(x)" in text and "model.nchw(" in text
    assert "model.channels_last" not in open(modules["0"].__file__).read()


def test_channels_last_on_the_torch_backend_computes_what_O0_computes(modules):
    x = torch.randn(2, 8, 7, 5)
    with torch.no_grad(), force_backend("torch"):
        want, got = loaded(modules["0"])(x), loaded(modules["2"])(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_conv_inputs_are_channels_last_on_torch_and_nchw_on_triton(modules):
    x = torch.randn(1, 8, 5, 6)
    seen = {}
    for backend in ("torch", "triton"):
        model = loaded(modules["2"])
        calls = []
        for conv in (model.dw1, model.dw2):
            original = conv.run
            conv.run = lambda x, *a, original=original, calls=calls: (
                calls.append(x),
                original(x, *a),
            )[1]
        with torch.no_grad(), force_backend(backend):
            seen[backend] = (model(x), calls)
    (y_torch, torch_inputs), (y_triton, triton_inputs) = seen["torch"], seen["triton"]
    assert len(torch_inputs) == len(triton_inputs) == 2
    assert all(
        t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
        for t in torch_inputs
    )
    assert all(t.is_contiguous() for t in triton_inputs)
    torch.testing.assert_close(y_triton, y_torch, rtol=1e-4, atol=1e-4)


def test_the_conversions_keep_values_and_return_the_same_tensor_when_nothing_changes():
    x = torch.randn(2, 3, 4, 5)
    with force_backend("torch"):
        cl = gpu_model.channels_last(x)
        assert cl.is_contiguous(memory_format=torch.channels_last) and torch.equal(cl, x)
        assert gpu_model.channels_last(cl) is cl
    with force_backend("triton"):
        assert gpu_model.channels_last(x) is x
    back = gpu_model.nchw(cl)
    assert back.is_contiguous() and torch.equal(back, x) and gpu_model.nchw(back) is back
