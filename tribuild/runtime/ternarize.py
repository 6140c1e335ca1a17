"""BitNet b1.58 ternarization and per-token int8 activation quantization.

Terms:
- *codes*: a weight tensor's values in {-1, 0, +1}, stored as int8.
- *scale* (``g``): the float32 factor with ``W ≈ g · codes``. ``g = mean(|W|)`` clamped to at
  least ``EPS``; one value per tensor (``scale="tensor"``, shape ``[1]``) or one per output
  channel, the mean taken over every dim but the first (``scale="channel"``, shape ``[out]``).
- *STE*: the straight-through estimator for quantization-aware training: the forward pass
  uses the ternarized weight (or the quantized activations), the backward pass hands the
  gradient through unchanged.
- *per-token absmax*: for activations, ``s = 127 / max(|x|)`` over the last dim (the max
  clamped at ``EPS``), ``xq = clamp(round(x · s), -128, 127)``, result ``xq / s``.

Arithmetic runs in float32 whatever the input dtype; results come back in the input's dtype.
``round`` is round-half-to-even (``torch.round``); the Triton kernels use the same rule.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.function import FunctionCtx

EPS = 1e-5
SCALE_MODES = ("tensor", "channel")
_LEVELS = torch.tensor(127.0)  # the dividend of ``s``, as a tensor so that ``/`` divides


def ternary_scale(
    w: torch.Tensor, scale: str = "tensor", scratch: torch.Tensor | None = None
) -> torch.Tensor:
    """The float32 scale ``g = max(mean(|w|), EPS)``: shape ``[1]`` or ``[out]``. ``scratch``
    (uint8, at least ``w``'s float32 bytes) holds ``|w|`` instead of new memory: the same
    values in the same layout, so the same mean to the bit, without a fresh allocation's page
    faults for every weight of a checkpoint."""
    if scale not in SCALE_MODES:
        raise ValueError(f"scale must be one of {SCALE_MODES}, not {scale!r}")
    f32 = w.detach().float()
    if scratch is not None and scratch.numel() >= 4 * f32.numel() and not f32.is_cuda:
        a = torch.abs(f32, out=scratch[: 4 * f32.numel()].view(torch.float32).view(f32.shape))
    else:
        a = f32.abs()
    g = a.mean().reshape(1) if scale == "tensor" else a.reshape(a.shape[0], -1).mean(dim=1)
    return g.clamp_min(EPS)


def ternarize(w: torch.Tensor, scale: str = "tensor") -> tuple[torch.Tensor, torch.Tensor]:
    """``(codes, g)``: int8 codes of ``w``'s shape and the float32 scale of
    :func:`ternary_scale`."""
    g = ternary_scale(w, scale)
    # one new tensor, rounded and clamped in place (a checkpoint's load time is these passes)
    codes = w.detach().float().div(_per_row(g, w.dim())).round_().clamp_(-1, 1)
    return codes.to(torch.int8), g


def dequantize(codes: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """The float32 weight ``g · codes`` (``g`` broadcast along the output dim)."""
    return codes.float() * _per_row(g, codes.dim())


def _per_row(g: torch.Tensor, ndim: int) -> torch.Tensor:
    """``g`` shaped to broadcast along dim 0 of an ``ndim``-dim weight."""
    return g.reshape(-1, *([1] * (ndim - 1)))


class _TernarySTE(torch.autograd.Function):
    """Forward: ``g · codes`` in ``w``'s dtype. Backward: the gradient, unchanged."""

    @staticmethod
    def forward(ctx: FunctionCtx, w: torch.Tensor, scale: str) -> torch.Tensor:
        return dequantize(*ternarize(w, scale)).to(w.dtype)

    @staticmethod
    def backward(ctx: FunctionCtx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


# ``Function.apply`` as each function's forward takes it (torch leaves ``apply`` unannotated)
_ternary_ste: Callable[[torch.Tensor, str], torch.Tensor] = _TernarySTE.apply


def ternarize_ste(w: torch.Tensor, scale: str = "tensor") -> torch.Tensor:
    """The fake-quantized weight ``g · codes`` for quantization-aware training (STE gradient)."""
    return _ternary_ste(w, scale)


def nearest_trits(w: torch.Tensor) -> torch.Tensor:
    """Each value rounded to the nearest of -1, 0 and 1 (a trit tensor has no scale)."""
    return torch.clamp(torch.round(w), -1, 1)


def nearest_trits_ste(w: torch.Tensor) -> torch.Tensor:
    """``nearest_trits`` for quantization-aware training (STE gradient)."""
    return _straight_through(w, nearest_trits)


def _quantize_activations(x: torch.Tensor) -> torch.Tensor:
    xf = x if x.dtype == torch.float32 else x.float()  # no conversion calls on the common path
    amax = xf.abs().amax(dim=-1, keepdim=True).clamp_min(EPS)
    s = _LEVELS / amax  # a true division: ``127.0 / amax`` is 127 · (1 / amax)
    y = (xf * s).round_().clamp_(-128, 127).div_(s)  # in place: the same values, fewer allocations
    return y if y.dtype == x.dtype else y.to(x.dtype)


class _StraightThrough(torch.autograd.Function):
    """Forward: ``round_off(x)``, a rounding of ``x``. Backward: the gradient, unchanged (the
    straight-through estimator: rounding's own gradient is zero, which would stop training
    of everything before it)."""

    @staticmethod
    def forward(
        ctx: FunctionCtx, x: torch.Tensor, round_off: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        return round_off(x)

    @staticmethod
    def backward(ctx: FunctionCtx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


_straight_through: Callable[
    [torch.Tensor, Callable[[torch.Tensor], torch.Tensor]], torch.Tensor
] = _StraightThrough.apply


def quantize_activations(x: torch.Tensor) -> torch.Tensor:
    """Per-token int8 absmax fake quantization over the last dim, in ``x``'s dtype; while
    autograd records, its gradient is the straight-through estimator's."""
    if x.requires_grad and torch.is_grad_enabled():
        return _straight_through(x, _quantize_activations)
    return _quantize_activations(x)
