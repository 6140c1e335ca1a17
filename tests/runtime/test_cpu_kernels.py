"""The native CPU kernels (``tribuild.runtime.kernels.cpu``) on every ISA this machine runs,
plus the portable one: integer sums bit-exact against an integer reference, the quantization
exact against ``ternarize.quantize_activations``, outputs (quantized, and float activations
summed in float32) against a float64 oracle, on odd
shapes (K not a multiple of the vector width, N of 1, rows 1 to 17 and 300, the decode and
the GEMM paths); the ISA choice from CPU flags; the launcher (``launch.ternary_linear`` on the
``cpu`` backend) against the torch path.

Libraries are compiled once per machine into the default cache (a few seconds each) and
loaded from it afterwards; the build tests use their own cache folders.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tribuild.runtime import launch, native  # noqa: E402
from tribuild.runtime.kernels.cpu import build  # noqa: E402
from tribuild.runtime.packing import pack  # noqa: E402
from tribuild.runtime.ternarize import EPS, quantize_activations  # noqa: E402

if build.find_compiler() is None:
    pytest.skip("no C++ compiler", allow_module_level=True)

RUNNABLE = [isa for isa in build.ISAS if build.supported(isa, build.cpu_flags())]
# (rows, N, K): K odd or below one block, N of 1 and not a multiple of the group of 4, the
# decode path (1 row), the row-pair GEMM with an odd row left (3, 17), a long K (> 8 blocks:
# several int16 runs), more rows than a row chunk (300).
SHAPES = [
    (1, 1, 1),
    (1, 5, 130),
    (2, 1, 7),
    (3, 9, 257),
    (16, 4, 128),
    (17, 6, 1100),
    (300, 7, 131),
]
SHAPES += [(m, 3, 45) for m in range(1, 18)]


@pytest.fixture(scope="module", params=RUNNABLE)
def lib(request):
    return build.build_and_load(request.param)


def weights(n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    codes = torch.randint(
        -1, 2, (n, k), dtype=torch.int8, generator=torch.Generator().manual_seed(seed)
    )
    return codes, pack(codes)


def activations(m: int, k: int, seed: int) -> torch.Tensor:
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(seed)) * 3
    if m > 1:
        x[1] = 0.0  # a zero row: its scale comes from the EPS clamp
    x[0, 0] = 1e4 if k > 1 else x[0, 0]  # one large value: many codes round to zero
    return x


def repack(lib: build.Library, packed: torch.Tensor, n: int, k: int) -> torch.Tensor:
    out = torch.empty(lib.cdll.tb_layout_bytes(n, k), dtype=torch.uint8)
    lib.cdll.tb_repack(packed.data_ptr(), n, k, out.data_ptr())
    return out


def integer_reference(x: torch.Tensor, codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q · codesᵀ as int64, s)`` with BitLinear's quantization written out in float32."""
    amax = x.abs().amax(dim=-1, keepdim=True).clamp_min(EPS)
    s = torch.tensor(127.0) / amax
    q = (x * s).round().clamp(-128, 127).to(torch.int64)
    return q @ codes.to(torch.int64).T, s.flatten()


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_integer_sums_are_exact(lib, m, n, k):
    codes, packed = weights(n, k, m * 1000 + k)
    x = activations(m, k, n)
    raw = torch.empty(m, n, dtype=torch.int32)
    w = repack(lib, packed, n, k)  # held: a temporary's memory is freed before the call
    lib.cdll.tb_linear_raw(x.data_ptr(), m, k, w.data_ptr(), n, raw.data_ptr(), EPS, 2)
    expected, _ = integer_reference(x, codes)
    assert torch.equal(raw.to(torch.int64), expected)


@pytest.mark.parametrize("m,k", [(1, 1), (3, 45), (5, 300), (2, 4096)])
def test_quantization_is_the_runtimes(lib, m, k):
    x = activations(m, k, 7)
    x[-1, -1] = 0.5 / (127.0 / x[-1].abs().max())  # a tie (if representable): half to even
    q = torch.empty(m, k, dtype=torch.int8)
    s = torch.empty(m, dtype=torch.float32)
    lib.cdll.tb_quantize(x.data_ptr(), m, k, q.data_ptr(), s.data_ptr(), EPS)
    assert torch.equal(q.float() / s[:, None], quantize_activations(x))
    _, s_ref = integer_reference(x, torch.zeros(1, k, dtype=torch.int8))
    assert torch.equal(s, s_ref)


