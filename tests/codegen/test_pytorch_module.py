"""Generated modules as a PyTorch user uses them: trained from scratch with the usual loop,
frozen, summarized, converted from and to a float twin, moved between dtypes, deep-copied,
pickled whole, compiled, exported (torch.export, ONNX checked with onnxruntime), and given
wrong inputs. One small CNN with every ternary layer kind the runtime has (a ternary conv
with a fused BatchNorm, a ternary linear with a bias, attention) and a float layer."""

from __future__ import annotations

import copy
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import REPO, build, write_and_import  # noqa: E402
from tribuild.driver.sources import load_sources  # noqa: E402
from tribuild.engine import Database  # noqa: E402
from tribuild.runtime import nn as ternary_nn  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402
from tribuild.runtime.model import float_shapes  # noqa: E402
from tribuild.runtime.packing import pack_ternary  # noqa: E402

SRC = """
layer Net(c: int = 8, classes: int = 3) {
    let conv = TernaryConv2d(1, c, kernel=3, padding=1)
    let bn = BatchNorm2d(c)
    let attn = MultiHeadAttention(c, heads=2)
    let fc = TernaryLinear(c, c, bias=true)
    let head = Linear(c, classes)
    fn forward(x: Tensor<float32, [N, 1, 6, 6]>) -> Tensor<float32, [N, classes]> {
        let y = relu(bn(conv(x)))
        let t = transpose(reshape(y, [N, c, 36]), 1, 2)
        let z = mean(attn(t) + t, [1], false)
        return head(relu(fc(z)))
    }
}
"""


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    root = tmp_path_factory.mktemp("pytorch_module")
    (root / "m.tri").write_text(SRC)
    db = Database()
    load_sources(db, str(root), ("m.tri",))
    return write_and_import(build("m.tri:Net", {}, "2", db=db), root / "out")


@pytest.fixture(autouse=True)
def _torch_backend():
    with force_backend("torch"):
        yield


