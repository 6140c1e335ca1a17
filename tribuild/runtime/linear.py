"""Ternary linear layers as generated modules call them: ``act(scale · (x @ codesᵀ) + bias +
residual)``, on the backend ``backends.backend_for`` picks.

Terms:
- *packed*: the uint8 ``[N, ceil(K/4)]`` weight of ``tribuild.runtime.packing``; *scale* its
  float32 ``[1]`` or ``[N]`` scale; the epilogue is ``act(scale · acc + bias + residual)``.
- *family*: the Triton kernel by the rows of ``x``: the GEMV up to ``GEMV_MAX_ROWS`` (memory
  bound decoding), the GEMM on 16-row tiles (``gemm_small``) up to ``SMALL_GEMM_MAX_ROWS``,
  the GEMM beyond.
- *variants* beside the family's own kernel (``prepared``): for at most 16 rows with packed
  rows of a multiple of 4 bytes also ``decode`` (``kernels.ternary_decode``, split-K; its
  configs join the GEMV's and the small GEMM's when tuned only, so the autotuner's timing
  decides whether it runs); for more rows that quantize their input, ``int8``
  (``kernels.ternary_gemm_int8``: ``act_quant_int8_kernel``, then int8 ``tl.dot``; its
  configs join the GEMM's when tuned).
- *quantize*: ``ternary_linear(..., quantize=True)`` is BitLinear,
  ``quantize_activations(x)`` then the product: the decode kernel does both in one launch
  (keeping ``q / s`` exact, where ``quantize_activations`` rounds it to ``x``'s dtype), the
  int8 GEMM keeps ``q`` and ``s`` apart too; the other kernels run ``act_quant`` first.
- *cpu backend*: a call site's prepared native launch is looked up before any check
  (``native.prepared``); a call the native kernels do not take runs as on ``torch``.
- *operators*: on the Triton backend, a call made while ``torch.compile`` or ``torch.export``
  traces is the operator ``tribuild::ternary_linear`` (``tribuild.runtime.ops``), whose
  implementation is the eager launch; the torch backend's arithmetic is traced as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from tribuild.runtime import autotune, ops
from tribuild.runtime.autotune import KernelConfig
from tribuild.runtime.backends import backend_for, native_chosen, native_takes
from tribuild.runtime.dense import unpacked_codes
from tribuild.runtime.epilogue import activation_name, apply_epilogue
from tribuild.runtime.packing import packed_cols
from tribuild.runtime.prepared import (
    Args,
    Variant,
    cdiv,
    check_epilogue,
    epilogue_flags,
    epilogue_ptrs,
    epilogue_site,
    m_bucket,
    prepared,
    tile_grid,
)
from tribuild.runtime.quantize import quantize_kernel
from tribuild.runtime.ternarize import quantize_activations as quantize_activations_torch

GEMV_MAX_ROWS = 4  # up to this many rows (memory-bound decoding) the GEMV kernel runs, not the GEMM
SMALL_GEMM_MAX_ROWS = 16  # up to this many the GEMM runs 16-row tiles (family gemm_small)


def ternary_linear(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    act: str | None = None,
    residual: torch.Tensor | None = None,
    *,
    tuned: bool = False,
    configs: Sequence[KernelConfig] | None = None,
    quantize: bool = False,
    opt_level: int | None = None,
) -> torch.Tensor:
    """``act(scale · (x @ codesᵀ) + bias + residual)`` for ``x [..., K]``: shape ``[..., N]``;
    with ``quantize``, ``x`` first goes through :func:`quantize_activations` (BitLinear), which
    the decode kernel fuses. On the Triton backend a traced call is the operator
    ``tribuild::ternary_linear`` (``configs``, for tests and tuning, is not: it is eager only).
    ``opt_level``: the old kernel files' ``tuned`` (``autotune.tuned_at``)."""
    if opt_level is not None:
        tuned = autotune.tuned_at(opt_level)
    site = None
    if native_chosen():
        from tribuild.runtime import native  # loaded already: the backend is chosen

        quantize = quantize or native.quantized(x)  # -O2's quantization, as -O3's fusion
        if not torch.compiler.is_compiling():
            site = native.site_key(x, packed, scale, bias, act, residual, quantize)
            if (launch := native.prepared(site, packed)) is not None:
                return launch(x, scale, bias, residual)
    act = activation_name(act)
    n, k = packed.shape[0], x.shape[-1]
    if packed.shape[1] != packed_cols(k):
        raise ValueError(f"packed weight {tuple(packed.shape)} does not fit K={k}")
    check_epilogue(scale, bias, residual, n, (*x.shape[:-1], n))
    backend = backend_for(x)
    if backend == "cpu" and native_takes(x, packed, bias, residual, quantize):
        from tribuild.runtime import native

        if torch.compiler.is_compiling():
            return native.CPU_TERNARY_LINEAR(x, packed, scale, bias, residual, act, quantize)
        return native.linear(x, packed, scale, bias, residual, act, site, quantize)
    if backend != "triton":
        if quantize:
            x = quantize_activations_torch(x)
        acc = x.float() @ unpacked_codes(packed, (n, k)).T
        return apply_epilogue(acc, scale, bias, act, residual, -1).to(x.dtype)
    if configs is None and torch.compiler.is_compiling():
        return TERNARY_LINEAR(x, packed, scale, bias, residual, act, tuned, quantize)
    return _linear_kernel(x, packed, scale, bias, residual, act, tuned, quantize, configs)


