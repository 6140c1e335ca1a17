"""Split-K ternary GEMV for decoding (1 to 16 rows), optionally quantizing its input:
``out[M, N] = epilogue(codes[N, K] @ x[M, K])``, ``x`` first through the per-token int8 absmax
quantization when ``QUANTIZE`` (BitLinear: ``act_quant`` and the product in one kernel).

Why: one token's product reads every packed byte once and does little else, so its speed is
the bytes kept in flight. The GEMV kernel's grid (one program per ``BLOCK_N`` channels of a
row) leaves most of a large GPU idle on a 4096-channel layer; here programs also split K.

Terms:
- *word*: 4 packed bytes read as one int32 (the packed rows viewed as int32, so ``row_words``
  is ``ceil(K/4) / 4`` and the launcher runs this kernel only when the row's bytes are a
  multiple of 4); code ``k`` of a row sits in word ``k // 16`` at bit ``2 · (k % 16)``.
- *program*: ``BLOCK_M`` rows (every row of a decoding step: ``BLOCK_M`` is M rounded up to a
  power of two, so each weight word is read once for all of them) × ``BLOCK_N`` channels ×
  one of ``SPLIT_K`` slices of the row's words, walked ``BLOCK_W`` words at a time.
- *split-K finish*: with ``SPLIT_K > 1`` each program stores its float32 partial tile into
  ``partial[split, M, N]`` and increments the tile's counter (``count``, zeroed by the
  launcher for each call); the program that increments it last sums the ``SPLIT_K`` partials
  in split order and applies the epilogue. The sum's order does not depend on which program
  finishes last, so results are the same from run to run (no float atomics).
- *quantization*: ``s = 127 / max(max|x_m|, 1e-5)`` per row and ``q = clamp(round(x · s),
  -128, 127)`` as in ``act_quant``; the product accumulates ``codes · q`` (integers, exact in
  float32 below 2^24) and divides by ``s`` once, before the epilogue. Each program reads its
  rows of ``x`` whole to find ``s`` (a few KB per row, from L2).
"""

import triton
import triton.language as tl

from tribuild.runtime.kernels.triton.act_quant import round_half_even
from tribuild.runtime.kernels.triton.common import store_epilogue


@triton.jit
def row_scales(x_ptr, offs_m, m_mask, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """``127 / max(max|x_m|, 1e-5)`` (float32, correctly rounded) of the rows ``offs_m``."""
    amax = tl.zeros((BLOCK_M, BLOCK_K), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        v = tl.load(
            x_ptr + offs_m[:, None] * K + offs_k[None, :],
            mask=m_mask[:, None] & (offs_k < K)[None, :],
            other=0.0,
        ).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(v))
    return tl.math.div_rn(127.0, tl.maximum(tl.max(amax, axis=1), 1e-5))


@triton.jit
def ternary_decode_kernel(
    x_ptr,
    w_ptr,
    scale_ptr,
    bias_ptr,
    res_ptr,
    out_ptr,
    M,
    N,
    K,
    row_words,
    partial_ptr,
    count_ptr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_W: tl.constexpr,
    SPLIT_K: tl.constexpr,
    QUANTIZE: tl.constexpr,
    CHANNEL_SCALE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    split = tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    n_mask = offs_n < N
    if QUANTIZE:
        s = row_scales(x_ptr, offs_m, m_mask, K, BLOCK_M, 16 * BLOCK_W)
    slice_words = tl.cdiv(tl.cdiv(row_words, SPLIT_K), BLOCK_W) * BLOCK_W
    start = split * slice_words
    end = tl.minimum(start + slice_words, row_words)
    acc = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_W), dtype=tl.float32)
    for w0 in range(start, end, BLOCK_W):
        offs_w = w0 + tl.arange(0, BLOCK_W)
        word = tl.load(
            w_ptr + offs_n[:, None] * row_words + offs_w[None, :],
            mask=n_mask[:, None] & (offs_w < end)[None, :],
            other=0,
        )
        for t in tl.static_range(16):
            offs_k = offs_w * 16 + t
            x = tl.load(
                x_ptr + offs_m[:, None] * K + offs_k[None, :],
                mask=m_mask[:, None] & (offs_k < K)[None, :],
                other=0.0,
            ).to(tl.float32)
            if QUANTIZE:
                x = tl.minimum(tl.maximum(round_half_even(x * s[:, None]), -128.0), 127.0)
            c = (word >> (2 * t)) & 3
            code = ((c & 1) - (c >> 1)).to(tl.float32)
            acc += x[:, None, :] * code[None, :, :]
    total = tl.sum(acc, axis=2)
    out_offs = offs_m[:, None] * N + offs_n[None, :]
    out_mask = m_mask[:, None] & n_mask[None, :]
    if SPLIT_K == 1:
        if QUANTIZE:
            total = tl.math.div_rn(total, s[:, None])
        store_epilogue(
            total,
            offs_n,
            n_mask,
            out_offs,
            out_mask,
            scale_ptr,
            bias_ptr,
            res_ptr,
            out_ptr,
            CHANNEL_SCALE,
            HAS_BIAS,
            ACT,
            HAS_RESIDUAL,
        )
    else:
        tl.store(partial_ptr + split * M * N + out_offs, total, mask=out_mask, cache_modifier=".wt")
        tl.debug_barrier()  # every thread's partial is written before the counter moves
        arrived = tl.atomic_add(count_ptr + pid_m * tl.num_programs(0) + pid_n, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for i in tl.static_range(SPLIT_K):
                total += tl.load(
                    partial_ptr + i * M * N + out_offs,
                    mask=out_mask,
                    other=0.0,
                    cache_modifier=".cg",
                )
            if QUANTIZE:
                total = tl.math.div_rn(total, s[:, None])
            store_epilogue(
                total,
                offs_n,
                n_mask,
                out_offs,
                out_mask,
                scale_ptr,
                bias_ptr,
                res_ptr,
                out_ptr,
                CHANNEL_SCALE,
                HAS_BIAS,
                ACT,
                HAS_RESIDUAL,
            )
