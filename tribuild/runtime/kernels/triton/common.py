"""Triton helpers shared by every ternary kernel: code decoding, NCHW indexing, the epilogue.

Terms:
- *code*: 2 bits of a packed byte, ``0b00 = 0``, ``0b01 = +1``, ``0b10 = -1``, decoded as
  ``(c & 1) - (c >> 1)`` (see ``tribuild.runtime.packing``); weight ``k`` of a row sits in byte
  ``k // 4`` at bit ``2 · (k % 4)``.
- *tile*: a ``[BLOCK_M, BLOCK_N]`` block of the output matrix, rows M (tokens, or output
  pixels ``b · OH · OW`` for a convolution) by columns N (output channels).
- *epilogue*: ``y = act(scale · acc + bias + residual)``, every term but ``acc`` optional and
  chosen by ``tl.constexpr`` flags; ``scale`` is one float32 (``CHANNEL_SCALE=False``) or
  one per output channel; ``ACT`` is one of ``none relu relu6 silu gelu sigmoid`` (gelu is
  the exact erf form). Accumulation and epilogue run in float32; the store casts to the
  output's dtype.
"""

import triton
import triton.language as tl


@triton.jit
def decode(byte, shift):
    """The ternary value (int32) of the 2-bit code at ``shift`` of ``byte``."""
    c = (byte.to(tl.int32) >> shift) & 3
    return (c & 1) - (c >> 1)


@triton.jit
def load_packed(w_ptr, k0, offs_n, n_mask, row_bytes, BLOCK_K: tl.constexpr):
    """The ``[BLOCK_N, BLOCK_K // 4]`` int32 tile of the packed bytes that hold weights
    ``k0 .. k0 + BLOCK_K - 1`` (``k0`` a multiple of 4) of rows ``offs_n``. Each byte is read
    once, along its row, so neighbouring threads read neighbouring bytes; bytes past the row
    read as 0, which decodes as zero codes, like the row's own padding."""
    offs_b = k0 // 4 + tl.arange(0, BLOCK_K // 4)
    mask = n_mask[:, None] & (offs_b < row_bytes)[None, :]
    return tl.load(w_ptr + offs_n[:, None] * row_bytes + offs_b[None, :], mask=mask, other=0).to(
        tl.int32
    )


@triton.jit
def load_codes(w_ptr, offs_k, offs_n, n_mask, row_bytes, K):
    """The decoded ``[BLOCK_K, BLOCK_N]`` tile of weights ``offs_k`` of packed rows ``offs_n``, laid
    out for ``tl.dot``; each byte is fetched once per code it holds (see ``load_packed``)."""
    mask = (offs_k[:, None] < K) & n_mask[None, :]
    byte = tl.load(w_ptr + offs_n[None, :] * row_bytes + (offs_k // 4)[:, None], mask=mask, other=0)
    return decode(byte, ((offs_k % 4) * 2)[:, None])


@triton.jit
def pixels(offs_m, OH, OW):
    """``(b, oh, ow)`` of the flat output-pixel indices ``offs_m = (b · OH + oh) · OW + ow``."""
    ow = offs_m % OW
    oh = (offs_m // OW) % OH
    return offs_m // (OW * OH), oh, ow


@triton.jit
def nchw_offsets(offs_m, offs_n, N, OH, OW):
    """Flat offsets of the ``[BLOCK_M, BLOCK_N]`` tile in an NCHW tensor of ``N`` channels."""
    hw = OH * OW
    return (offs_m // hw * (N * hw) + offs_m % hw)[:, None] + (offs_n * hw)[None, :]


@triton.jit
def activation(x, ACT: tl.constexpr):
    """``x`` through the activation named by ``ACT``."""
    if ACT == "relu":
        x = tl.maximum(x, 0.0)
    elif ACT == "relu6":
        x = tl.minimum(tl.maximum(x, 0.0), 6.0)
    elif ACT == "silu":
        x = x * tl.sigmoid(x)
    elif ACT == "gelu":
        x = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    elif ACT == "sigmoid":
        x = tl.sigmoid(x)
    else:
        tl.static_assert(ACT == "none", "unknown activation")
    return x


@triton.jit
def store_epilogue(
    acc,
    offs_n,
    n_mask,
    out_offs,
    out_mask,
    scale_ptr,
    bias_ptr,
    res_ptr,
    out_ptr,
    CHANNEL_SCALE: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    ACT: tl.constexpr,
    HAS_RESIDUAL: tl.constexpr,
):
    """Apply the epilogue to the float32 tile ``acc`` and store it at ``out_ptr + out_offs``."""
    if CHANNEL_SCALE:
        acc = acc * tl.load(scale_ptr + offs_n, mask=n_mask, other=0.0)[None, :]
    else:
        acc = acc * tl.load(scale_ptr)
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)[None, :]
    if HAS_RESIDUAL:
        acc = acc + tl.load(res_ptr + out_offs, mask=out_mask, other=0.0).to(tl.float32)
    acc = activation(acc, ACT)
    tl.store(out_ptr + out_offs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)
