"""The int8 GEMM of BitLinear's prefill (``kernels.ternary_gemm_int8``, after
``act_quant_int8_kernel``), under TRITON_INTERPRET=1 (or on CUDA), against the float64 oracle
of the quantized product. Configs are forced (``kernel="int8"``) with blocks below the shapes;
odd M, N, K exercise every mask."""

import pytest
import torch

pytest.importorskip("triton")

from tests.device import on_device  # noqa: E402
from tests.runtime import oracle  # noqa: E402
from tests.runtime.test_kernels_linear import layer  # noqa: E402
from tribuild.runtime import autotune  # noqa: E402
from tribuild.runtime.autotune import config  # noqa: E402
from tribuild.runtime.launch import force_backend, ternary_linear  # noqa: E402
from tribuild.runtime.packing import pack  # noqa: E402

INT8 = config(kernel="int8", BLOCK_M=16, BLOCK_N=16, BLOCK_K=32)

# (id, batch shape of x, N, K, dtype, scale mode, bias, act, residual)
CASES = [
    ("plain", (37,), 19, 45, torch.float32, "tensor", False, "none", False),
    ("fp16-all", (20,), 33, 70, torch.float16, "channel", True, "silu", True),
    ("3d-gelu", (2, 9), 17, 100, torch.float32, "channel", True, "gelu", False),
    ("fp16-residual", (17,), 7, 13, torch.float16, "tensor", False, "relu", True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_int8_gemm_matches_oracle(case):
    _, batch, n, k, dtype, scale, bias, act, residual = case
    x, codes, g, b, r = layer(batch, n, k, dtype, scale, bias, residual)
    with force_backend("triton"):
        out = ternary_linear(
            *on_device(x, pack(codes), g, b), act, on_device(r), configs=(INT8,), quantize=True
        )
    assert out.shape == (*batch, n) and out.dtype == dtype
    oracle.assert_matches(out, oracle.linear(oracle.quantized(x), codes, g, b, act, r))


def test_int8_configs_join_the_tuned_gemm_set_and_need_quantize():
    assert set(autotune.CONFIG_SETS["gemm_int8"][1]) <= set(autotune.configs("gemm", tuned=True))
    assert all(min(dict(c.meta).values()) >= 16 for c in autotune.CONFIG_SETS["gemm_int8"][1])
    x, codes, g, _, _ = layer((20,), 5, 12, torch.float32, "tensor", False, False)
    with force_backend("triton"), pytest.raises(ValueError, match="no config"):
        ternary_linear(*on_device(x, pack(codes), g), configs=(INT8,))  # no quantize: no int8


def test_tuning_at_o3_times_int8_beside_the_gemm():
    """-O3 times the GEMM's configs (``act_quant`` then the float GEMM) and the int8 GEMM's on
    this device and launches the winner; either fits the oracle."""
    x, codes, g, b, _ = layer((20,), 9, 40, torch.float32, "tensor", True, False)
    with force_backend("triton"):
        out = ternary_linear(*on_device(x, pack(codes), g, b), tuned=True, quantize=True)
    # the GEMM's own configs round the quantized activations to x's dtype (float32 here):
    # both results are within float32 tolerance of the exact quantized product
    oracle.assert_matches(out, oracle.linear(oracle.quantized(x), codes, g, b))
