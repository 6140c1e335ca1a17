"""The ternary layers generated modules are built from: ``TernaryLinear``, ``TernaryConv2d``
and ``MultiHeadAttention`` (ternary projections).

Terms:
- *packed form*: each ternary weight ``W`` is stored as the uint8 buffer ``<name>`` (2-bit
  codes, ``tribuild.gpu.packing``) and the float32 buffer ``<name>_scale`` (``[1]``, or
  ``[out]`` with ``scale="channel"``); biases stay float parameters. ``TERNARY`` lists a
  layer's ternary weights as ``(name, shape)``. ``state_dict()``/``load_state_dict()``
  round-trip this form; ``tribuild.gpu.model.Module.from_float`` makes it from float weights.
- *kernel*: the ``run(x, packed, scale, bias, residual)`` function of a generated kernel file
  (``kernels/<key>.py``), which launches the Triton kernel (on CUDA, or under the Triton
  interpreter). A layer without one uses the generic launcher with its plain epilogue.
- *dense weight*: on the torch backend a layer computes with ``scale · codes`` as one float
  weight (``F.linear``/``F.conv2d`` with the bias, as hand-written PyTorch would), kept while
  the layer holds the same packed and scale tensors. Edits in place drop it where they happen:
  ``load_state_dict`` (which copies into the buffers) and ``Module.freeze``; any other in-place
  edit must call ``forget_dense()``, as with PyTorch's prepacked quantized layers. Reading the
  version counters on every call instead cost about 1% of MobileNetV2 at -O0 (two reads per
  layer, each a few cache misses after a large convolution). The accumulation then rounds
  slightly differently from the kernels' ``scale · (x · codes)``, within float32 rounding.
  Linear layers keep it *K-major* (``K_MAJOR``: the ``[N, K]`` view of a contiguous ``[K, N]``
  tensor), which PyTorch's one-thread CPU matrix product reads faster than the row-major
  ``[N, K]`` of a hand-written ``nn.Linear`` (about 3-20% on the MNIST MLP's layers). A fused
  activation and residual add then run in place on the product (``epilogue.IN_PLACE``) unless
  autograd is recording: the torch backend's share of fusion.
- *fused call* (``fused``): the layer's kernel with a folded BatchNorm (its eval-mode affine
  map merged into the per-channel scale and bias), an activation and a residual add in the
  epilogue. In training mode, or with a BatchNorm in training mode, the same result is
  computed step by step (batch statistics, autograd).
- *QAT* (quantization-aware training): ``latent_<name>``, a float parameter that, while it
  exists and the layer is training, is ternarized on the fly with the straight-through
  estimator; ``tribuild.gpu.model`` creates and freezes it.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tribuild.gpu.epilogue import ACTIVATIONS, IN_PLACE, activation_name
from tribuild.gpu.launch import (
    backend_for,
    dense_conv2d,
    ternary_conv2d,
    ternary_linear,
    unpacked_codes,
)
from tribuild.gpu.packing import packed_cols
from tribuild.gpu.ternarize import dequantize, ternarize_ste

Kernel = Callable[..., torch.Tensor]


class TernaryLayer(nn.Module):
    """Shared by the ternary layers: packed buffers, QAT weights, folded epilogues."""

    TERNARY: tuple[tuple[str, tuple[int, ...]], ...] = ()
    K_MAJOR = (
        False  # dense weights as the [N, K] view of a contiguous [K, N] tensor (matrix products)
    )

    def _ternary_buffers(self, scale: str) -> None:
        self.scale_mode = scale
        for name, shape in self.TERNARY:
            rows = shape[0]
            self.register_buffer(
                name, torch.zeros(rows, packed_cols(math.prod(shape[1:])), dtype=torch.uint8)
            )
            self.register_buffer(f"{name}_scale", torch.ones(rows if scale == "channel" else 1))
        self._folded: tuple[tuple, tuple[torch.Tensor, torch.Tensor | None]] | None = None
        self._dense: dict[str | tuple[str, int], tuple] = {}

    def dense_weight(
        self, name: str, dtype: torch.dtype, scale: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``scale · codes`` of the packed weight ``name`` in ``dtype`` (``scale``: the weight's own
        ``<name>_scale`` when None), cached per (name, scale) while the layer holds the same packed
        tensor (see the module doc). The own scale's entry is keyed by the name alone, so
        ``forward``'s lookup builds no key."""
        packed, own = self._buffers[name], self._buffers[f"{name}_scale"]
        if scale is None or scale is own:
            key, scale = name, own
        else:
            key = (name, id(scale))
        hit = self._dense.get(key)
        if hit is not None and hit[0] is packed and hit[1] is scale and hit[2] is dtype:
            return hit[3]
        weight = dequantize(unpacked_codes(packed, dict(self.TERNARY)[name]), scale).to(dtype)
        if self.K_MAJOR:
            weight = weight.t().contiguous().t()
        self._dense = {
            k: v for k, v in self._dense.items() if name not in (k, k[0]) or v[0] is packed
        }
        self._dense[key] = (packed, scale, dtype, weight)
        return weight

    def forget_dense(self) -> None:
        """Drop the dense weights, after an in-place edit of a packed weight or scale (done
        already by ``load_state_dict`` and ``tribuild.gpu.model.Module.freeze``)."""
        self._dense = {}

    def _load_from_state_dict(self, *args, **kwargs) -> None:
        super()._load_from_state_dict(*args, **kwargs)
        self.forget_dense()

    @staticmethod
    def dense_epilogue(
        y: torch.Tensor, act: str | None, residual: torch.Tensor | None
    ) -> torch.Tensor:
        """``act(y + residual)`` of a fresh product ``y``: in place, unless autograd is recording."""
        act = act or "none"
        if torch.is_grad_enabled():
            return ACTIVATIONS[act](y if residual is None else y + residual)
        return IN_PLACE[act](y if residual is None else y.add_(residual))

    def weight_for_training(self, name: str) -> torch.Tensor | None:
        """The STE-ternarized latent weight while training with QAT, else None."""
        latent = self._parameters.get(f"latent_{name}")
        if latent is None or not self.training:
            return None
        return ternarize_ste(latent, self.scale_mode)

    def folded(
        self, scale: torch.Tensor, bias: torch.Tensor | None, bn: nn.BatchNorm2d | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(scale, bias)`` with ``bn``'s eval-mode affine map folded in, cached by version."""
        if bn is None:
            return scale, bias
        parts = (scale, bias, bn.weight, bn.bias, bn.running_mean, bn.running_var)
        key = tuple((id(t), t._version) if t is not None else None for t in parts) + (bn.eps,)
        if self._folded is None or self._folded[0] != key:
            with torch.no_grad():
                inv = torch.rsqrt(bn.running_var.float() + bn.eps)
                if bn.weight is not None:
                    inv = inv * bn.weight.float()
                shift = (
                    -bn.running_mean.float()
                    if bias is None
                    else bias.float() - bn.running_mean.float()
                )
                new_bias = shift * inv + (bn.bias.float() if bn.bias is not None else 0.0)
                self._folded = (key, ((scale.float() * inv).contiguous(), new_bias.contiguous()))
        return self._folded[1]

    def fused(
        self,
        x: torch.Tensor,
        bn: nn.BatchNorm2d | None = None,
        act: str | None = None,
        residual: torch.Tensor | None = None,
        kernel: Kernel | None = None,
    ) -> torch.Tensor:
        """``act(bn(self(x)) + residual)`` as one kernel call where possible (see the module doc)."""
        if self.training or (bn is not None and bn.training):
            y = self.forward(x)
            y = bn(y) if bn is not None else y
            y = y + residual if residual is not None else y
            return ACTIVATIONS[activation_name(act)](y)
        scale, bias = self._buffers["weight_scale"], self._parameters.get("bias")
        if bn is not None:
            scale, bias = self.folded(scale, bias, bn)
        return self.run(x, scale, bias, act, residual, kernel or self.kernel)


class TernaryLinear(TernaryLayer):
    K_MAJOR = True

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = False,
        scale: str = "tensor",
        kernel: Kernel | None = None,
    ):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.TERNARY = (("weight", (out_features, in_features)),)
        self._ternary_buffers(scale)
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        self.kernel = kernel

    def run(self, x, scale, bias, act, residual, kernel):
        if backend_for(x) == "torch":
            y = F.linear(x, self.dense_weight("weight", x.dtype, scale), bias)
            return y if act is None and residual is None else self.dense_epilogue(y, act, residual)
        if kernel is not None:
            return kernel(x, self.weight, scale, bias, residual)
        return ternary_linear(x, self.weight, scale, bias, act, residual)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            w = self.weight_for_training("weight")
            if w is not None:
                return F.linear(x, w, self.bias)
        elif backend_for(x) == "torch":
            return F.linear(x, self.dense_weight("weight", x.dtype), self._parameters.get("bias"))
        return self.run(
            x, self._buffers["weight_scale"], self._parameters.get("bias"), None, None, self.kernel
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, scale={self.scale_mode!r}"
        )


