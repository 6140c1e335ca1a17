"""Ternary GEMV: one row of ``x`` per program, ``out[m, N] = epilogue(codes[N, K] @ x[m, K])``.

For the memory-bound case of few rows (decoding a token at batch 1). Each program owns
``BLOCK_N`` output channels of row ``m``. Per step of ``BLOCK_K`` weights it reads the
``[BLOCK_N, BLOCK_K / 4]`` packed bytes along their rows, each byte once, and for each of a
byte's four codes ``t`` multiplies the decoded codes by ``x[4i + t]``, accumulating in a
float32 register tile that is reduced over K once at the end; no ``tl.dot``, so ``BLOCK_N``
may be small and the grid wide. Contiguous row-major ``x``, ``out``, residual.
"""

import triton
import triton.language as tl

from tribuild.runtime.kernels.triton.common import decode, load_packed, store_epilogue


@triton.jit
def ternary_gemv_kernel(
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
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    CHANNEL_SCALE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
):
    row = tl.program_id(0)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    acc = tl.zeros((BLOCK_N, BLOCK_K // 4), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        byte = load_packed(w_ptr, k0, offs_n, n_mask, row_bytes, BLOCK_K)
        offs_k = k0 + tl.arange(0, BLOCK_K // 4) * 4
        for t in tl.static_range(4):
            x = tl.load(x_ptr + row * K + offs_k + t, mask=offs_k + t < K, other=0.0).to(tl.float32)
            acc += decode(byte, 2 * t).to(tl.float32) * x[None, :]
    offs_m = row + tl.arange(0, 1)
    store_epilogue(
        tl.sum(acc, axis=1)[None, :],
        offs_n,
        n_mask,
        offs_m[:, None] * N + offs_n[None, :],
        (offs_m[:, None] < M) & n_mask[None, :],
        scale_ptr,
        bias_ptr,
        res_ptr,
        out_ptr,
        CHANNEL_SCALE,
        HAS_BIAS,
        ACT,
        HAS_RESIDUAL,
    )
