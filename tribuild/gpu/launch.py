"""The functions generated modules call: ternary linear, ternary conv2d, activation quantization.

Terms:
- *backend*: ``triton`` runs the kernels of ``tribuild.gpu.kernels``; ``torch`` runs the same
  arithmetic in PyTorch (float32 accumulation and epilogue, result in ``x``'s dtype). In
  ``auto`` mode (the default) CUDA tensors take ``triton``, as do CPU tensors when
  ``TRITON_INTERPRET=1`` (the interpreter); everything else takes ``torch``. The variable is
  read once, at the first choice for a CPU tensor (Triton, too, reads it once, when its kernels
  are defined): reading the environment costs more than a small layer's Python.
  :func:`force_backend` overrides the choice, for tests.
- *packed*: the uint8 ``[N, ceil(K/4)]`` weight of ``tribuild.gpu.packing``; *scale* its
  float32 ``[1]`` or ``[N]`` scale; the epilogue is ``act(scale · acc + bias + residual)``.
- *unpacked cache*: the torch backend decodes a packed weight once and keeps the float32
  codes while the packed tensor lives and is not modified (keyed by its identity and
  version counter).
- *opt_level* picks the config set of ``tribuild.gpu.autotune`` (tuned at -O3); ``configs``
  replaces it. Tuning keys bucket M (tokens or output pixels) to the next power of two.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import Iterator, Sequence

import torch
import torch.nn.functional as F

from tribuild.gpu import autotune
from tribuild.gpu.autotune import KernelConfig
from tribuild.gpu.epilogue import activation_name, apply_epilogue
from tribuild.gpu.packing import packed_cols, unpack
from tribuild.gpu.ternarize import quantize_activations as quantize_activations_torch

BACKENDS = ("auto", "triton", "torch")
GEMV_MAX_ROWS = 4  # up to this many rows (memory-bound decoding) the GEMV kernel runs, not the GEMM
SMALL_GEMM_MAX_ROWS = 16  # up to this many the GEMM runs 16-row tiles (family gemm_small)
_backend = "auto"
_cpu_backend: str | None = None  # auto mode's choice for CPU tensors, once TRITON_INTERPRET is read
_unpacked: dict[int, tuple[weakref.ref, int, tuple[int, ...], torch.Tensor]] = {}


@contextmanager
def force_backend(name: str) -> Iterator[None]:
    """Run the enclosed calls on backend ``name`` (``auto``, ``triton`` or ``torch``)."""
    global _backend
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {name!r}")
    previous, _backend = _backend, name
    try:
        yield
    finally:
        _backend = previous


def backend_for(x: torch.Tensor) -> str:
    """The backend a call on ``x`` takes now: ``triton`` or ``torch``."""
    global _cpu_backend
    if _backend != "auto":
        return _backend
    if x.is_cuda:
        return "triton"
    if _cpu_backend is None:
        _cpu_backend = "triton" if autotune.interpreted() else "torch"
    return _cpu_backend


def unpacked_codes(packed: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The float32 codes of ``packed`` as a weight of ``shape``, decoded once and cached."""
    key = id(packed)
    hit = _unpacked.get(key)
    if hit and hit[0]() is packed and hit[1] == packed._version and hit[2] == shape:
        return hit[3]

    def forget(ref: weakref.ref, key: int = key) -> None:
        if _unpacked.get(key, (None,))[0] is ref:
            del _unpacked[key]

    codes = unpack(packed, shape).float()
    _unpacked[key] = (weakref.ref(packed, forget), packed._version, shape, codes)
    return codes


def _check_epilogue(
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    n: int,
    out_shape: tuple[int, ...],
) -> None:
    """Raise ValueError unless the epilogue operands fit ``n`` channels and ``out_shape``."""
    if scale.dtype != torch.float32 or scale.numel() not in (1, n):
        raise ValueError(
            f"scale must be float32 with 1 or {n} elements, got {scale.dtype} {tuple(scale.shape)}"
        )
    if bias is not None and tuple(bias.shape) != (n,):
        raise ValueError(f"bias must have shape ({n},), got {tuple(bias.shape)}")
    if residual is not None and tuple(residual.shape) != out_shape:
        raise ValueError(
            f"residual must have the output's shape {out_shape}, got {tuple(residual.shape)}"
        )