@pytest.mark.parametrize("where", [0, 9, 20])  # in the first vector, a later one, the tail
def test_the_absmax_skips_a_nan_as_it_always_did(lib, where):
    """The vectorized absmax keeps the scalar fold's semantics, max(a, |x|) = a < |x| ? |x| : a:
    a NaN is never taken (the row's scale comes from its other values), -0 is 0."""
    x = torch.linspace(-3.0, 2.0, 21).reshape(1, 21)
    x[0, where] = float("nan")
    q = torch.empty(1, 21, dtype=torch.int8)
    s = torch.empty(1, dtype=torch.float32)
    lib.cdll.tb_quantize(x.data_ptr(), 1, 21, q.data_ptr(), s.data_ptr(), EPS)
    finite = x[~x.isnan()]
    assert s.item() == torch.tensor(127.0) / finite.abs().max()


@pytest.mark.parametrize("act", sorted(native.ACT_CODES))
@pytest.mark.parametrize("m,n,k", [(1, 1, 3), (2, 13, 200), (17, 6, 1100), (300, 5, 131)])
def test_outputs_match_the_float64_oracle(lib, m, n, k, act):
    codes, packed = weights(n, k, k)
    x = activations(m, k, m)
    gen = torch.Generator().manual_seed(3)
    scale = torch.rand(n, generator=gen) + 0.5
    bias = torch.randn(n, generator=gen)
    residual = torch.randn(m, n, generator=gen)
    out = torch.empty(m, n)
    w = repack(lib, packed, n, k)
    lib.cdll.tb_linear(
        x.data_ptr(),
        m,
        k,
        w.data_ptr(),
        n,
        scale.data_ptr(),
        1,
        bias.data_ptr(),
        residual.data_ptr(),
        native.ACT_CODES[act],
        out.data_ptr(),
        EPS,
        2,
    )
    acc, s = integer_reference(x, codes)
    y = acc.double() / s.double()[:, None] * scale.double() + bias.double() + residual.double()
    expected = {
        "none": y,
        "relu": y.relu(),
        "relu6": y.clamp(0, 6),
        "silu": torch.nn.functional.silu(y),
        "gelu": torch.nn.functional.gelu(y),
        "sigmoid": y.sigmoid(),
    }[act]
    torch.testing.assert_close(out.double(), expected, rtol=2e-6, atol=2e-6 * float(y.abs().max()))


@pytest.mark.parametrize("act", ["none", "relu", "relu6"])
@pytest.mark.parametrize("channel_scale", [0, 1])
@pytest.mark.parametrize("operands", ["both", "none"])
@pytest.mark.parametrize("m,n", [(1, 10), (3, 9), (34, 8)])
def test_epilogue_is_bit_exact(lib, m, n, act, channel_scale, operands):
    """The epilogue, whole groups of 4 outputs at once on AVX2 and one at a time otherwise (the
    last, partial group), rounds exactly as its float32 formula, one operation at a time:
    ``act((float(sum c q) / s) * scale + bias + residual)``, NaN and -0 included."""
    k = 300
    codes, packed = weights(n, k, 5)
    x = activations(m, k, 6)
    gen = torch.Generator().manual_seed(7)
    scale = torch.rand(n if channel_scale else 1, generator=gen) + 0.5
    bias = torch.randn(n, generator=gen) if operands == "both" else None
    residual = torch.randn(m, n, generator=gen) * 20 if operands == "both" else None
    if residual is not None:
        residual[0, :3] = torch.tensor([float("nan"), 6.5, -1e30])  # NaN, above 6, far below 0
    w = repack(lib, packed, n, k)
    raw = torch.empty(m, n, dtype=torch.int32)
    lib.cdll.tb_linear_raw(x.data_ptr(), m, k, w.data_ptr(), n, raw.data_ptr(), EPS, 1)
    _, s = integer_reference(x, codes)
    y = raw.float() / s[:, None]
    y = y * scale
    y = y + bias if bias is not None else y
    y = y + residual if residual is not None else y
    if act == "relu":  # activate(): y > 0 ? y : 0
        y = torch.where(y > 0, y, torch.zeros(()))
    elif act == "relu6":  # std::min(std::max(y, 0), 6): NaN passes, -0 stays
        y = torch.where(y < 0, torch.zeros(()), y)
        y = torch.where(y > 6, torch.full((), 6.0), y)
    out = torch.empty(m, n)
    lib.cdll.tb_linear(
        x.data_ptr(),
        m,
        k,
        w.data_ptr(),
        n,
        scale.data_ptr(),
        channel_scale,
        None if bias is None else bias.data_ptr(),
        None if residual is None else residual.data_ptr(),
        native.ACT_CODES[act],
        out.data_ptr(),
        EPS,
        2,
    )
    assert torch.equal(out.view(torch.int32), y.view(torch.int32))  # bits, NaN and -0 included