def _decode_arguments(args: Args, meta: dict[str, int]) -> Args:
    """The decode kernel's arguments from the linear call's: the packed rows as int32 words,
    and its split-K scratch (partial tiles, zeroed tile counters) when it splits K."""
    x2, packed, scale, bias, residual, out, m, n, k, row_bytes = args
    split = meta["SPLIT_K"]
    if split == 1:
        partial = count = out  # unused: the kernel's split-K finish is compiled out
    else:
        partial = torch.empty((split, m, n), dtype=torch.float32, device=out.device)
        tiles = cdiv(n, meta["BLOCK_N"]) * cdiv(m, m_bucket(m))
        count = torch.zeros(tiles, dtype=torch.int32, device=out.device)
    words = packed.view(torch.int32)
    return (x2, words, scale, bias, residual, out, m, n, k, row_bytes // 4, partial, count)


def _int8_arguments(args: Args, meta: dict[str, int]) -> Args:
    """The int8 GEMM's arguments from the linear call's: ``x`` quantized to int8 rows and their
    float32 scales (``act_quant_int8_kernel``, at ``act_quant``'s default config), which it
    takes in place of ``x`` and after the shared arguments."""
    from tribuild.runtime.kernels.triton.act_quant import act_quant_int8_kernel

    x2, m, k = args[0], args[6], args[8]
    q = torch.empty((m, k), dtype=torch.int8, device=x2.device)
    s = torch.empty(m, dtype=torch.float32, device=x2.device)
    act_quant_int8_kernel[(m,)](x2, q, s, k, **autotune.configs("act_quant")[0].launch_kwargs())
    return (q, *args[1:], s)


def _linear_kernel(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    act: str,
    tuned: bool,
    quantize: bool = False,
    configs: Sequence[KernelConfig] | None = None,
) -> torch.Tensor:
    """``ternary_linear`` on the Triton backend, arguments checked."""
    n, k = packed.shape[0], x.shape[-1]
    flat = x.dim() == 2  # [M, K] already: no reshapes (a small layer's call notices them)
    x2 = x.contiguous() if flat else x.reshape(-1, k).contiguous()
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    args = (x2, packed, scale, *epilogue_ptrs(out, bias, residual), out, m, n, k, packed.shape[1])
    if m <= GEMV_MAX_ROWS:
        family = "gemv"
    else:
        family = "gemm_small" if m <= SMALL_GEMM_MAX_ROWS else "gemm"
    site = (
        family,
        m,
        n,
        k,
        x.dtype,
        x.device,
        tuned,
        quantize,
        *epilogue_site(scale, bias, act, residual),
    )

    def prepare() -> tuple[dict[str, Variant], str]:
        flags = epilogue_flags(scale, bias, act, residual)
        shape_key = f"{x.dtype}|M~{m_bucket(m)},N={n},K={k}" + ("|quantize" if quantize else "")
        quantized: Callable[[Args, dict[str, int]], Args] | None = None
        if quantize:  # the family's own kernel on the quantized input: two launches
            quantize_kernel(x2, tuned)  # its config chosen now, not while the product is timed
            quantized = lambda args, meta: (quantize_kernel(args[0], tuned), *args[1:])  # noqa: E731
        if family == "gemv":
            from tribuild.runtime.kernels.triton.ternary_gemv import ternary_gemv_kernel

            own = Variant(
                ternary_gemv_kernel, lambda meta: (m, cdiv(n, meta["BLOCK_N"])), flags, quantized
            )
        else:
            from tribuild.runtime.kernels.triton.ternary_gemm import ternary_gemm_kernel

            own = Variant(ternary_gemm_kernel, tile_grid(m, n), flags, quantized)
        variants = {"": own}
        if quantize and family == "gemm":
            from tribuild.runtime.kernels.triton.ternary_gemm_int8 import ternary_gemm_int8_kernel

            variants["int8"] = Variant(
                ternary_gemm_int8_kernel, tile_grid(m, n), flags, _int8_arguments
            )
        if (
            m <= SMALL_GEMM_MAX_ROWS
            and packed.shape[1] % 4 == 0
            and packed.is_contiguous()
            and packed.storage_offset() % 4 == 0  # viewed as int32 words
        ):
            from tribuild.runtime.kernels.triton.ternary_decode import ternary_decode_kernel

            block_m = m_bucket(m)
            variants["decode"] = Variant(
                ternary_decode_kernel,
                lambda meta: (cdiv(n, meta["BLOCK_N"]), cdiv(m, block_m), meta["SPLIT_K"]),
                {**flags, "BLOCK_M": block_m, "QUANTIZE": quantize},
                _decode_arguments,
            )
        return variants, shape_key

    prepared(site, family, tuned, configs, prepare, args, x.device)(args)
    return out if flat else out.reshape(*x.shape[:-1], n)


def linear_shape(x: torch.Tensor, packed: torch.Tensor) -> list[int]:
    """The shape of a ternary linear layer's output: ``x``'s with ``N`` rows of ``packed`` last."""
    return [*x.shape[:-1], packed.shape[0]]


TERNARY_LINEAR = ops.define(
    "ternary_linear(Tensor x, Tensor packed, Tensor scale, Tensor? bias, Tensor? residual, "
    "str act, bool tuned, bool quantize=False) -> Tensor",
    _linear_kernel,
    lambda x, packed, *_: x.new_empty(linear_shape(x, packed)),
)
