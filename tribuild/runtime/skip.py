"""Zero-skip: ternary layers that leave out what their packed codes make zero.

Terms:
- *plan*: what a packed weight lets a kernel skip, found once per packed tensor (cached by
  identity and version, like the unpacked cache): the *kept* output channels (the others'
  codes are all zero) and the kept K blocks of ``BLOCK_K`` weights (the others are zero in
  every channel), with the weight compacted to what is kept.
- A skipped channel's output is its epilogue over a zero accumulator,
  ``act(bias + residual)``; a skipped K block contributes nothing, so ``x``'s matching
  columns are dropped before the product.
- Convolutions: an ungrouped one with all-zero K blocks runs as the implicit GEMM made
  explicit, ``x``'s patches (``F.unfold``, column ``k = (c·kh + i)·kw + j``, the packed order)
  times the codes through ``linear``, so K blocks and channels are skipped as for a linear
  layer; otherwise, zero output channels are left out: ungrouped, by a convolution with the
  kept rows; grouped or depthwise, by one group per kept channel over the input channels of
  its group (for a depthwise convolution, exactly the kept channels' inputs).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from tribuild.runtime import ops
from tribuild.runtime.autotune import KernelConfig, tuned_at
from tribuild.runtime.backends import native_chosen
from tribuild.runtime.conv import conv2d_shape, ternary_conv2d
from tribuild.runtime.epilogue import ACTIVATIONS, activation_name
from tribuild.runtime.linear import linear_shape, ternary_linear
from tribuild.runtime.packing import CODES_PER_BYTE, zero_skip
from tribuild.runtime.quantize import quantize_activations
from tribuild.runtime.tensor_cache import TensorCache

BLOCK_K = 32
# (kept output channels or None, kept x columns or None, the compacted packed weight)
Plan = tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor]
_plans: TensorCache[int, Plan] = TensorCache()  # id(packed) -> its plan


def _plan(packed: torch.Tensor, k: int | None) -> Plan:
    """``(kept channels or None, kept x columns or None, compacted packed)``, cached."""
    hit = _plans.get(id(packed), packed)
    if hit is not None:
        return hit
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
            keep[b * per : (b + 1) * per] = False
        kept_bytes = torch.nonzero(keep).flatten()
        compact = compact[:, kept_bytes.to(packed.device)].contiguous()
        columns = (kept_bytes[:, None] * CODES_PER_BYTE + torch.arange(CODES_PER_BYTE)).flatten()
        columns = columns[columns < k].to(packed.device)
    return _plans.put(id(packed), packed, (channels, columns, compact))


def skips_nothing(packed: torch.Tensor) -> bool:
    """Whether ``packed``'s plan keeps every channel and K block (a scan of the weight)."""
    report = zero_skip(packed, BLOCK_K)
    return not report.channels and not report.k_blocks


def adopt_whole(packed: torch.Tensor) -> None:
    """Keep for ``packed`` the plan that skips nothing (``weight_cache``: its entry found that
    with :func:`skips_nothing`), so its first call does not read the weight to find it."""
    _plans.put(id(packed), packed, (None, None, packed))


def _scatter(
    kept_out: torch.Tensor,
    channels: torch.Tensor,
    n: int,
    bias: torch.Tensor | None,
    act: str,
    residual: torch.Tensor | None,
    dim: int,
) -> torch.Tensor:
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


