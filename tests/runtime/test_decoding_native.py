"""The decoding runtime's native fast paths on the ``cpu`` backend: the rotary kernel
(``kernels/cpu/rope.cpp``) is ``decoding.rope``'s torch expression bit for bit (every ISA this
machine runs plus the portable one, odd shapes, strided layouts, positions past 0, zeros of
either sign, infinities, NaN, subnormals); ``rope`` and ``RMSNorm`` take the kernels only for
float32 CPU inference on the ``cpu`` backend and are PyTorch's expressions everywhere else
(autograd, other dtypes, other ranks, ``torch.jit.trace``, ``torch.compile``); ``check_ids``
reads a decode step's few ids in Python and still refuses every id out of range; a generated
BitNet LM decodes to the same bits with the rotary kernel as without it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.runtime import decoding, launch, native  # noqa: E402
from tribuild.runtime.kernels.cpu import build as cpu_build  # noqa: E402

if cpu_build.find_compiler() is None:
    pytest.skip("no C++ compiler", allow_module_level=True)

RUNNABLE = [isa for isa in cpu_build.ISAS if cpu_build.supported(isa, cpu_build.cpu_flags())]
THETA = 500000.0


@pytest.fixture(scope="module", params=RUNNABLE)
def lib(request):
    return cpu_build.build_and_load(request.param)


@pytest.fixture(autouse=True)
def _kernels_loaded():
    native.reset()
    assert native.library() is not None


def expression(x: torch.Tensor, start: int, theta: float = THETA) -> torch.Tensor:
    """``decoding.rope``'s torch expression, written out: what the kernel must give."""
    t, d = x.shape[-2], x.shape[-1]
    cos, sin = decoding._rope_tables(theta, d, start + t, x.dtype, x.device)
    cos, sin = cos[start : start + t], sin[start : start + t]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same float32 bits everywhere (zeros' signs included), NaN where the other has NaN:
    which NaN an operation on two NaNs returns depends on the order the compiler gave the
    operands of a commutative add (PyTorch's vector and scalar loops differ there too)."""
    nan = a.isnan()
    return (
        a.shape == b.shape
        and torch.equal(nan, b.isnan())
        and torch.equal(a.view(torch.int32)[~nan], b.view(torch.int32)[~nan])
    )


def special(x: torch.Tensor) -> torch.Tensor:
    """``x`` with zeros of both signs, infinities, a NaN and a subnormal in its first rows."""
    flat = x.reshape(-1, x.shape[-1])
    values = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -3e38, 7.0]
    for i, v in enumerate(values[: flat.shape[0] * flat.shape[1]]):
        flat[i % flat.shape[0], (3 * i) % flat.shape[1]] = v
    return x


def layouts(n: int, h: int, t: int, d: int, seed: int) -> dict[str, torch.Tensor]:
    """The layouts ``rope`` meets: dense, a projection's ``reshape(N, T, H, D).transpose(1, 2)``,
    a slice of a wider last dim (not dense), a broadcast head (stride 0)."""
    g = torch.Generator().manual_seed(seed)
    return {
        "dense": special(torch.randn(n, h, t, d, generator=g) * 4),
        "transposed": special(torch.randn(n, t, h, d, generator=g) * 4).transpose(1, 2),
        "sliced": special(torch.randn(n, h, t, d + 6, generator=g) * 4)[..., 3 : 3 + d],
        "expanded": special(torch.randn(n, 1, t, d, generator=g) * 4).expand(n, h, t, d),
    }


# (N, heads, T, D, start): one head and one position, the decode step of bitnet_2b's q and k,
# D of 2 (one pair) and not a multiple of the vector width, T of 1 to 17, positions past 0.
SHAPES = [
    (1, 1, 1, 2, 0),
    (1, 20, 1, 128, 37),
    (1, 5, 1, 128, 511),
    (2, 3, 5, 6, 0),
    (3, 7, 17, 130, 9),
    (1, 2, 1, 34, 1000),
]
SHAPES += [(2, 3, t, 18, t) for t in range(1, 18, 4)]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_rope_kernel_is_the_expression_bit_for_bit(lib, shape):
    n, h, t, d, start = shape
    cos, sin = decoding._rope_tables(THETA, d, start + t, torch.float32, torch.device("cpu"))
    row = start * d * 4
    for name, x in layouts(n, h, t, d, seed=sum(shape)).items():
        out = torch.empty(n, h, t, d)
        sx, so = x.stride(), out.stride()
        lib.cdll.tb_rope(
            x.data_ptr(), n, h, t, d, sx[0], sx[1], sx[2],
            cos.data_ptr() + row, sin.data_ptr() + row,
            out.data_ptr(), so[0], so[1], so[2],
        )  # fmt: skip
        assert same_bits(out, expression(x, start)), name


def strides(x: torch.Tensor) -> list[int]:
    """The strides of the dims longer than 1: the layout in memory."""
    return [s for s, n in zip(x.stride(), x.shape, strict=True) if n > 1]


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the calls of the loaded library's C function ``name`` (still run)."""
    cdll = native.library().cdll
    real, calls = getattr(cdll, name), []

    def count(*args: object) -> None:
        calls.append(1)
        real(*args)

    monkeypatch.setattr(cdll, name, count)
    return calls


@pytest.mark.parametrize("t", [1, 3])
def test_rope_on_the_cpu_backend_is_the_kernel_with_the_torch_backends_bits(monkeypatch, t):
    calls = counting(monkeypatch, "tb_rope")
    cache = decoding.KVCache(64)
    cache.offset = 40  # a step's positions start at the cache's offset
    for name, x in layouts(2, 4, t, 16, seed=t).items():
        with torch.no_grad(), cache.step():
            with launch.force_backend("torch"):
                expected = decoding.rope(x, THETA)
            before = len(calls)
            with launch.force_backend("cpu"):
                found = decoding.rope(x, THETA)
            assert len(calls) == before + 1, name
        assert same_bits(found, expected), name
        # the same memory layout as the expression's result, where a dim has more than one
        assert strides(found) == strides(expected), name


def test_rope_takes_the_torch_path_outside_float32_inference(monkeypatch):
    calls = counting(monkeypatch, "tb_rope")
    x = torch.randn(2, 3, 4, 8, generator=torch.Generator().manual_seed(1))
    with launch.force_backend("cpu"):
        # autograd: the expression's gradient
        leaf = x.clone().requires_grad_()
        decoding.rope(leaf, 10.0).square().sum().backward()
        other = x.clone().requires_grad_()
        expression(other, 0, 10.0).square().sum().backward()
        assert leaf.grad is not None and torch.equal(leaf.grad, other.grad)
        with torch.no_grad():
            # float64, a 3-d x, an odd D (the expression's own error)
            assert decoding.rope(x.double(), 10.0).dtype == torch.float64
            assert same_bits(decoding.rope(x[0], 10.0), expression(x[0], 0, 10.0))
            with pytest.raises(RuntimeError):
                decoding.rope(torch.randn(1, 1, 2, 5), 10.0)
            assert not calls
            # a trace records the expression, not the kernel's result as a constant
            traced = torch.jit.trace(lambda y: decoding.rope(y, 10.0), (x,), check_trace=False)
            z = torch.randn(2, 3, 4, 8, generator=torch.Generator().manual_seed(2))
            assert same_bits(traced(z), expression(z, 0, 10.0))
            compiled = torch.compile(lambda y: decoding.rope(y, 10.0), fullgraph=True)
            torch.testing.assert_close(compiled(z), expression(z, 0, 10.0))
            assert not calls
            decoding.rope(z, 10.0)  # and the kernel again once nothing traces
    assert len(calls) == 1


def test_rms_norm_takes_the_torch_path_outside_float32_inference(monkeypatch):
    calls = counting(monkeypatch, "tb_rms_norm")
    norm = decoding.RMSNorm(24, eps=1e-5)
    x = torch.randn(3, 24, generator=torch.Generator().manual_seed(3))
    expected = torch.nn.functional.rms_norm
    with launch.force_backend("cpu"), torch.no_grad():
        assert torch.equal(
            norm.double()(x.double()), expected(x.double(), (24,), norm.weight, 1e-5)
        )
        norm.float()
        traced = torch.jit.trace(norm, (x,), check_trace=False)
        compiled = torch.compile(norm, fullgraph=True)
        z = x.flip(0)
        assert torch.equal(traced(z), expected(z, (24,), norm.weight, 1e-5))
        torch.testing.assert_close(compiled(z), expected(z, (24,), norm.weight, 1e-5))
        assert not calls
        # no weight (elementwise_affine=False): the kernel, within float32 rounding
        bare = decoding.RMSNorm(24, eps=1e-5, elementwise_affine=False)
        torch.testing.assert_close(bare(z), expected(z, (24,), None, 1e-5), rtol=1e-6, atol=1e-6)
        assert len(calls) == 1


@pytest.mark.parametrize("n", [1, 5, decoding._FEW_IDS, decoding._FEW_IDS + 1, 300])
def test_check_ids_refuses_every_id_out_of_range(n):
    ids = torch.randint(0, 96, (1, n), generator=torch.Generator().manual_seed(n))
    decoding.check_ids(ids, 96)
    decoding.check_ids(ids.to(torch.uint8), 96)
    for bad, position in ((96, n - 1), (-1, 0), (10**6, n // 2)):
        wrong = ids.clone()
        wrong[0, position] = bad
        with pytest.raises(ValueError, match=rf"token id {bad} is out of range: .*0\.\.95"):
            decoding.check_ids(wrong, 96)
    with pytest.raises(ValueError, match="must be an integer tensor"):
        decoding.check_ids(ids.float(), 96)


def test_a_generated_lm_decodes_to_the_same_bits_with_and_without_the_rope_kernel(
    monkeypatch, tmp_path
):
    args = {"vocab": 96, "dim": 64, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 160}
    model = write_and_import(build("models/bitnet_lm.tri:BitNetLM", args, "3"), tmp_path).Model
    torch.manual_seed(0)
    lm = model().eval().freeze()
    ids = torch.randint(0, 96, (2, 9), generator=torch.Generator().manual_seed(4))

    def decode() -> torch.Tensor:
        cache, logits = decoding.KVCache(16), []
        with launch.force_backend("cpu"), torch.no_grad():
            with cache.step():
                logits.append(lm(ids[:, :5]))
            for i in range(5, 9):
                with cache.step():
                    logits.append(lm(ids[:, i : i + 1]))
        return torch.cat(logits, dim=1)

    calls = counting(monkeypatch, "tb_rope")
    with_kernel = decode()
    assert len(calls) == 2 * 2 * 5  # q and k of 2 layers, 5 steps
    real = decoding.kernels  # the rope's kernel off (it asks with no weight), the norms' on
    monkeypatch.setattr(decoding, "kernels", lambda x, w=None: None if w is None else real(x, w))
    assert torch.equal(with_kernel, decode())
    assert len(calls) == 20
