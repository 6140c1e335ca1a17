"""A functional layer as a target's entry (examples/seed_style): its weights are module state
named as the `.tri` parameters (trit tensors packed, float tensors parameters), the data input
is ``forward``'s one argument, and the module computes the program written out in PyTorch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tests.codegen.harness import REPO, write_and_import  # noqa: E402
from tribuild.driver.sources import load_sources, scan  # noqa: E402
from tribuild.engine import Database  # noqa: E402
from tribuild.queries.codegen import target_build  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402
from tribuild.runtime.model import float_shapes  # noqa: E402
from tribuild.runtime.packing import pack  # noqa: E402

SEED = REPO / "examples" / "seed_style"


def leaky_relu(x):
    return F.relu(x) - F.relu(-x) * 0.01


def mnist(s, x):
    h = leaky_relu(x @ s["w1"] + s["b1"])
    return torch.softmax(h @ s["w2"] + s["b2"], -1)


def conv_classifier(s, x):
    y = F.max_pool2d(leaky_relu(F.conv2d(x, s["w"], None, 1, 1) * s["gain"]), 2, 2)
    t = torch.flatten(y, 1) @ s["head"]
    centered = t - t.mean(-1, keepdim=True)
    return (
        centered / torch.sqrt((centered * centered).mean(-1, keepdim=True) + 1e-5) * s["gamma"]
        + s["beta"]
    )


# (file, layer, reference, input shape)
CASES = [
    ("mnist_fc.tri", "MnistNet", mnist, (3, 784)),
    ("conv_block.tri", "ConvClassifier", conv_classifier, (2, 1, 28, 28)),
]


@pytest.fixture(scope="module")
def db():
    d = Database()
    load_sources(d, str(SEED), scan(str(SEED), (".",)))
    return d


@pytest.fixture(scope="module")
def modules(db, tmp_path_factory):
    out = {}
    for path, layer, _, _ in CASES:
        for level in "02":
            result = target_build(db, "model", path, layer, (), None, level)
            out[layer, level] = write_and_import(
                result, tmp_path_factory.mktemp(f"{layer}-O{level}")
            )
    return out


def float_state(gen) -> dict:
    torch.manual_seed(0)
    state = {}
    model = gen.build()
    for key, shape in float_shapes(model).items():
        state[key] = (
            torch.randint(-1, 2, shape).float() + torch.rand(shape) * 0.8 - 0.4
            if key in model.trit_shapes
            else torch.randn(shape)
        )
    return state


@pytest.mark.parametrize("case", CASES, ids=[c[1] for c in CASES])
def test_functional_entry_computes_the_program(case, modules):
    _, layer, reference, shape = case
    state = float_state(modules[layer, "0"])
    trits = {
        k: v.round().clamp(-1, 1) if k in modules[layer, "0"].build().trit_shapes else v
        for k, v in state.items()
    }
    x = torch.randn(shape)
    want = reference(trits, x)
    for level in "02":
        model = modules[layer, level].Model.from_float(state).eval()
        assert set(model.state_dict()) == set(state)
        with torch.no_grad(), force_backend("torch"):
            torch.testing.assert_close(model(x), want, rtol=1e-4, atol=1e-5)


def test_trit_weights_are_stored_packed_and_round_trip(modules):
    gen = modules["MnistNet", "2"]
    state = float_state(gen)
    model = gen.Model.from_float(state)
    assert model.w1.dtype == torch.uint8 and model.w1.shape == (784, 32)
    assert torch.equal(model.w1, pack(state["w1"].round().clamp(-1, 1).to(torch.int8)))
    again = gen.build().eval()
    again.load_state_dict(model.state_dict())
    assert torch.equal(again.trits("w2"), state["w2"].round().clamp(-1, 1))
    assert isinstance(model.b1, torch.nn.Parameter) and torch.equal(model.b1, state["b1"])


def test_a_weight_without_a_fixed_shape_is_a_diagnostic(db):
    result = target_build(db, "model", "half_precision.tri", "HalfFC", (), None, "2")
    assert not result.files and [d.code for d in result.diagnostics] == ["E0601"]
    assert "`w` of `HalfFC` has no fixed shape" in result.diagnostics[0].message


def test_trit_weights_train_from_scratch(modules):
    """A new module's trit weights have latent weights, drawn so that each trit is about
    equally likely (they were all zero, with nothing to train); ``parameters()`` holds them,
    the straight-through gradient reaches them, and ``freeze`` packs the trained trits."""
    gen = modules["MnistNet", "2"]
    torch.manual_seed(0)
    model = gen.build().train()
    latents = {n for n, _ in model.named_parameters() if n.startswith("latent_")}
    assert latents == {"latent_w1", "latent_w2"}
    codes = model.trits("w1")
    initial_w2 = model.trits("w2").detach().clone()
    shares = [(codes == t).float().mean().item() for t in (-1, 0, 1)]
    assert all(0.30 < s < 0.37 for s in shares), shares
    x = torch.randn(64, 784) * 0.01  # unscaled trits: keep the softmax out of saturation
    y = torch.randint(0, 10, (64,))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    with force_backend("torch"):
        for _ in range(15):
            opt.zero_grad()
            loss = F.nll_loss(torch.log(model(x) + 1e-9), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert model.latent_w2.grad is not None and model.latent_w2.grad.abs().sum() > 0
    assert losses[-1] < 0.8 * losses[0], losses
    trained = model.trits("w2").detach().clone()
    assert not torch.equal(trained, initial_w2)  # training changed trits, not only latents
    model.freeze().eval()
    assert not any(n.startswith("latent_") for n, _ in model.named_parameters())
    assert torch.equal(model.trits("w2"), trained)
    again = gen.build().eval()
    again.load_state_dict(model.state_dict())
    assert torch.equal(again.trits("w2"), trained) and "latent_w2" not in again.state_dict()
    again.qat()
    assert torch.equal(again.latent_w2.detach(), trained)
    twin = gen.Model.float_module()
    assert set(twin.state_dict()) == set(float_shapes(gen.build()))