def linear(
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
    """``ternary_linear`` skipping zero channels and zero K blocks; a traced call is the operator
    ``tribuild::ternary_linear_zero_skip``, on either backend (the plan reads the weight's
    values, which a trace cannot). With ``quantize``, ``x`` is quantized over its whole rows,
    before zero K blocks are dropped. ``opt_level``: the old kernel files' ``tuned``
    (``autotune.tuned_at``)."""
    act = activation_name(act)
    if configs is None and native_chosen() and not torch.compiler.is_compiling():
        from tribuild.runtime import native  # loaded already: the backend is chosen

        # The lookup ternary_linear starts with (its key: the act's canonical name, as _linear
        # passes it), before the plan's: found only where the plan skips nothing (its compact
        # weight is ``packed`` itself). Integer sums only, which a plan's dropped zeros cannot
        # change; a float call's order of summation could.
        if quantize or native.quantized(x):
            site = native.site_key(x, packed, scale, bias, act, residual, True)
            if (launch := native.prepared(site, packed)) is not None:
                return launch(x, scale, bias, residual)
    if opt_level is not None:
        tuned = tuned_at(opt_level)
    if configs is None and torch.compiler.is_compiling():
        return TERNARY_LINEAR_ZERO_SKIP(x, packed, scale, bias, residual, act, tuned, quantize)
    return _linear(
        x,
        packed,
        scale,
        bias,
        act,
        residual,
        tuned=tuned,
        configs=configs,
        quantize=quantize,
    )


def _linear(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    act: str,
    residual: torch.Tensor | None,
    *,
    tuned: bool = False,
    configs: Sequence[KernelConfig] | None = None,
    quantize: bool = False,
) -> torch.Tensor:
    channels, columns, compact = _plan(packed, x.shape[-1])
    if columns is not None:
        if quantize:  # here, over the whole rows: the product gets x quantized already
            x, quantize = quantize_activations(x, tuned=tuned), False
        x = x.index_select(-1, columns).contiguous()
    if channels is None:
        return ternary_linear(
            x, compact, scale, bias, act, residual, tuned=tuned, configs=configs, quantize=quantize
        )
    if channels.numel() == 0:
        kept = x.new_zeros((*x.shape[:-1], 0))
    else:
        kept = ternary_linear(
            x,
            compact,
            scale.index_select(0, channels).contiguous() if scale.numel() > 1 else scale,
            _pick(bias, channels, 0),
            act,
            _pick(residual, channels, -1),
            tuned=tuned,
            configs=configs,
            quantize=quantize,
        )
    return _scatter(kept, channels, packed.shape[0], bias, act, residual, kept.dim() - 1)


def conv2d(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    kernel_size: int,
    stride: int = 1,
    padding: int = 0,
    groups: int = 1,
    act: str | None = None,
    residual: torch.Tensor | None = None,
    tuned: bool = False,
    configs: Sequence[KernelConfig] | None = None,
    opt_level: int | None = None,
) -> torch.Tensor:
    """``ternary_conv2d`` skipping zero output channels and, ungrouped, all-zero K blocks; a
    traced call is the operator ``tribuild::ternary_conv2d_zero_skip``. ``opt_level``: the
    old kernel files' ``tuned`` (``autotune.tuned_at``)."""
    if opt_level is not None:
        tuned = tuned_at(opt_level)
    act = activation_name(act)
    if configs is None and torch.compiler.is_compiling():
        return TERNARY_CONV2D_ZERO_SKIP(
            x, packed, scale, bias, residual, kernel_size, stride, padding, groups, act, tuned
        )
    return _conv2d(
        x,
        packed,
        scale,
        bias,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        groups=groups,
        act=act,
        residual=residual,
        tuned=tuned,
        configs=configs,
    )


def _conv2d(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    *,
    kernel_size: int,
    stride: int,
    padding: int,
    groups: int,
    act: str,
    residual: torch.Tensor | None,
    tuned: bool = False,
    configs: Sequence[KernelConfig] | None = None,
) -> torch.Tensor:
    c = x.shape[1]
    channels, columns, compact = _plan(
        packed, c * kernel_size * kernel_size if groups == 1 else None
    )
    if columns is not None:
        return _conv_as_gemm(x, packed, scale, bias, act, residual, kernel_size, stride, padding)
    if channels is None or channels.numel() == 0:  # nothing to skip, or nothing left to compute
        return ternary_conv2d(
            x,
            packed,
            scale,
            bias,
            act=act,
            residual=residual,
            groups=groups,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            tuned=tuned,
            configs=configs,
        )
    kept_groups = groups
    if groups > 1:  # one group per kept channel, over its group's input channels
        per_in, per_out = c // groups, packed.shape[0] // groups
        inputs = (channels // per_out * per_in)[:, None] + torch.arange(per_in, device=x.device)
        x, kept_groups = x.index_select(1, inputs.flatten()), channels.numel()
    kept = ternary_conv2d(
        x,
        compact,
        scale.index_select(0, channels).contiguous() if scale.numel() > 1 else scale,
        _pick(bias, channels, 0),
        act=act,
        residual=_pick(residual, channels, 1),
        groups=kept_groups,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        tuned=tuned,
        configs=configs,
    )
    return _scatter(kept, channels, packed.shape[0], bias, act, residual, 1)


def _conv_as_gemm(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    act: str,
    residual: torch.Tensor | None,
    kernel_size: int,
    stride: int,
    padding: int,
) -> torch.Tensor:
    b, _, h, w = x.shape
    oh, ow = ((d + 2 * padding - kernel_size) // stride + 1 for d in (h, w))
    patches = F.unfold(x, kernel_size, padding=padding, stride=stride).transpose(1, 2)  # [B, L, K]
    n = packed.shape[0]
    res = None if residual is None else residual.reshape(b, n, oh * ow).transpose(1, 2)
    y = linear(patches, packed, scale, bias, act, res)
    return y.transpose(1, 2).reshape(b, n, oh, ow)


TERNARY_LINEAR_ZERO_SKIP = ops.define(
    "ternary_linear_zero_skip(Tensor x, Tensor packed, Tensor scale, Tensor? bias, "
    "Tensor? residual, str act, bool tuned, bool quantize=False) -> Tensor",
    lambda x, packed, scale, bias, residual, act, tuned, quantize=False: _linear(
        x, packed, scale, bias, act, residual, tuned=tuned, quantize=quantize
    ),
    lambda x, packed, *_: x.new_empty(linear_shape(x, packed)),
)
TERNARY_CONV2D_ZERO_SKIP = ops.define(
    "ternary_conv2d_zero_skip(Tensor x, Tensor packed, Tensor scale, Tensor? bias, "
    "Tensor? residual, int kernel_size, int stride, int padding, int groups, str act, "
    "bool tuned) -> Tensor",
    lambda x, packed, scale, bias, residual, size, stride, padding, groups, act, tuned: _conv2d(
        x,
        packed,
        scale,
        bias,
        kernel_size=size,
        stride=stride,
        padding=padding,
        groups=groups,
        act=act,
        residual=residual,
        tuned=tuned,
    ),
    lambda x, packed, scale, bias, residual, size, stride, padding, *_: x.new_empty(
        conv2d_shape(x, packed, (size, size), (stride, stride), (padding, padding))
    ),
)
