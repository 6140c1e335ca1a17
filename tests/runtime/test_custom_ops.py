"""The ternary calls as PyTorch operators (``torch.ops.tribuild.*``, tribuild.runtime.ops) on the
Triton backend, here under the interpreter: each operator against its fake implementation
(``torch.library.opcheck``), and a generated module with every kind of ternary call compiled
whole (``fullgraph=True``, each call one operator node) and exported, equal to its eager
forward, with Inductor too (``mode="reduce-overhead"``: on CUDA, with ``make test-cuda``, it
captures the model in CUDA graphs; on the CPU there is no graph to capture). Then the steady
state a CUDA graph captures: after one call, a call prepares nothing (no tuning, no device
query, no zero-skip plan from the weight's values)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tests.device import DEVICE, MODULE_BACKEND, on_device  # noqa: E402
from tribuild.driver.sources import load_sources  # noqa: E402
from tribuild.engine import Database  # noqa: E402
from tribuild.runtime import autotune, launch, skip  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402
from tribuild.runtime.packing import pack_ternary  # noqa: E402

# Every ternary call a generated forward makes: a convolution with a folded BatchNorm and a
# residual, a depthwise one, a strided 1x1 one, activation quantization before a linear layer,
# a linear layer with a bias, attention's two projections.
SRC = """
layer Net(c: int = 8) {
    let conv = TernaryConv2d(c, c, kernel=3, padding=1)
    let bn = BatchNorm2d(c)
    let dw = TernaryConv2d(c, c, kernel=3, padding=1, groups=c)
    let down = TernaryConv2d(c, c, kernel=1, stride=2)
    let attn = MultiHeadAttention(c, heads=2)
    let proj = TernaryLinear(c, c)
    let fc = TernaryLinear(c, 3, bias=true)
    fn forward(x: Tensor<float32, [N, c, 6, 6]>) -> Tensor<float32, [N, 3]> {
        let y = relu(bn(conv(x)) + x)
        let z = down(relu(dw(y)))
        let t = transpose(reshape(z, [N, c, 9]), 1, 2)
        let u = proj(quantize_activations(attn(t) + t))
        return fc(mean(u, [1], false))
    }
}
"""
TERNARY_OPS = {
    "ternary_linear",
    "ternary_conv2d",
    "quantize_activations",
    "ternary_linear_zero_skip",
    "ternary_conv2d_zero_skip",
}


def generate(level: str, root):
    """``Net`` built at ``level`` in the folder ``root``, imported."""
    (root / "m.tri").write_text(SRC)
    db = Database()
    load_sources(db, str(root), ("m.tri",))
    return write_and_import(build("m.tri:Net", {}, level, db=db), root / "out")


@pytest.fixture(scope="module", params=[pytest.param("0", marks=pytest.mark.slow), "2"])
def gen(request, tmp_path_factory):
    """The module built at -O0 (the plain launcher) and at -O2 (fused epilogues, zero-skip).
    Every test runs under Triton's interpreter, so `make test` takes -O2 alone (the default
    level, and the one with more operators); -O0 is left to `make test-all` and CI."""
    return generate(request.param, tmp_path_factory.mktemp(f"custom_ops_O{request.param}"))


@pytest.fixture(autouse=True)
def _triton_backend():
    """The Triton backend: under the interpreter on the CPU, ``auto`` (the kernels) on CUDA."""
    with force_backend("triton" if MODULE_BACKEND == "torch" else MODULE_BACKEND):
        yield


def frozen(gen):
    """A frozen eval-mode model whose ternary weights have an all-zero output channel and an
    all-zero block of 32 inputs, so that the zero-skip paths skip something."""
    torch.manual_seed(0)
    m = gen.Model()
    with torch.no_grad():
        m.conv.latent_weight[1] = 0
        m.down.latent_weight[2] = 0
        m.proj.latent_weight[0] = 0
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 1.5)
    return m.freeze().eval().to(DEVICE)


def example(n: int = 2, seed: int = 0) -> torch.Tensor:
    return on_device(torch.randn(n, 8, 6, 6, generator=torch.Generator().manual_seed(seed)))


def ternary_nodes(graph: torch.fx.Graph) -> list[str]:
    """The names of the tribuild operators ``graph`` calls, in order."""
    return [
        n.target.name().split("::")[1].split(".")[0]
        for n in graph.nodes
        if n.op == "call_function"
        and isinstance(n.target, torch._ops.OpOverload)
        and n.target.namespace == "tribuild"
    ]


def test_compiled_whole_with_each_ternary_call_one_operator(gen):
    import torch._dynamo

    m = frozen(gen)
    x = example()
    graphs: list[torch.fx.GraphModule] = []

    def recording(gm, inputs):
        graphs.append(gm)
        return gm.forward

    with torch.no_grad():
        want = m(x)
        torch._dynamo.reset()
        torch.compile(m, backend=recording, fullgraph=True)(x)
        torch._dynamo.reset()
        compiled = torch.compile(m, backend="aot_eager", fullgraph=True)  # a break raises
        torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(compiled(x), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(m(x), want, rtol=0, atol=0)
    (graph,) = graphs
    called = ternary_nodes(graph.graph)
    # conv, dw, down, attention's in/out projections, proj and its quantization, fc
    assert len(called) == 8 and set(called) <= TERNARY_OPS
    zero_skip = "at -O2" in gen.__doc__  # -O0 launches the plain kernels
    assert ("ternary_linear_zero_skip" in called) == ("ternary_conv2d_zero_skip" in called)
    assert ("ternary_linear_zero_skip" in called) == zero_skip


def test_exported_with_the_operators_and_equal_to_eager(gen):
    m = frozen(gen)
    x = example()
    with torch.no_grad():
        want = m(x)
    exported = torch.export.export(m, (x,))
    assert len(ternary_nodes(exported.graph)) == 8
    with torch.no_grad():
        torch.testing.assert_close(exported.module()(x), want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(m(x), want, rtol=0, atol=0)


def test_the_torch_backend_traces_no_operator(gen):
    """On the torch backend a trace holds plain PyTorch operations (what ONNX export needs)."""
    m = frozen(gen)
    x = example()
    with force_backend("torch"):
        with torch.no_grad():
            want = m(x)
        exported = torch.export.export(m, (x,))
        assert ternary_nodes(exported.graph) == []
        with torch.no_grad():
            torch.testing.assert_close(exported.module()(x), want, rtol=1e-5, atol=1e-5)


def _operator_cases():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 40, generator=g)
    w = torch.randn(6, 40, generator=g)
    w[2] = 0
    w[:, :32] = 0  # a zero K block in every channel
    packed, scale = pack_ternary(w)
    bias, res = torch.randn(6, generator=g), torch.randn(3, 6, generator=g)
    img = torch.randn(2, 4, 5, 5, generator=g)
    wc = torch.randn(6, 4, 3, 3, generator=g)
    wc[0] = 0
    cpacked, cscale = pack_ternary(wc, "channel")
    cres = torch.randn(2, 6, 3, 3, generator=g)
    dpacked, dscale = pack_ternary(torch.randn(4, 1, 3, 3, generator=g))
    x, packed, scale, bias, res, img, cpacked, cscale, cres, dpacked, dscale = on_device(
        x, packed, scale, bias, res, img, cpacked, cscale, cres, dpacked, dscale
    )
    ops = torch.ops.tribuild
    return [
        (ops.ternary_linear.default, (x, packed, scale, bias, res, "relu", False)),
        (ops.ternary_linear.default, (x[:1], packed, scale, None, None, "none", True)),
        (ops.ternary_linear_zero_skip.default, (x, packed, scale, bias, res, "silu", False)),
        (
            ops.ternary_conv2d.default,
            (img, cpacked, cscale, bias, cres, [3, 3], [2, 2], [1, 1], 1, "relu", False),
        ),
        (
            ops.ternary_conv2d.default,
            (img, dpacked, dscale, None, None, [3, 3], [1, 1], [1, 1], 4, "none", False),
        ),
        (
            ops.ternary_conv2d_zero_skip.default,
            (img, cpacked, cscale, bias, cres, 3, 2, 1, 1, "relu", False),
        ),
        (ops.quantize_activations.default, (x, False)),
    ]


@pytest.mark.parametrize("case", range(7))
def test_operator_agrees_with_its_fake_and_its_eager_function(case):
    """``opcheck``: the schema, the fake implementation's shapes, dtypes and strides against the
    real one's, and the operator traced by AOTAutograd with dynamic shapes."""
    op, args = _operator_cases()[case]
    checks = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(op, args, test_utils=checks)  # raises on a mismatch
    name = op.name().split("::")[1].split(".")[0]
    got = op(*args)
    if name == "quantize_activations":
        want = launch.quantize_activations(args[0], tuned=args[1])
    elif name.startswith("ternary_linear"):
        x, packed, scale, bias, res, act, tuned = args
        fn = skip.linear if name.endswith("zero_skip") else launch.ternary_linear
        want = fn(x, packed, scale, bias, act, res, tuned=tuned)
    elif name == "ternary_conv2d":
        x, packed, scale, bias, res, size, stride, pad, groups, act, tuned = args
        want = launch.ternary_conv2d(
            x, packed, scale, bias, kernel_size=tuple(size), stride=tuple(stride),
            padding=tuple(pad), groups=groups, act=act, residual=res, tuned=tuned,
        )  # fmt: skip
    else:
        x, packed, scale, bias, res, size, stride, pad, groups, act, tuned = args
        want = skip.conv2d(
            x, packed, scale, bias, kernel_size=size, stride=stride, padding=pad,
            groups=groups, act=act, residual=res, tuned=tuned,
        )  # fmt: skip
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got.is_contiguous() and not got.requires_grad


