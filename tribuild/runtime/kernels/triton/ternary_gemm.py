"""Ternary GEMM: ``out[M, N] = epilogue(x[M, K] @ codes[N, K]ᵀ)`` with 2-bit packed codes.

Each program computes one ``[BLOCK_M, BLOCK_N]`` tile, walking K in steps of ``BLOCK_K``
(every block at least 16, a multiple of 4 for ``BLOCK_K``), decoding the weight tile to
``x``'s dtype (exact for -1, 0, 1) and accumulating ``tl.dot`` in float32 (IEEE float32,
no TF32, for float32 inputs). ``x``, ``out`` and the residual are contiguous row-major.
"""

import triton
import triton.language as tl

from tribuild.runtime.kernels.triton.common import load_codes, store_epilogue


@triton.jit
def ternary_gemm_kernel(
    x_ptr,
    w_ptr,
    scale_ptr,
    bias_ptr,
    res_ptr,
    out_ptr,
    M,
    N,
    K,
    row_bytes,
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
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(
            x_ptr + offs_m[:, None] * K + offs_k[None, :],
            mask=m_mask[:, None] & (offs_k[None, :] < K),
            other=0.0,
        )
        w = load_codes(w_ptr, offs_k, offs_n, n_mask, row_bytes, K).to(x.dtype)
        acc = tl.dot(x, w, acc, input_precision="ieee")
    store_epilogue(
        acc,
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
