"""Zero-skip: ternary layers that leave out what their packed codes make zero.

Terms:
- *plan*: what a packed weight lets a kernel skip, found once per packed tensor (cached by
  identity and version, like the unpacked cache): the *kept* output channels (the others'
  codes are all zero) and, for a linear layer, the kept K blocks of ``BLOCK_K`` weights (the
  others are zero in every channel), with the weight compacted to what is kept.
- A skipped channel's output is its epilogue over a zero accumulator,
  ``act(bias + residual)``; a skipped K block contributes nothing, so ``x``'s matching
  columns are dropped before the product. Convolutions skip channels only.
"""
from __future__ import annotations

import weakref

import torch

from tribuild.gpu.epilogue import ACTIVATIONS, activation_name
from tribuild.gpu.launch import ternary_conv2d, ternary_linear
from tribuild.gpu.packing import CODES_PER_BYTE, zero_skip

BLOCK_K = 32
_plans: dict[int, tuple[weakref.ref, int, object]] = {}


def _plan(packed: torch.Tensor, k: int | None):
    """``(kept channels or None, kept x columns or None, compacted packed)``, cached."""
    hit = _plans.get(id(packed))
    if hit and hit[0]() is packed and hit[1] == packed._version:
        return hit[2]
    report = zero_skip(packed, BLOCK_K)
    channels = None
    if report.channels:
        dead = torch.zeros(packed.shape[0], dtype=torch.bool)
        dead[list(report.channels)] = True
        channels = torch.nonzero(~dead).flatten().to(packed.device)
    columns, compact = None, packed if channels is None else packed[channels].contiguous()
    if k is not None and report.k_blocks:
        per = BLOCK_K // CODES_PER_BYTE
        keep = torch.ones(packed.shape[1], dtype=torch.bool)
        for b in report.k_blocks:
            keep[b * per:(b + 1) * per] = False
        kept_bytes = torch.nonzero(keep).flatten()
        compact = compact[:, kept_bytes.to(packed.device)].contiguous()
        columns = (kept_bytes[:, None] * CODES_PER_BYTE + torch.arange(CODES_PER_BYTE)).flatten()
        columns = columns[columns < k].to(packed.device)
    plan = (channels, columns, compact)
    key = id(packed)

    def forget(ref: weakref.ref, key: int = key, plans: dict = _plans) -> None:
        if plans.get(key, (None,))[0] is ref:
            del plans[key]

    _plans[key] = (weakref.ref(packed, forget), packed._version, plan)
    return plan


def _scatter(kept_out: torch.Tensor, channels: torch.Tensor, n: int, bias: torch.Tensor | None, act: str, residual: torch.Tensor | None, dim: int) -> torch.Tensor:
    shape = list(kept_out.shape)
    shape[dim] = n
    zero = torch.zeros(shape, dtype=torch.float32, device=kept_out.device)
    view = [1] * len(shape)
    view[dim] = n
    if bias is not None:
        zero = zero + bias.float().reshape(view)
    if residual is not None:
        zero = zero + residual.float()
    out = ACTIVATIONS[act](zero).to(kept_out.dtype)
    out.index_copy_(dim, channels, kept_out)
    return out


def _pick(t: torch.Tensor | None, channels: torch.Tensor, dim: int) -> torch.Tensor | None:
    return None if t is None else t.index_select(dim, channels).contiguous()


def linear(x, packed, scale, bias=None, act=None, residual=None, **launch_kwargs):
    """``ternary_linear`` skipping zero channels and zero K blocks."""
    act = activation_name(act)
    channels, columns, compact = _plan(packed, x.shape[-1])
    if columns is not None:
        x = x.index_select(-1, columns).contiguous()
    if channels is None:
        return ternary_linear(x, compact, scale, bias, act, residual, **launch_kwargs)
    if channels.numel() == 0:
        kept = x.new_zeros((*x.shape[:-1], 0))
    else:
        kept = ternary_linear(x, compact, _pick(scale, channels, 0) if scale.numel() > 1 else scale,
                              _pick(bias, channels, 0), act, _pick(residual, channels, -1), **launch_kwargs)
    return _scatter(kept, channels, packed.shape[0], bias, act, residual, kept.dim() - 1)


def conv2d(x, packed, scale, bias=None, *, act=None, residual=None, groups=1, **launch_kwargs):
    """``ternary_conv2d`` skipping zero output channels (ungrouped convolutions only)."""
    act = activation_name(act)
    channels, _, compact = _plan(packed, None) if groups == 1 else (None, None, packed)
    if channels is None or channels.numel() == 0:  # nothing to skip, or nothing left to compute
        return ternary_conv2d(x, packed, scale, bias, act=act, residual=residual, groups=groups, **launch_kwargs)
    kept = ternary_conv2d(x, compact, _pick(scale, channels, 0) if scale.numel() > 1 else scale,
                          _pick(bias, channels, 0), act=act, residual=_pick(residual, channels, 1), groups=1,
                          **launch_kwargs)
    return _scatter(kept, channels, packed.shape[0], bias, act, residual, 1)