def test_outputs_need_no_gradient_as_the_kernels_have_none():
    """An eval-mode call with a bias that requires grad, grad mode on: the kernels' outputs,
    through the operator or not, never carried a graph (training runs the torch path)."""
    g = torch.Generator().manual_seed(1)
    packed, scale, x = on_device(
        *pack_ternary(torch.randn(4, 8, generator=g)), torch.randn(2, 8, generator=g)
    )
    bias = on_device(torch.randn(4, generator=g)).requires_grad_()
    out = torch.ops.tribuild.ternary_linear(x, packed, scale, bias, None, "none", False)
    assert not out.grad_fn
    assert not launch.ternary_linear(x, packed, scale, bias).requires_grad


def test_after_one_call_a_call_prepares_nothing(gen, monkeypatch):
    """The launch path a CUDA graph captures: after a warm-up call (what ``mode=
    "reduce-overhead"`` runs before capturing), at -O3 too, no call tunes, asks the device's
    name or reads a weight's values for a zero-skip plan."""
    m = frozen(gen)
    x = example(1)
    packed, scale = on_device(*pack_ternary(torch.randn(5, 6)))
    with torch.no_grad():
        want = m(x)
        want_o3 = launch.ternary_linear(x[0, 0], packed, scale, tuned=True)

        def forbidden(*args, **kwargs):
            raise AssertionError("prepared again after the warm-up call")

        for module, name in [
            (autotune, "choose"),
            (autotune, "device_name"),
            (autotune, "bench"),
            (skip, "zero_skip"),
        ]:
            monkeypatch.setattr(module, name, forbidden)
        torch.testing.assert_close(m(x), want, rtol=0, atol=0)
        torch.testing.assert_close(
            launch.ternary_linear(x[0, 0], packed, scale, tuned=True), want_o3, rtol=0, atol=0
        )


