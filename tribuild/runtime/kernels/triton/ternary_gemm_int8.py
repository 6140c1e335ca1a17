"""Ternary GEMM on int8 activations (BitLinear's prefill): ``out[M, N] = epilogue((q[M, K] @
codes[N, K]ᵀ) / s)``, with ``q`` and the per-row ``s`` from ``act_quant_int8_kernel``.

Why: after the per-token quantization a BitLinear product is integers times {-1, 0, 1}, which
int8 tensor cores multiply at twice the float16 rate (Hopper), exactly, in int32. Each
program computes one ``[BLOCK_M, BLOCK_N]`` tile, walking K in ``BLOCK_K`` steps (blocks at
least 16; int8 ``tl.dot`` wants ``BLOCK_K`` of 32 or more on a GPU): the codes are decoded to
an int8 tile (``load_codes``), ``tl.dot`` accumulates in int32 (exact below 2^31, so for any
K under 2^24 / 127 the float32 conversion is exact too), and the accumulator is divided by
the row's ``s`` (correctly rounded) before the epilogue.
"""

import triton
import triton.language as tl

from tribuild.runtime.kernels.triton.common import load_codes, store_epilogue


@triton.jit
def ternary_gemm_int8_kernel(
    q_ptr,
    w_ptr,
    scale_ptr,
    bias_ptr,
    res_ptr,
    out_ptr,
    M,
    N,
    K,
    row_bytes,
    s_ptr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    CHANNEL_SCALE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    n_mask = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        q = tl.load(
            q_ptr + offs_m[:, None] * K + offs_k[None, :],
            mask=m_mask[:, None] & (offs_k[None, :] < K),
            other=0,
        )
        w = load_codes(w_ptr, offs_k, offs_n, n_mask, row_bytes, K).to(tl.int8)
        acc = tl.dot(q, w, acc, out_dtype=tl.int32)
    s = tl.load(s_ptr + offs_m, mask=m_mask, other=1.0)
    store_epilogue(
        tl.math.div_rn(acc.to(tl.float32), s[:, None]),
        offs_n,
        n_mask,
        offs_m[:, None] * N + offs_n[None, :],
        m_mask[:, None] & n_mask[None, :],
        scale_ptr,
        bias_ptr,
        res_ptr,
        out_ptr,
        CHANNEL_SCALE,
        HAS_BIAS,
        ACT,
        HAS_RESIDUAL,
    )