@pytest.mark.parametrize("act", ["none", "gelu"])
@pytest.mark.parametrize("m,n,k", [(1, 1, 3), (2, 13, 200), (17, 6, 1100), (300, 5, 131)])
def test_float_activations_match_the_float64_oracle(lib, m, n, k, act):
    """Without quantization: ``x`` as it is, summed in float32 (to float32's rounding)."""
    codes, packed = weights(n, k, k)
    x = activations(m, k, m)
    gen = torch.Generator().manual_seed(4)
    scale, bias, residual = torch.rand(1, generator=gen) + 0.5, torch.randn(n), torch.randn(m, n)
    out = torch.empty(m, n)
    w = repack(lib, packed, n, k)
    lib.cdll.tb_linear_f32(
        x.data_ptr(),
        m,
        k,
        w.data_ptr(),
        n,
        scale.data_ptr(),
        0,
        bias.data_ptr(),
        residual.data_ptr(),
        native.ACT_CODES[act],
        out.data_ptr(),
        2,
    )
    y = (x.double() @ codes.double().T) * scale.double() + bias.double() + residual.double()
    y = torch.nn.functional.gelu(y) if act == "gelu" else y
    bound = 1e-6 * float((x.double().abs() @ codes.double().abs().T).max() + y.abs().max())
    torch.testing.assert_close(out.double(), y, rtol=0, atol=bound)


def test_threads_do_not_change_results(lib):
    codes, packed = weights(37, 999, 1)
    x = activations(5, 999, 2)
    w = repack(lib, packed, 37, 999)
    outs = []
    for threads in (1, 2, 3):
        raw = torch.empty(5, 37, dtype=torch.int32)
        lib.cdll.tb_linear_raw(x.data_ptr(), 5, 999, w.data_ptr(), 37, raw.data_ptr(), EPS, threads)
        outs.append(raw)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_isa_choice_from_cpu_flags():
    avx2 = frozenset({"avx2", "fma", "f16c", "sse4_2"})
    avx512 = avx2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}
    x86 = build.platform.machine().lower() in ("x86_64", "amd64")
    assert build.machine_isa(frozenset()) == "portable"
    assert build.machine_isa(frozenset({"avx2"})) == "portable"  # no FMA: not the AVX2 build
    assert build.machine_isa(avx2) == ("avx2" if x86 else "portable")
    assert build.machine_isa(avx512) == ("avx512" if x86 else "portable")
    assert build.machine_isa(avx512 | {"avx512_vnni"}) == ("avx512vnni" if x86 else "portable")
    assert build.machine_isa() in RUNNABLE and RUNNABLE[-1] == "portable"


def test_forced_isa(monkeypatch):
    monkeypatch.setenv(build.ISA_VARIABLE, "portable")
    assert build.wanted_isa() == "portable"
    monkeypatch.setenv(build.ISA_VARIABLE, "sse9")
    with pytest.raises(ValueError, match="sse9"):
        build.wanted_isa()
    missing = [isa for isa in build.ISAS if isa not in RUNNABLE]
    for isa in missing:  # this machine's CPU lacks it: refused, as its instructions would fault
        monkeypatch.setenv(build.ISA_VARIABLE, isa)
        with pytest.raises(ValueError, match="lacks"):
            build.wanted_isa()


