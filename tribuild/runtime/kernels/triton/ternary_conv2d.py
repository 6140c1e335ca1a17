"""Ternary 2-D convolution as an implicit GEMM over NCHW input, with the shared epilogue.

Terms: ``x`` is ``[B, C, H, W]``, the output ``[B, N, OH, OW]``; ``G`` groups (grid axis 2)
each map ``C / G`` input to ``N / G`` output channels. Per group the GEMM has rows
``M = B · OH · OW`` (output pixels), columns ``N / G`` and reduction ``K = C/G · KH · KW``
with ``k = (c · KH + i) · KW + j``, the packed layout of ``tribuild.runtime.packing``. The
``[BLOCK_M, BLOCK_K]`` input tile is gathered on the fly: pixel ``(oh, ow)`` and tap
``(i, j)`` read ``x[b, c, oh · stride_h - pad_h + i, ow · stride_w - pad_w + j]``, zero
outside the image. Accumulation is float32 ``tl.dot`` as in ``ternary_gemm``.
"""

import triton
import triton.language as tl

from tribuild.runtime.kernels.triton.common import load_codes, nchw_offsets, pixels, store_epilogue


@triton.jit
def ternary_conv2d_kernel(
    x_ptr,
    w_ptr,
    scale_ptr,
    bias_ptr,
    res_ptr,
    out_ptr,
    C,
    H,
    W,
    N,
    OH,
    OW,
    M,
    row_bytes,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    KH: tl.constexpr,
    KW: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    CHANNEL_SCALE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
):
    group = tl.program_id(2)
    group_c = C // tl.num_programs(2)
    group_n = N // tl.num_programs(2)
    K = group_c * KH * KW
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    local_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_n = group * group_n + local_n
    m_mask = offs_m < M
    n_mask = local_n < group_n
    b, oh, ow = pixels(offs_m, OH, OW)
    top = oh * stride_h - pad_h
    left = ow * stride_w - pad_w
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        c = group * group_c + offs_k // (KH * KW)
        ih = top[:, None] + (offs_k // KW % KH)[None, :]
        iw = left[:, None] + (offs_k % KW)[None, :]
        inside = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        x = tl.load(
            x_ptr + ((b * C)[:, None] + c[None, :]) * (H * W) + ih * W + iw,
            mask=m_mask[:, None] & (offs_k[None, :] < K) & inside,
            other=0.0,
        )
        w = load_codes(w_ptr, offs_k, offs_n, n_mask, row_bytes, K).to(x.dtype)
        acc = tl.dot(x, w, acc, input_precision="ieee")
    store_epilogue(
        acc,
        offs_n,
        n_mask,
        nchw_offsets(offs_m, offs_n, N, OH, OW),
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
