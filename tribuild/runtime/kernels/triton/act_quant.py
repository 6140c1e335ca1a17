"""Per-token int8 absmax activation quantization: one row (token) of ``x[M, K]`` per program.

Pass 1 finds ``max(|x|)`` over the row in ``BLOCK_K`` steps; pass 2 writes
``clamp(round(x · s), -128, 127) / s`` with ``s = 127 / max(max(|x|), 1e-5)``, in float32,
cast to the output's dtype. ``round`` is half-to-even and the divisions are correctly
rounded (``div_rn``), so the result equals ``tribuild.runtime.ternarize.quantize_activations``.
``act_quant_int8_kernel`` writes the integers ``q`` (int8) and ``s`` (float32, one per row)
instead, for the int8 GEMM (``ternary_gemm_int8``).
"""

import triton
import triton.language as tl


@triton.jit
def round_half_even(v):
    """``v`` rounded to the nearest integer, ties to even (as ``torch.round``)."""
    r = tl.floor(v)
    f = v - r  # exact: no rounding error, unlike floor(v + 0.5)
    up = (f > 0.5) | ((f == 0.5) & ((r - 2.0 * tl.floor(r * 0.5)) == 1.0))
    return tl.where(up, r + 1.0, r)


@triton.jit
def row_scale(x_ptr, base, K, BLOCK_K: tl.constexpr):
    """``127 / max(max|x|, 1e-5)`` of the row of ``K`` values at ``x_ptr + base``."""
    amax = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs = k0 + tl.arange(0, BLOCK_K)
        v = tl.load(x_ptr + base + offs, mask=offs < K, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(v))
    return tl.math.div_rn(127.0, tl.maximum(tl.max(amax, axis=0), 1e-5))


@triton.jit
def act_quant_kernel(x_ptr, out_ptr, K, BLOCK_K: tl.constexpr):
    base = tl.program_id(0) * K
    s = row_scale(x_ptr, base, K, BLOCK_K)
    for k0 in range(0, K, BLOCK_K):
        offs = k0 + tl.arange(0, BLOCK_K)
        v = tl.load(x_ptr + base + offs, mask=offs < K, other=0.0).to(tl.float32)
        q = tl.minimum(tl.maximum(round_half_even(v * s), -128.0), 127.0)
        tl.store(
            out_ptr + base + offs, tl.math.div_rn(q, s).to(out_ptr.dtype.element_ty), mask=offs < K
        )


@triton.jit
def act_quant_int8_kernel(x_ptr, q_ptr, s_ptr, K, BLOCK_K: tl.constexpr):
    row = tl.program_id(0)
    base = row * K
    s = row_scale(x_ptr, base, K, BLOCK_K)
    tl.store(s_ptr + row, s)
    for k0 in range(0, K, BLOCK_K):
        offs = k0 + tl.arange(0, BLOCK_K)
        v = tl.load(x_ptr + base + offs, mask=offs < K, other=0.0).to(tl.float32)
        q = tl.minimum(tl.maximum(round_half_even(v * s), -128.0), 127.0)
        tl.store(q_ptr + base + offs, q.to(tl.int8), mask=offs < K)
