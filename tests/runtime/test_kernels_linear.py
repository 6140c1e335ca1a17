"""The GEMV and GEMM kernels, under TRITON_INTERPRET=1 (or on CUDA), against the float64 oracle.

Cases are small and blocks big (the interpreter costs milliseconds per program and loop
step); odd M, N, K exercise every mask, and each case names the epilogue it covers. Block
sizes below a dimension force several programs and K steps.
"""

import pytest
import torch

pytest.importorskip("triton")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.device import on_device  # noqa: E402
from tests.runtime import oracle  # noqa: E402
from tribuild.runtime.autotune import config  # noqa: E402
from tribuild.runtime.launch import force_backend, ternary_linear  # noqa: E402
from tribuild.runtime.packing import pack  # noqa: E402

GEMV = config(BLOCK_N=16, BLOCK_K=16)
GEMM = config(BLOCK_M=16, BLOCK_N=16, BLOCK_K=32)

# (id, batch shape of x, N, K, dtype, scale mode, bias, act, residual, config)
CASES = [
    ("gemv-plain", (1,), 19, 45, torch.float32, "tensor", False, "none", False, GEMV),
    ("gemv-fp16-all", (3,), 21, 13, torch.float16, "channel", True, "relu", True, GEMV),
    ("gemv-silu", (2,), 8, 70, torch.float32, "tensor", True, "silu", False, GEMV),
    ("gemm-gelu", (37,), 33, 50, torch.float32, "channel", True, "gelu", False, GEMM),
    ("gemm-fp16-residual", (5,), 17, 9, torch.float16, "tensor", False, "none", True, GEMM),
    ("gemm-4d-relu6", (2, 3, 3), 18, 36, torch.float32, "tensor", True, "relu6", True, GEMM),
    ("gemm-fp16-sigmoid", (20,), 7, 66, torch.float16, "channel", True, "sigmoid", False, GEMM),
]


def layer(batch, n, k, dtype, scale, bias, residual, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*batch, k, generator=gen).to(dtype)
    codes = torch.randint(-1, 2, (n, k), generator=gen)
    g = torch.rand(n if scale == "channel" else 1, generator=gen) + 0.5
    b = torch.randn(n, generator=gen) if bias else None
    r = torch.randn(*batch, n, generator=gen).to(dtype) if residual else None
    return x, codes, g, b, r


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kernel_matches_oracle_and_fallback(case):
    _, batch, n, k, dtype, scale, bias, act, residual, cfg = case
    x, codes, g, b, r = layer(batch, n, k, dtype, scale, bias, residual)
    args = on_device(x, pack(codes), g, b)
    with force_backend("triton"):
        out = ternary_linear(*args, act, on_device(r), configs=(cfg,))
    with force_backend("torch"):
        fallback = ternary_linear(*args, act, on_device(r))
    assert out.shape == (*batch, n) and out.dtype == dtype
    ref = oracle.linear(x, codes, g, b, act, r)
    oracle.assert_matches(out, ref)
    oracle.assert_matches(fallback, ref)
    oracle.assert_matches(out, fallback.double())


@settings(max_examples=12, deadline=None)
@given(
    st.integers(1, 24), st.integers(1, 24), st.integers(1, 40), st.sampled_from(["none", "relu"])
)
def test_any_shape_matches_oracle(m, n, k, act):
    x, codes, g, b, _ = layer((m,), n, k, torch.float32, "channel", True, False, seed=m * n * k)
    with force_backend("triton"):
        out = ternary_linear(
            *on_device(x, pack(codes), g, b), act, configs=(GEMV if m <= 4 else GEMM,)
        )
    oracle.assert_matches(out, oracle.linear(x, codes, g, b, act))


def test_default_configs_run():
    x, codes, g, _, _ = layer((6,), 10, 20, torch.float32, "tensor", False, False)
    with force_backend("triton"):
        out = ternary_linear(*on_device(x, pack(codes), g))
    oracle.assert_matches(out, oracle.linear(x, codes, g))
