"""Training with generated modules: quantization-aware training (latent float weights,
ternarized on the fly with the straight-through estimator), folded BatchNorm falling back to
batch statistics in training mode, and ``freeze`` packing the trained weights."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.driver.sources import load_sources  # noqa: E402
from tribuild.engine import Database  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402
from tribuild.runtime.packing import pack_ternary  # noqa: E402

SRC = """
layer Net(c: int = 4) {
    let conv = TernaryConv2d(3, c, kernel=3, padding=1)
    let bn = BatchNorm2d(c)
    let fc = TernaryLinear(c, 2, bias=true)
    fn forward(x: Tensor<float32, [N, 3, H, W]>) -> Tensor<float32, [N, 2]> {
        let y = relu(bn(conv(x)))
        return fc(mean(y, [2, 3], false))
    }
}
"""


def float_state(gen) -> dict:
    """The float twin's state_dict with random ternary weights."""
    torch.manual_seed(0)
    state = gen.Model.float_module().state_dict()
    return {
        k: torch.randn(v.shape) if k in ("conv.weight", "fc.weight") else v
        for k, v in state.items()
    }


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    (root / "m.tri").write_text(SRC)
    db = Database()
    load_sources(db, str(root), ("m.tri",))
    return {
        lv: write_and_import(build("m.tri:Net", {}, lv, db=db), root / "out" / f"O{lv}")
        for lv in "02"
    }


def test_training_mode_matches_across_levels_and_gradients_reach_latent_weights(modules):
    state = float_state(modules["0"])
    x = torch.randn(4, 3, 6, 5)
    outs = {}
    with force_backend("torch"):
        for level, gen in modules.items():
            model = gen.Model.from_float(state).qat(state).train()
            y = model(x)
            y.sum().backward()
            assert (
                model.conv.latent_weight.grad is not None
                and model.fc.latent_weight.grad.abs().sum() > 0
            )
            outs[level] = y.detach()
    torch.testing.assert_close(outs["0"], outs["2"])


def test_freeze_packs_the_latent_weights(modules):
    state = float_state(modules["2"])
    model = modules["2"].Model.from_float(state).qat(state)
    with torch.no_grad():
        model.fc.latent_weight.mul_(3)
    model.freeze()
    assert "fc.latent_weight" not in model.state_dict()
    packed, scale = pack_ternary(state["fc.weight"] * 3)
    assert torch.equal(model.fc.weight, packed) and torch.allclose(model.fc.weight_scale, scale)