@pytest.mark.parametrize("isa", [isa for isa in build.ISAS if isa not in RUNNABLE])
def test_isas_this_cpu_lacks_still_compile(isa, tmp_path, monkeypatch):
    """AVX-512 (and VNNI) on a machine without them: compiled, not run."""
    monkeypatch.setenv(build.CACHE_VARIABLE, str(tmp_path))
    path = build.compile_library(build.find_compiler(), isa)
    assert path.exists() and path.name.startswith(f"ternary-{isa}-")


@pytest.fixture
def cpu_backend():
    native.reset()
    assert native.library() is not None
    with launch.force_backend("cpu"):
        yield


@pytest.mark.parametrize("shape", [(1, 64), (3, 1, 130), (2, 9, 64), (300, 33)])
@pytest.mark.parametrize("epilogue", ["plain", "channel-bias-relu-residual"])
@pytest.mark.parametrize("quantize", [True, False])
def test_launch_matches_the_torch_path(cpu_backend, shape, epilogue, quantize):
    k, n = shape[-1], 19
    codes, packed = weights(n, k, 5)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    kwargs: dict = {"quantize": quantize}
    scale = torch.tensor([0.7])
    if epilogue != "plain":
        scale = torch.rand(n) + 0.5
        kwargs.update(bias=torch.randn(n), act="relu", residual=torch.randn(*shape[:-1], n))
    found = launch.ternary_linear(x, packed, scale, **kwargs)
    with launch.force_backend("torch"):
        expected = launch.ternary_linear(x, packed, scale, **kwargs)
    assert found.shape == expected.shape
    torch.testing.assert_close(found, expected, rtol=1e-5, atol=1e-5)


def test_layout_is_converted_once_and_follows_changes(cpu_backend):
    codes, packed = weights(8, 40, 2)
    x = torch.randn(2, 40)
    first = launch.ternary_linear(x, packed, torch.ones(1), quantize=True)
    converted = native._layouts.get(id(packed), packed)
    launch.ternary_linear(x, packed, torch.ones(1), quantize=True)
    assert converted is not None and native._layouts.get(id(packed), packed) is converted
    packed.copy_(pack(-codes))  # modified in place: converted again
    again = launch.ternary_linear(x, packed, torch.ones(1), quantize=True)
    torch.testing.assert_close(again, -first)


def test_what_the_kernels_do_not_take_runs_the_torch_path(cpu_backend):
    codes, packed = weights(8, 40, 2)
    x = torch.randn(2, 40, dtype=torch.float64)
    for quantize in (True, False):
        with launch.force_backend("torch"):
            expected = launch.ternary_linear(x, packed, torch.ones(1), quantize=quantize)
        found = launch.ternary_linear(x, packed, torch.ones(1), quantize=quantize)
        assert found.dtype == torch.float64 and torch.equal(found, expected)
    many = torch.randn(native.FLOAT_MAX_ROWS + 1, 40)  # unquantized, more rows: torch path
    assert not native.takes(many, packed, None, None, False)
    assert native.takes(many, packed, None, None, True) and native.takes(
        many[:-1], packed, None, None, False
    )


def test_zero_skip_reuses_the_prepared_launch_and_follows_changes(cpu_backend, monkeypatch):
    """skip.linear (what generated kernels call) finds a prepared launch before its plan,
    where the plan skips nothing; a weight modified in place is planned and converted again,
    and a weight with a zero channel keeps going through its plan."""
    from tribuild.runtime import skip

    codes, packed = weights(8, 40, 2)
    x = torch.randn(2, 40)
    first = skip.linear(x, packed, torch.ones(1), quantize=True)
    planned, plan = [], skip._plan
    monkeypatch.setattr(skip, "_plan", lambda *a: planned.append(1) or plan(*a))
    assert torch.equal(skip.linear(x, packed, torch.ones(1), quantize=True), first)
    assert planned == []  # the prepared launch ran
    packed.copy_(pack(-codes))
    torch.testing.assert_close(skip.linear(x, packed, torch.ones(1), quantize=True), -first)
    assert planned == [1]
    codes[3] = 0  # a dead channel: the plan compacts the weight, every call goes through it
    dead = pack(codes)
    expected = launch.ternary_linear(x, dead, torch.ones(1), quantize=True)
    for _ in range(2):
        torch.testing.assert_close(skip.linear(x, dead, torch.ones(1), quantize=True), expected)
    assert planned == [1, 1, 1]
