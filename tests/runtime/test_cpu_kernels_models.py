"""Generated modules on the ``cpu`` backend (native kernels) against the torch path: the BitNet
LM built at -O3 (BitLinear fused into each projection, so every projection runs the kernels)
gives the same logits and greedy tokens; its calls trace as ``tribuild::cpu_ternary_linear``
under ``torch.compile(fullgraph=True)`` and ``torch.export``, and the compiled module gives
the eager one's logits."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.runtime import launch, native  # noqa: E402
from tribuild.runtime.kernels.cpu import build as cpu_build  # noqa: E402

if cpu_build.find_compiler() is None:
    pytest.skip("no C++ compiler", allow_module_level=True)

ARGS = {"vocab": 96, "dim": 64, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 160}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bitnet_lm_cpu")
    cls = write_and_import(build("models/bitnet_lm.tri:BitNetLM", ARGS, "3"), folder).Model
    torch.manual_seed(0)
    m = cls().eval()
    with torch.no_grad():  # norms near 1, as a trained model's
        for key, p in m.named_parameters():
            if "norm" in key:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape))
    return m.freeze()  # packed weights only, as a loaded checkpoint: what a trace reads


@pytest.fixture(autouse=True)
def _kernels_loaded():
    native.reset()
    assert native.library() is not None


def test_logits_and_greedy_tokens_match_the_torch_path(model):
    ids = torch.randint(0, ARGS["vocab"], (2, 11), generator=torch.Generator().manual_seed(1))
    calls = []
    real = native.linear
    native.linear = lambda *a: calls.append(1) or real(*a)  # counts, then runs the kernels
    try:
        with launch.force_backend("cpu"), torch.no_grad():
            logits = model(ids)
            tokens = model.generate(ids, 16)
    finally:
        native.linear = real
    with launch.force_backend("torch"), torch.no_grad():
        expected_logits = model(ids)
        expected_tokens = model.generate(ids, 16)
    assert len(calls) >= 7 * ARGS["layers"]  # every projection of the first forward, at least
    torch.testing.assert_close(logits, expected_logits, rtol=1e-4, atol=1e-4)
    assert torch.equal(tokens, expected_tokens)


def test_at_O2_the_separate_quantization_reaches_the_integer_kernels(model, tmp_path):
    """-O2 quantizes in a call of its own and hands the projections float activations; on the
    cpu backend that call marks its output, so the projections run the int8 kernels (not the
    float-activation ones, nor the dense float path above 16 rows), with -O3's logits."""
    cls = write_and_import(build("models/bitnet_lm.tri:BitNetLM", ARGS, "2"), tmp_path).Model
    o2 = cls().eval()
    o2.load_state_dict(model.state_dict())
    ids = torch.randint(0, ARGS["vocab"], (2, 20), generator=torch.Generator().manual_seed(3))
    modes = []
    real = native.linear
    native.linear = lambda *a: modes.append(a[-1]) or real(*a)  # quantize, the last argument
    try:
        with launch.force_backend("cpu"), torch.no_grad():
            logits = o2(ids)  # 40 rows: past the float kernels' 16
    finally:
        native.linear = real
    with launch.force_backend("cpu"), torch.no_grad():
        expected = model(ids)
    assert modes and all(modes)
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)
    with launch.force_backend("cpu"):
        h = launch.quantize_activations(torch.randn(3, 8))
    assert native.quantized(h)
    h.mul_(2)  # modified: no longer BitLinear's activations
    assert not native.quantized(h)


@pytest.mark.parametrize("shape", [(1, 1, 2560), (2, 3, 7), (1, 5, 1031), (4, 6912)])
def test_the_runtime_rms_norm_is_one_native_call_on_the_cpu_backend(shape):
    """decoding.RMSNorm: within float32 rounding of nn.RMSNorm on the cpu backend (a sum in
    double, not PyTorch's float32 order), nn.RMSNorm's own bits on the torch backend and
    under autograd."""
    from tribuild.runtime.decoding import RMSNorm

    norm = RMSNorm(shape[-1], eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(shape[-1], generator=torch.Generator().manual_seed(4)) + 0.5)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(5)) * 3
    expected = torch.nn.functional.rms_norm(x, (shape[-1],), norm.weight.detach(), 1e-5)
    calls = []
    real = native.library
    with launch.force_backend("cpu"), torch.no_grad():
        native.library = lambda *a: calls.append(1) or real(*a)
        try:
            found = norm(x)
        finally:
            native.library = real
    assert calls
    torch.testing.assert_close(found, expected, rtol=1e-6, atol=1e-6)
    with launch.force_backend("torch"), torch.no_grad():
        assert torch.equal(norm(x), expected)
    with launch.force_backend("cpu"):
        assert torch.equal(norm(x.requires_grad_()).detach(), expected)


def test_traced_calls_are_the_cpu_operator(model):
    block = model.model.layers[0]  # a generated decoder layer: attention and MLP, 7 projections
    x = torch.randn(1, 5, ARGS["dim"], generator=torch.Generator().manual_seed(2))
    with launch.force_backend("cpu"), torch.no_grad():
        eager = block(x)
        exported = torch.export.export(block, (x,))
        targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
        assert targets.count("tribuild.ternary_linear_zero_skip.default") == 7
        torch.testing.assert_close(exported.module()(x), eager)
        compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
        torch.testing.assert_close(compiled(x), eager)


class BitLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        from tribuild.runtime.packing import pack

        self.register_buffer("packed", pack(torch.randint(-1, 2, (9, 70), dtype=torch.int8)))

    def forward(self, x):
        return launch.ternary_linear(x, self.packed, torch.ones(1), act="relu", quantize=True)


def test_traced_linear_is_the_cpu_operator():
    layer, x = BitLinear(), torch.randn(3, 70)
    with launch.force_backend("cpu"):
        exported = torch.export.export(layer, (x,))
        targets = [str(n.target) for n in exported.graph.nodes if n.op == "call_function"]
        assert targets[-1:] == ["tribuild.cpu_ternary_linear.default"]
        torch.testing.assert_close(exported.module()(x), layer(x))
        compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
        torch.testing.assert_close(compiled(x), layer(x))


def test_operator_against_its_fake():
    from tribuild.runtime.packing import pack

    codes = torch.randint(-1, 2, (9, 70), dtype=torch.int8)
    for quantize in (True, False):
        x, scale = torch.randn(3, 70), torch.rand(9) + 0.5
        args = (x, pack(codes), scale, torch.randn(9), None, "relu", quantize)
        torch.library.opcheck(native.CPU_TERNARY_LINEAR, args)