class TernaryConv2d(TernaryLayer):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
        bias: bool = False,
        scale: str = "tensor",
        kernel: Kernel | None = None,
    ):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.groups = (
            kernel_size,
            stride,
            padding,
            groups,
        )
        self.TERNARY = (
            ("weight", (out_channels, in_channels // groups, kernel_size, kernel_size)),
        )
        self._ternary_buffers(scale)
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.kernel = kernel

    def run(self, x, scale, bias, act, residual, kernel):
        if backend_for(x) == "torch":
            y = dense_conv2d(
                x,
                self.dense_weight("weight", x.dtype, scale),
                bias,
                self.stride,
                self.padding,
                self.groups,
            )
            return y if act is None and residual is None else self.dense_epilogue(y, act, residual)
        if kernel is not None:
            return kernel(x, self.weight, scale, bias, residual)
        return ternary_conv2d(
            x,
            self.weight,
            scale,
            bias,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            groups=self.groups,
            act=act,
            residual=residual,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            w = self.weight_for_training("weight")
            if w is not None:
                return F.conv2d(x, w, self.bias, self.stride, self.padding, 1, self.groups)
        elif backend_for(x) == "torch":
            return dense_conv2d(
                x,
                self.dense_weight("weight", x.dtype),
                self._parameters.get("bias"),
                self.stride,
                self.padding,
                self.groups,
            )
        return self.run(
            x, self._buffers["weight_scale"], self._parameters.get("bias"), None, None, self.kernel
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, groups={self.groups}, "
            f"bias={self.bias is not None}, scale={self.scale_mode!r}"
        )


class MultiHeadAttention(TernaryLayer):
    """Self-attention over ``[N, T, d]`` with PyTorch's parameter names
    (``nn.MultiheadAttention(d, heads, batch_first=True)``): the ternary ``in_proj_weight``
    ``[3d, d]`` (one scale for all of it) with the float ``in_proj_bias``, and ``out_proj``, a
    ``TernaryLinear(d, d, bias=True)``. Scaled dot-product attention, no mask."""

    K_MAJOR = True

    def __init__(
        self, d: int, heads: int, kernels: tuple[Kernel | None, Kernel | None] = (None, None)
    ):
        super().__init__()
        self.d, self.heads = d, heads
        self.TERNARY = (("in_proj_weight", (3 * d, d)),)
        self._ternary_buffers("tensor")
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d))
        self.out_proj = TernaryLinear(d, d, bias=True, kernel=kernels[1])
        self.kernel = kernels[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        w = self.weight_for_training("in_proj_weight") if self.training else None
        if w is not None:
            qkv = F.linear(x, w, self.in_proj_bias)
        elif backend_for(x) == "torch":
            qkv = F.linear(x, self.dense_weight("in_proj_weight", x.dtype), self.in_proj_bias)
        elif self.kernel is not None:
            qkv = self.kernel(
                x, self.in_proj_weight, self.in_proj_weight_scale, self.in_proj_bias, None
            )
        else:
            qkv = ternary_linear(
                x, self.in_proj_weight, self.in_proj_weight_scale, self.in_proj_bias
            )
        q, k, v = qkv.reshape(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out_proj(o.transpose(1, 2).reshape(n, t, d))