def _launch(
    kernel,
    family: str,
    grid,
    args: tuple,
    flags: dict,
    shape_key: str,
    device: torch.device,
    opt_level: int,
    configs: Sequence[KernelConfig] | None,
) -> None:
    """Run ``kernel`` with the chosen config (tuned and cached when there are several)."""

    def run(cfg: KernelConfig) -> None:
        kernel[grid(dict(cfg.meta))](*args, **flags, **cfg.launch_kwargs())

    flag_key = ",".join(f"{k}={v}" for k, v in sorted(flags.items()))
    key = f"{family}[{flag_key}]|{shape_key}"
    run(autotune.choose(key, tuple(configs or autotune.configs(family, opt_level)), run, device))


def _epilogue_args(
    out: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    act: str,
    residual: torch.Tensor | None,
) -> tuple[tuple, dict]:
    """The kernels' ``scale, bias, residual`` pointers (``out`` stands in for absent ones) and
    flags."""
    ptrs = (
        scale,
        out if bias is None else bias,
        out if residual is None else residual.contiguous(),
    )
    flags = {
        "CHANNEL_SCALE": scale.numel() > 1,
        "HAS_BIAS": bias is not None,
        "ACT": act,
        "HAS_RESIDUAL": residual is not None,
    }
    return ptrs, flags


def _m_bucket(m: int) -> int:
    return 1 << max(m - 1, 0).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tile_grid(m: int, n: int, *rest: int):
    """The grid of ``[BLOCK_M, BLOCK_N]`` tiles over an ``m × n`` output, then ``rest`` axes."""
    return lambda meta: (_cdiv(m, meta["BLOCK_M"]), _cdiv(n, meta["BLOCK_N"]), *rest)


def ternary_linear(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    act: str | None = None,
    residual: torch.Tensor | None = None,
    *,
    opt_level: int = 2,
    configs: Sequence[KernelConfig] | None = None,
) -> torch.Tensor:
    """``act(scale · (x @ codesᵀ) + bias + residual)`` for ``x [..., K]``: shape ``[..., N]``."""
    act = activation_name(act)
    n, k = packed.shape[0], x.shape[-1]
    if packed.shape[1] != packed_cols(k):
        raise ValueError(f"packed weight {tuple(packed.shape)} does not fit K={k}")
    _check_epilogue(scale, bias, residual, n, (*x.shape[:-1], n))
    if backend_for(x) == "torch":
        acc = x.float() @ unpacked_codes(packed, (n, k)).T
        return apply_epilogue(acc, scale, bias, act, residual, -1).to(x.dtype)
    from tribuild.gpu.kernels.ternary_gemm import ternary_gemm_kernel
    from tribuild.gpu.kernels.ternary_gemv import ternary_gemv_kernel

    x2 = x.reshape(-1, k).contiguous()
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    ptrs, flags = _epilogue_args(out, scale, bias, act, residual)
    args = (x2, packed, *ptrs, out, m, n, k, packed.shape[1])
    if m <= GEMV_MAX_ROWS:
        kernel, family, grid = (
            ternary_gemv_kernel,
            "gemv",
            lambda meta: (m, _cdiv(n, meta["BLOCK_N"])),
        )
    else:
        family = "gemm_small" if m <= SMALL_GEMM_MAX_ROWS else "gemm"
        kernel, grid = ternary_gemm_kernel, _tile_grid(m, n)
    shape_key = f"{x.dtype}|M~{_m_bucket(m)},N={n},K={k}"
    _launch(kernel, family, grid, args, flags, shape_key, x.device, opt_level, configs)
    return out.reshape(*x.shape[:-1], n)