def data(n: int = 48, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable task: the class is which third of the image is brightest."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 6, 6, generator=g) * 0.3
    y = torch.randint(0, 3, (n,), generator=g)
    for i in range(n):
        x[i, 0, 2 * y[i] : 2 * y[i] + 2] += 1.0
    return x, y


def trained(gen, steps: int = 40, seed: int = 0):
    """``Model()`` trained with the obvious loop; the losses along the way."""
    torch.manual_seed(seed)
    m = gen.Model()
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    x, y = data()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return m, losses


def test_a_new_model_trains_from_scratch_with_the_usual_loop(gen):
    m = gen.Model()
    latents = {n for n, _ in m.named_parameters() if "latent_" in n}
    assert latents == {
        "conv.latent_weight",
        "attn.latent_in_proj_weight",
        "attn.out_proj.latent_weight",
        "fc.latent_weight",
    }
    m, losses = trained(gen)
    assert losses[-1] < 0.5 * losses[0], losses  # 1.14 -> 0.45 when written
    x, y = data(48, seed=1)
    accuracy = (m.eval()(x).argmax(1) == y).float().mean().item()
    assert accuracy > 0.8


def test_latent_weights_get_pytorch_default_initialization():
    for make, reference in [
        (lambda: ternary_nn.TernaryLinear(20, 7, bias=True), lambda: torch.nn.Linear(20, 7)),
        (
            lambda: ternary_nn.TernaryConv2d(4, 6, 3, bias=True),
            lambda: torch.nn.Conv2d(4, 6, 3),
        ),
    ]:
        torch.manual_seed(3)
        layer = make()
        torch.manual_seed(3)
        ref = reference()
        assert torch.equal(layer.latent_weight, ref.weight)
        assert torch.equal(layer.bias, ref.bias)
        packed, scale = pack_ternary(ref.weight)
        assert torch.equal(layer.weight, packed) and torch.equal(layer.weight_scale, scale)
    torch.manual_seed(3)
    attn = ternary_nn.MultiHeadAttention(8, 2)
    torch.manual_seed(3)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    assert torch.equal(attn.latent_in_proj_weight, ref.in_proj_weight)
    assert not attn.in_proj_bias.any() and not attn.out_proj.bias.any()


def test_eval_runs_the_frozen_arithmetic_and_freeze_drops_the_latents(gen):
    m, _ = trained(gen, steps=5)
    x, _ = data(8, seed=2)
    with torch.no_grad():
        live = m.eval()(x)
        frozen = copy.deepcopy(m).freeze()
        assert not any("latent_" in k for k in frozen.state_dict())
        assert not [n for n, _ in frozen.named_parameters() if "latent_" in n]
        torch.testing.assert_close(frozen(x), live, rtol=0, atol=0)
    m.train()  # a training step changes the latents; eval re-packs them
    m(x).square().mean().backward()
    torch.optim.SGD(m.parameters(), lr=0.5).step()
    with torch.no_grad():
        after = m.eval()(x)
        assert not torch.allclose(after, live)
        torch.testing.assert_close(copy.deepcopy(m).freeze()(x), after, rtol=0, atol=0)


def test_state_dicts_carry_the_latents_or_not(gen):
    m, _ = trained(gen, steps=3)
    fresh = gen.Model()
    fresh.load_state_dict(m.state_dict())
    assert fresh.fc.latent_weight is not None and torch.equal(
        fresh.fc.latent_weight, m.fc.latent_weight
    )
    frozen = gen.Model()
    frozen.load_state_dict(copy.deepcopy(m).freeze().state_dict())
    assert "fc.latent_weight" not in frozen.state_dict()
    x, _ = data(4, seed=5)
    with torch.no_grad():
        torch.testing.assert_close(frozen.eval()(x), m.eval()(x), rtol=0, atol=0)
        torch.testing.assert_close(fresh.eval()(x), m(x), rtol=0, atol=0)


def test_training_without_trainable_ternary_weights_warns_once(gen, monkeypatch):
    monkeypatch.setattr(ternary_nn, "_warned_frozen_training", False)
    m = gen.Model().freeze().train()
    x, _ = data(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m(x)
        m(x)
    messages = [str(w.message) for w in caught if "no trainable ternary weights" in str(w.message)]
    assert len(messages) == 1 and "model.qat()" in messages[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monkeypatch.setattr(ternary_nn, "_warned_frozen_training", False)
        gen.Model().train()(x)  # trainable: no warning
        m.eval()(x)  # eval: no warning
    assert not [w for w in caught if "no trainable" in str(w.message)]


def test_summary_counts_what_the_model_holds(gen, capsys):
    import tribuild

    m = gen.Model()
    assert tribuild.summary(m) is None  # printed only: a REPL would show a result again
    text = capsys.readouterr().out
    assert tribuild.summary(m, print_it=False) == text.rstrip("\n")
    assert capsys.readouterr().out == ""
    text = text.rstrip("\n")
    rows = {line.split()[0]: line.split() for line in text.splitlines()[1:]}
    # conv: 8·1·3·3 ternary; attn: 3·8·8 ternary + 24 bias; fc: 64 + 8; head: 24 + 3 (float)
    ternary = 72 + 192 + 64 + 64
    floats = 8 + 8 + 24 + 8 + 8 + 24 + 3  # bn, attn bias, out_proj bias, fc bias, head
    packed = (8 * 3 + 4) + (24 * 2 + 4) + (8 * 2 + 4) + (8 * 2 + 4)
    assert rows["total"][1:] == [str(ternary), str(floats), str(packed)]
    assert "weight [8, 1, 3, 3]" in text and rows["conv"][1] == "TernaryConv2d"
    assert (
        m.summary(print_it=False) == text
        and gen.Model().freeze().summary(False).splitlines()[-1] == (text.splitlines()[-1])
    )


def test_the_float_twin_has_the_float_keys_and_computes_the_same(gen):
    torch.manual_seed(0)
    twin = gen.Model.float_module()
    assert isinstance(twin, torch.nn.Module) and not isinstance(twin, gen.Model)
    shapes = {k: tuple(v.shape) for k, v in twin.state_dict().items()}
    assert shapes == float_shapes(gen.Model())
    assert shapes["conv.weight"] == (8, 1, 3, 3) and shapes["attn.in_proj_weight"] == (24, 8)
    # train the twin in plain PyTorch, then convert
    opt = torch.optim.AdamW(twin.parameters(), lr=1e-2)
    x, y = data()
    for _ in range(5):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(twin(x), y).backward()
        opt.step()
    m = gen.Model.from_float(twin.state_dict()).eval()
    with torch.no_grad():
        torch.testing.assert_close(m(x), twin.eval()(x), rtol=1e-5, atol=1e-5)
    qat = gen.Model.from_float(twin.state_dict()).qat(twin.state_dict()).eval()
    with torch.no_grad():
        torch.testing.assert_close(qat(x), twin(x), rtol=1e-5, atol=1e-5)


def test_from_float_reports_every_mismatch_in_float_shapes(gen):
    state = gen.Model.float_module().state_dict()
    bad = dict(state)
    del bad["fc.bias"]
    bad["conv.weight"] = torch.zeros(8, 1, 5, 5)
    bad["extra.weight"] = torch.zeros(2)
    with pytest.raises(ValueError) as err:
        gen.Model.from_float(bad)
    text = str(err.value)
    assert "missing: fc.bias [8]" in text
    assert "unexpected: extra.weight [2]" in text
    assert "wrong shape: conv.weight is [8, 1, 5, 5], expected [8, 1, 3, 3]" in text
    with pytest.raises(ValueError, match="wrong shape") as err:
        gen.Model.from_float(bad, strict=False)
    assert "missing" not in str(err.value)
    del bad["conv.weight"]
    partial = gen.Model.from_float(bad, strict=False)
    assert "conv.latent_weight" not in partial.state_dict()  # frozen, conv as initialized
    prefixed = {f"model.{k}": v for k, v in state.items()}
    a = gen.Model.from_float(prefixed, prefix="model.").eval()
    b = gen.Model.from_float(state).eval()
    x, _ = data(4)
    with torch.no_grad():
        torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
    with pytest.raises(ValueError, match="unexpected: model.fc.weight"):
        gen.Model.from_float(prefixed)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_dtype_moves_keep_float32_scales_and_compute(gen, dtype):
    m, _ = trained(gen, steps=3)
    m.eval()
    x, _ = data(4)
    with torch.no_grad():
        want = m(x)
        for moved in (copy.deepcopy(m).to(dtype), copy.deepcopy(m).freeze().to(dtype)):
            for layer in moved.modules():
                for name, _ in getattr(layer, "TERNARY", ()):
                    assert getattr(layer, f"{name}_scale").dtype == torch.float32
            got = moved(x.to(dtype))
            assert got.dtype == dtype
            torch.testing.assert_close(got.float(), want, rtol=0.05, atol=0.05)
    assert copy.deepcopy(m).half().float().to("cpu")(x).dtype == torch.float32


def test_half_runs_the_triton_kernels_with_float32_scales(gen):
    m = copy.deepcopy(gen.Model().freeze()).eval()
    x, _ = data(2)
    with torch.no_grad():
        want = m(x)
        half = m.half()
        with force_backend("triton"):  # TRITON_INTERPRET=1 (tests/codegen/conftest.py)
            got = half(x.half())
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want, rtol=0.05, atol=0.05)


def test_deepcopy_is_independent(gen):
    m, _ = trained(gen, steps=2)
    c = copy.deepcopy(m)
    with torch.no_grad():
        c.fc.latent_weight.mul_(-1)
    x, _ = data(4)
    with torch.no_grad():
        assert not torch.allclose(c.eval()(x), m.eval()(x))
    assert type(c) is type(m) and c.fc.kernel is m.fc.kernel


LOAD = """
import sys, torch
from tribuild.runtime.launch import force_backend
m = torch.load(sys.argv[1], weights_only=False)
x = torch.load(sys.argv[2])
with force_backend("torch"), torch.no_grad():
    print(type(m).__name__, (m(x) - torch.load(sys.argv[3])).abs().max().item())
"""


def test_torch_save_of_the_whole_module_loads_in_a_fresh_process(gen, tmp_path):
    m, _ = trained(gen, steps=2)
    x, _ = data(4)
    for name, model in [
        ("trainable", m.eval()),
        ("frozen", copy.deepcopy(m).freeze()),
        ("twin", gen.Model.float_module().eval()),
    ]:
        with torch.no_grad():
            torch.save(model(x), tmp_path / f"{name}.y")
        torch.save(model, tmp_path / f"{name}.pt")
        torch.save(x, tmp_path / "x.pt")
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                LOAD,
                str(tmp_path / f"{name}.pt"),
                str(tmp_path / "x.pt"),
                str(tmp_path / f"{name}.y"),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        cls, diff = out.stdout.split()
        assert cls == type(model).__name__ and float(diff) == 0.0
        again = torch.load(tmp_path / f"{name}.pt", weights_only=False)  # this process
        assert type(again) is type(model)


@pytest.mark.parametrize("state", ["frozen", "trainable"])
def test_torch_compile_has_no_graph_breaks(gen, state):
    import torch._dynamo

    m, _ = trained(gen, steps=2)
    m = copy.deepcopy(m).freeze() if state == "frozen" else m
    m.eval()
    x, _ = data(4)
    with torch.no_grad():
        want = m(x)
        torch._dynamo.reset()
        compiled = torch.compile(m, backend="aot_eager", fullgraph=True)  # a break raises
        torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(m(x), want)  # the eager caches are intact
    m.train()
    torch._dynamo.reset()
    if state == "trainable":
        out = torch.compile(m, backend="aot_eager", fullgraph=True)(x)
        out.sum().backward()
        assert m.fc.latent_weight.grad is not None


@pytest.mark.slow  # Inductor compiles C++: a minute on 2 cores; aot_eager above in `make test`
def test_torch_compile_with_inductor(gen):
    """The default backend, Inductor (C++ code on the CPU), on the frozen model and on the
    trainable one with its gradients: the ternary layers' torch path compiles as a whole.
    The Triton backend's operators: tests/runtime/test_custom_ops.py."""
    import torch._dynamo

    m, _ = trained(gen, steps=2)
    frozen = copy.deepcopy(m).freeze().eval()
    x, _ = data(4)
    with torch.no_grad():
        want = frozen(x)
        torch._dynamo.reset()
        compiled = torch.compile(frozen, fullgraph=True)
        torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
    m.train()
    torch._dynamo.reset()
    torch.compile(m, fullgraph=True)(x).sum().backward()
    assert m.fc.latent_weight.grad is not None and m.conv.latent_weight.grad is not None


def test_torch_export_and_onnx_agree_with_eager(gen, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    m, _ = trained(gen, steps=2)
    m = m.freeze().eval()
    x, _ = data(5)
    with torch.no_grad():
        want = m(x)
    exported = torch.export.export(m, (x,))
    torch.testing.assert_close(exported.module()(x), want, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(m(x), want, rtol=0, atol=0)  # export left no traced caches
    path = tmp_path / "net.onnx"
    torch.onnx.export(m, (x,), str(path), dynamo=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-4, atol=1e-4)


def test_a_wrong_input_shape_names_the_layer_and_the_declared_type(gen):
    m = gen.Model().eval()
    with pytest.raises(ValueError) as err:
        m(torch.zeros(2, 1, 8, 8))
    assert str(err.value) == (
        "Net: input x must be Tensor<float32, [N, 1, 6, 6]>, got Tensor<float32, [2, 1, 8, 8]>"
    )
    with pytest.raises(ValueError, match=r"got Tensor<float32, \[1, 6, 6\]>"):
        m(torch.zeros(1, 6, 6))
    m(torch.zeros(3, 1, 6, 6))  # any N


def test_a_bitnet_block_passes_gradients_through_its_quantized_activations(tmp_path, monkeypatch):
    """BitLinear quantizes its input: with the straight-through estimator the gradient that
    reaches the RMSNorm before it is (nearly) the one of the unquantized block; rounding's own
    gradient (zero) would leave only the small part that flows through the absmax."""
    from tribuild.runtime import linear, quantize

    block = write_and_import(
        build("models/bitnet.tri:BitNetBlock", {"dim": 32, "heads": 2, "hidden": 48}, "0"),
        tmp_path / "bitnet",
    )
    torch.manual_seed(0)
    m = block.Model().train()
    x = torch.randn(2, 8, 32)

    def norm_grads() -> torch.Tensor:
        m.zero_grad()
        m(x).square().mean().backward()
        return torch.cat([m.attn_norm.weight.grad.flatten(), m.ffn_norm.weight.grad.flatten()])

    quantized = norm_grads()
    for launcher in (linear, quantize):  # each quantizes on the torch path with it
        monkeypatch.setattr(launcher, "quantize_activations_torch", lambda t: t)
    plain = norm_grads()
    assert torch.nn.functional.cosine_similarity(quantized, plain, dim=0) > 0.95
