"""The `.tri` built-ins as plain PyTorch, shared by every reference model.

Terms:
- *master weight*: the float ``weight`` a ternary layer holds (PyTorch's shape and name);
  its forward uses the *effective weight* ``ternarize(weight, scale)`` instead.
- *scale group*: the weights that share one scale ``g``: the whole tensor
  (``scale="tensor"``) or one output channel, i.e. one row of dim 0 (``scale="channel"``).
- *ternarize* (BitNet b1.58, LANGUAGE.md): ``g = max(mean(|W|), 1e-5)`` per scale group,
  ``codes = clamp(round(W / g), -1, 1)``, effective weight ``g * codes``.
- *quantize_activations*: per-token int8 absmax over the last dim:
  ``s = 127 / max(max|x|, 1e-5)``, ``clamp(round(x * s), -128, 127) / s``.

Naming rules that generated modules must follow so that state_dict keys coincide:
- A member ``let NAME = ...`` is the child ``NAME``; a ``Sequential([...])`` is an
  ``nn.Sequential`` (children ``0``, ``1``, ...); a plain list of layers (a literal or a
  comprehension, not inside ``Sequential``) is an ``nn.ModuleList``; ``c ? A(..) : B(..)``
  is whichever layer the condition picks, under the same name.
- ``TernaryLinear``/``TernaryConv2d`` subclass ``nn.Linear``/``nn.Conv2d``: parameters
  ``weight`` (the float master weight) and ``bias`` only when ``bias=true``. The scale is
  not stored: it is recomputed from ``weight``.
- ``Linear``/``Conv2d``/``BatchNorm2d``/``LayerNorm``/``Dropout``/pools/activations are
  PyTorch's own modules (``weight``, ``bias``, ``running_mean``, ``running_var``,
  ``num_batches_tracked``); ``RMSNorm`` has one parameter, ``weight``.
- ``MultiHeadAttention(d, heads)`` (its members are not named by the language) uses the
  parameter names of PyTorch's ``nn.MultiheadAttention(d, heads, batch_first=True)``: the
  ternary ``in_proj_weight [3d, d]`` (q, k and v stacked; one scale for the whole tensor),
  the float ``in_proj_bias [3d]`` (zeros), and ``out_proj``, a ``TernaryLinear(d, d,
  bias=true)``; no activation quantization. Forward: ``q, k, v`` = thirds of
  ``x @ in_proj^T + in_proj_bias``, split into heads ``[N, heads, T, d / heads]``,
  ``softmax(q @ k^T / sqrt(d / heads), -1) @ v``, heads merged back to ``[N, T, d]``,
  ``out_proj``. No mask, no dropout.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-5  # the floor of a ternary scale and of an activation absmax
SCALES = ("tensor", "channel")


def ternarize(w: torch.Tensor, scale: str = "tensor") -> torch.Tensor:
    """The effective weight ``g * clamp(round(w / g), -1, 1)`` of a master weight."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale!r}")
    a = w.abs()
    g = a.mean() if scale == "tensor" else a.flatten(1).mean(1).reshape(-1, *[1] * (w.dim() - 1))
    g = g.clamp_min(EPS)
    return g * torch.clamp(torch.round(w / g), -1, 1)


def quantize_activations(x: torch.Tensor) -> torch.Tensor:
    """Per-token int8 absmax fake quantization over the last dim."""
    amax = x.abs().amax(dim=-1, keepdim=True).clamp_min(EPS)
    s = torch.full_like(amax, 127.0) / amax
    return torch.clamp(torch.round(x * s), -128, 127) / s


class TernaryLinear(nn.Linear):
    """``TernaryLinear(in, out, bias=false, scale="tensor")``."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool = False, scale: str = "tensor"
    ):
        super().__init__(in_features, out_features, bias=bias)
        self.scale = scale

    def effective_weight(self) -> torch.Tensor:
        return ternarize(self.weight, self.scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.effective_weight(), self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, scale={self.scale!r}"


class TernaryConv2d(nn.Conv2d):
    """``TernaryConv2d(in, out, kernel, stride=1, padding=0, groups=1, bias=false,
    scale="tensor")``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel: int,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
        bias: bool = False,
        scale: str = "tensor",
    ):
        super().__init__(
            in_channels,
            out_channels,
            kernel,
            stride=stride,
            padding=padding,
            groups=groups,
            bias=bias,
        )
        self.scale = scale

    def effective_weight(self) -> torch.Tensor:
        return ternarize(self.weight, self.scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.effective_weight(), self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, scale={self.scale!r}"


def Conv2d(
    in_channels: int,
    out_channels: int,
    kernel: int,
    stride: int = 1,
    padding: int = 0,
    groups: int = 1,
    bias: bool = True,
) -> nn.Conv2d:
    """The full-precision ``Conv2d`` with the `.tri` spelling of its arguments."""
    return nn.Conv2d(
        in_channels, out_channels, kernel, stride=stride, padding=padding, groups=groups, bias=bias
    )


class RMSNorm(nn.Module):
    """``RMSNorm(d, eps=1e-6)``: ``x * rsqrt(mean(x^2, -1) + eps) * weight``."""

    def __init__(self, features: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, heads: int) -> torch.Tensor:
    """Multi-head attention of projected ``q, k, v [N, T, d]``, step by step as
    models/blocks/bitnet_blocks.tri writes it; the result, heads merged, is ``[N, T, d]``."""
    n, t, d = q.shape
    q = q.reshape(n, t, heads, d // heads).transpose(1, 2)
    k = k.reshape(n, t, heads, d // heads).transpose(1, 2)
    v = v.reshape(n, t, heads, d // heads).transpose(1, 2)
    scores = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // heads), -1)
    o = (scores @ v).transpose(1, 2)
    return o.reshape(n, t, d)


class MultiHeadAttention(nn.Module):
    """``MultiHeadAttention(d, heads)``: ternary projections (see the module docstring)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        if d % heads:
            raise ValueError(f"d = {d} is not divisible by heads = {heads}")
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d, d))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d))
        self.out_proj = TernaryLinear(d, d, bias=True)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def effective_in_proj(self) -> torch.Tensor:
        return ternarize(self.in_proj_weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = F.linear(x, self.effective_in_proj(), self.in_proj_bias).chunk(3, dim=-1)
        return self.out_proj(attention(q, k, v, self.heads))


def ternary_weights(model: nn.Module) -> list[tuple[str, torch.Tensor, torch.Tensor, str]]:
    """``(state_dict key, master weight, effective weight, scale mode)`` of every ternary weight."""
    out = []
    for path, m in model.named_modules():
        prefix = f"{path}." if path else ""
        if isinstance(m, (TernaryLinear, TernaryConv2d)):
            out.append((prefix + "weight", m.weight, m.effective_weight(), m.scale))
        elif isinstance(m, MultiHeadAttention):
            out.append(
                (prefix + "in_proj_weight", m.in_proj_weight, m.effective_in_proj(), "tensor")
            )
    return out