def dense_conv2d(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    stride: int | tuple[int, int],
    padding: int | tuple[int, int],
    groups: int,
) -> torch.Tensor:
    """``F.conv2d(x, w, bias, stride, padding, 1, groups)`` on the torch backend. A window that
    covers the whole input (ungrouped, unpadded: one output position) runs as the matrix product
    it is, which PyTorch's CPU convolution computes several times slower."""
    if groups == 1 and padding in (0, (0, 0)) and x.size(3) == w.size(3) and x.size(2) == w.size(2):
        b, n = x.size(0), w.size(0)
        return F.linear(x.reshape(b, -1), w.reshape(n, -1), bias).reshape(b, n, 1, 1)
    return F.conv2d(x, w, bias, stride, padding, 1, groups)


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def ternary_conv2d(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    kernel_size: int | tuple[int, int],
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    groups: int = 1,
    act: str | None = None,
    residual: torch.Tensor | None = None,
    opt_level: int = 2,
    configs: Sequence[KernelConfig] | None = None,
) -> torch.Tensor:
    """The fused ternary convolution of NCHW ``x``: shape ``[B, N, OH, OW]``.

    ``groups == C > 1`` runs the depthwise kernel, any other ``groups`` the implicit GEMM.
    """
    act = activation_name(act)
    (kh, kw), (sh, sw), (ph, pw) = _pair(kernel_size), _pair(stride), _pair(padding)
    b, c, h, w = x.shape
    n = packed.shape[0]
    if c % groups or n % groups:
        raise ValueError(f"groups={groups} must divide the channels (in {c}, out {n})")
    shape = (n, c // groups, kh, kw)
    if packed.shape[1] != packed_cols(c // groups * kh * kw):
        raise ValueError(
            f"packed weight {tuple(packed.shape)} does not fit a weight of shape {shape}"
        )
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    _check_epilogue(scale, bias, residual, n, (b, n, oh, ow))
    if backend_for(x) == "torch":
        acc = dense_conv2d(
            x.float(), unpacked_codes(packed, shape), None, (sh, sw), (ph, pw), groups
        )
        return apply_epilogue(acc, scale, bias, act, residual, 1).to(x.dtype)
    x = x.contiguous()
    out = torch.empty((b, n, oh, ow), dtype=x.dtype, device=x.device)
    ptrs, flags = _epilogue_args(out, scale, bias, act, residual)
    m = b * oh * ow
    args = (x, packed, *ptrs, out, c, h, w, n, oh, ow, m, packed.shape[1], sh, sw, ph, pw)
    flags.update(KH=kh, KW=kw)
    if groups == c > 1:
        from tribuild.gpu.kernels.ternary_depthwise import ternary_depthwise_kernel as kernel

        family, grid = "depthwise", _tile_grid(m, n)
    else:
        from tribuild.gpu.kernels.ternary_conv2d import ternary_conv2d_kernel as kernel

        family, grid = "conv2d", _tile_grid(m, n // groups, groups)
    shape_key = (
        f"{x.dtype}|M~{_m_bucket(m)},C={c},H={h},W={w},N={n},G={groups},S={sh}x{sw},P={ph}x{pw}"
    )
    _launch(kernel, family, grid, args, flags, shape_key, x.device, opt_level, configs)
    return out


def quantize_activations(
    x: torch.Tensor, *, opt_level: int = 2, configs: Sequence[KernelConfig] | None = None
) -> torch.Tensor:
    """Per-token int8 absmax fake quantization (``tribuild.gpu.ternarize.quantize_activations``).
    While autograd records (training), the torch path runs on any device: the kernel has no
    backward, the torch path the straight-through estimator's."""
    if backend_for(x) == "torch" or (x.requires_grad and torch.is_grad_enabled()):
        return quantize_activations_torch(x)
    from tribuild.gpu.kernels.act_quant import act_quant_kernel

    k = x.shape[-1]
    x2 = x.reshape(-1, k).contiguous()
    out = torch.empty_like(x2)
    m = x2.shape[0]
    _launch(
        act_quant_kernel,
        "act_quant",
        lambda meta: (m,),
        (x2, out, k),
        {},
        f"{x.dtype}|K={k}",
        x.device,
        opt_level,
        configs,
    )
    return out.reshape(x.shape)
