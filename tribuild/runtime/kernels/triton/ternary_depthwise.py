"""Ternary depthwise 2-D convolution (groups == input channels) over NCHW input.

Terms: ``x`` is ``[B, C, H, W]``, the output ``[B, N, OH, OW]`` with ``N`` a multiple of
``C``; output channel ``n`` reads input channel ``n // (N / C)``. The packed weight has one
row per output channel of ``K = KH · KW`` taps. A program owns a ``[BLOCK_M, BLOCK_N]`` tile
of output pixels by channels and, tap by tap (unrolled), adds ``x · code`` elementwise in
float32: no reduction across channels, so no ``tl.dot``. Same epilogue as the GEMM kernels.
"""

import triton
import triton.language as tl

from tribuild.runtime.kernels.triton.common import decode, nchw_offsets, pixels, store_epilogue


@triton.jit
def ternary_depthwise_kernel(
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
    CHANNEL_SCALE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    n_mask = offs_n < N
    b, oh, ow = pixels(offs_m, OH, OW)
    planes = ((b * C)[:, None] + (offs_n // (N // C))[None, :]) * (H * W)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for t in tl.static_range(KH * KW):
        ih = oh * stride_h - pad_h + t // KW
        iw = ow * stride_w - pad_w + t % KW
        inside = m_mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        x = tl.load(
            x_ptr + planes + (ih * W + iw)[:, None],
            mask=inside[:, None] & n_mask[None, :],
            other=0.0,
        )
        byte = tl.load(w_ptr + offs_n * row_bytes + t // 4, mask=n_mask, other=0)
        acc += x.to(tl.float32) * decode(byte, (t % 4) * 2).to(tl.float32)[None, :]
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
