"""The split-K decode kernel (``kernels.ternary_decode``), under TRITON_INTERPRET=1 (or on
CUDA), against the float64 oracle, with and without its fused input quantization.

Configs are forced (``kernel="decode"``) with blocks below the shapes, so that cases run
several channel tiles, several K slices (some of them empty: more slices than words) and the
split-K finish. K is odd where it can be: the kernel reads packed rows as int32 words, so it
runs where ``ceil(K / 4)`` is a multiple of 4 (K = 45, 93, 157 here).
"""

import pytest
import torch

pytest.importorskip("triton")

from tests.device import on_device  # noqa: E402
from tests.runtime import oracle  # noqa: E402
from tribuild.runtime import autotune  # noqa: E402
from tribuild.runtime.autotune import config  # noqa: E402
from tribuild.runtime.launch import force_backend, quantize_activations, ternary_linear  # noqa: E402
from tribuild.runtime.packing import pack  # noqa: E402


def decode(n: int = 8, w: int = 1, split: int = 1) -> autotune.KernelConfig:
    return config(kernel="decode", BLOCK_N=n, BLOCK_W=w, SPLIT_K=split)


# (id, rows, N, K, dtype, scale mode, bias, act, residual, quantize, config)
CASES = [
    ("1-row-plain", 1, 19, 45, torch.float32, "tensor", False, "none", False, False, decode()),
    (
        "1-row-split",
        1,
        19,
        45,
        torch.float32,
        "channel",
        True,
        "relu",
        False,
        False,
        decode(8, 1, 4),
    ),
    (
        "3-rows-fp16-all",
        3,
        21,
        93,
        torch.float16,
        "channel",
        True,
        "silu",
        True,
        False,
        decode(8, 2, 3),
    ),
    (
        "16-rows-gelu",
        16,
        7,
        157,
        torch.float32,
        "tensor",
        True,
        "gelu",
        False,
        False,
        decode(4, 2, 2),
    ),
    (
        "1-row-quantize",
        1,
        33,
        157,
        torch.float32,
        "channel",
        False,
        "none",
        True,
        True,
        decode(16, 1, 1),
    ),
    (
        "3-rows-quantize-split",
        3,
        19,
        93,
        torch.float32,
        "tensor",
        True,
        "relu6",
        False,
        True,
        decode(8, 1, 5),
    ),
    (
        "16-rows-fp16-quantize",
        16,
        21,
        45,
        torch.float16,
        "channel",
        True,
        "sigmoid",
        True,
        True,
        decode(16, 1, 2),
    ),
]


def layer(m, n, k, dtype, scale, bias, residual, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(dtype)
    codes = torch.randint(-1, 2, (n, k), generator=gen)
    g = torch.rand(n if scale == "channel" else 1, generator=gen) + 0.5
    b = torch.randn(n, generator=gen) if bias else None
    r = torch.randn(m, n, generator=gen).to(dtype) if residual else None
    return x, codes, g, b, r


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_decode_kernel_matches_oracle(case):
    _, m, n, k, dtype, scale, bias, act, residual, quantize, cfg = case
    x, codes, g, b, r = layer(m, n, k, dtype, scale, bias, residual)
    args = on_device(x, pack(codes), g, b)
    with force_backend("triton"):
        out = ternary_linear(*args, act, on_device(r), configs=(cfg,), quantize=quantize)
        again = ternary_linear(*args, act, on_device(r), configs=(cfg,), quantize=quantize)
    assert out.shape == (m, n) and out.dtype == dtype
    ref = oracle.linear(oracle.quantized(x) if quantize else x, codes, g, b, act, r)
    oracle.assert_matches(out, ref)
    # the split-K partials are summed in split order, whichever program finishes last
    assert torch.equal(out, again)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("m", [1, 3, 16])
def test_quantize_matches_quantize_then_linear(m, dtype):
    """``quantize=True`` on each path (the default kernels' two launches, the fused decode
    kernel, the torch backend) is ``quantize_activations`` followed by the product. The two
    launches and the torch path round the quantized activations to ``x``'s dtype, as
    ``quantize_activations`` returns them; the fused kernel keeps them exact (``q / s``, with
    ``s`` applied to the sum), which in float16 differs by more than an output rounding."""
    x, codes, g, b, _ = layer(m, 11, 61, dtype, "channel", True, False, seed=m)
    args = on_device(x, pack(codes), g, b)
    with force_backend("triton"):
        two = ternary_linear(*args, "relu", quantize=True)
        fused = ternary_linear(*args, "relu", quantize=True, configs=(decode(4, 1, 2),))
        separate = ternary_linear(quantize_activations(args[0]), *args[1:], "relu")
    with force_backend("torch"):
        torch_path = ternary_linear(*args, "relu", quantize=True)
    rounded = oracle.linear(oracle.quantized(x).to(dtype), codes, g, b, "relu")
    for out in (two, torch_path):
        oracle.assert_matches(out, rounded)
    oracle.assert_matches(fused, oracle.linear(oracle.quantized(x), codes, g, b, "relu"))
    assert torch.equal(two, separate)


def test_decode_configs_join_the_tuned_gemv_and_small_gemm_sets():
    for family in ("gemv", "gemm_small"):
        assert [c for c in autotune.configs(family) if c.kernel] == []
        tuned = autotune.configs(family, tuned=True)
        assert set(autotune.CONFIG_SETS["decode"][1]) <= set(tuned)
    assert "decode" not in {c.kernel for c in autotune.configs("gemm", tuned=True)}


def test_tuning_at_o3_runs_and_keeps_a_choice_that_fits():
    """-O3 times every candidate (GEMV and decode) on this device and launches the winner; the
    result fits the oracle whichever wins. Packed rows of 3 bytes (K = 10) leave the decode
    kernel out, so the GEMV's own configs alone are timed there."""
    for k in (64, 10):
        x, codes, g, b, _ = layer(2, 9, k, torch.float32, "tensor", True, False, seed=k)
        with force_backend("triton"):
            out = ternary_linear(*on_device(x, pack(codes), g, b), tuned=True)
        oracle.assert_matches(out, oracle.linear(x, codes, g, b))


def test_decode_config_that_cannot_run_here_is_a_clear_error():
    x, codes, g, _, _ = layer(1, 5, 10, torch.float32, "tensor", False, False)  # 3-byte rows
    with force_backend("triton"), pytest.raises(ValueError, match="multiple of 4 bytes"):
        ternary_linear(*on_device(x, pack(codes), g), configs=(decode(),))