def test_a_new_tuning_cache_is_asked_again(monkeypatch, tmp_path):
    """A prepared tuned launch is valid for the tuning cache it was chosen with: another cache
    file (another test, another user's) gets the choice written again."""
    packed, scale, x = on_device(*pack_ternary(torch.randn(5, 12)), torch.randn(2, 12))
    for name in ("a.json", "b.json"):
        monkeypatch.setenv("TRIBUILD_AUTOTUNE_CACHE", str(tmp_path / name))
        launch.ternary_linear(x, packed, scale, tuned=True)
        assert (tmp_path / name).exists()


def test_a_deep_copy_compiles_too(gen):
    """Compiled twice over two copies of a model (two sets of buffers): each computes its own."""
    import torch._dynamo

    m = frozen(gen)
    other = copy.deepcopy(m)
    with torch.no_grad():
        other.fc.bias.add_(1.0)
        x = example(1)
        torch._dynamo.reset()
        for model in (m, other):
            want = model(x)
            got = torch.compile(model, backend="aot_eager", fullgraph=True)(x)
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow  # Inductor compiles C++ (or, on CUDA, Triton) code: several seconds
def test_inductor_with_reduce_overhead(tmp_path):
    """The default backend over the operators, at -O2; on CUDA every call after the warm-up
    replays a CUDA graph of the whole model (no part skipped)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    m = frozen(generate("2", tmp_path))
    x = example(1)
    with torch.no_grad():
        want = m(x)
        torch._dynamo.reset()
        counters.clear()
        compiled = torch.compile(m, mode="reduce-overhead", fullgraph=True)
        for _ in range(3):  # warm-up, capture, replay
            torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-4)
    if DEVICE == "cuda":
        assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])
