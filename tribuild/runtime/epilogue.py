"""The kernels' epilogue in PyTorch, for the CPU fallback:
``y = act(scale · acc + bias + residual)``.

Terms: ``acc`` is the float32 product ``x · codesᵀ`` (or the convolution with the codes);
``scale`` is float32 of shape ``[1]`` (per tensor) or ``[N]`` (per output channel); ``bias``
is ``[N]``; ``residual`` has the output's shape; the *channel dim* is where N sits (-1 for a
linear layer, 1 for NCHW). ``ACTIVATIONS`` names every activation the kernels fuse; ``none``
is the identity and ``gelu`` the exact erf form. ``IN_PLACE`` computes the same values over its
argument where PyTorch can (``gelu`` cannot), for a fresh tensor that nothing else reads.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

Activation = Callable[[torch.Tensor], torch.Tensor]
ACTIVATIONS: dict[str, Activation] = {
    "none": lambda x: x,
    "relu": F.relu,
    "relu6": F.relu6,
    "silu": F.silu,
    "gelu": F.gelu,
    "sigmoid": torch.sigmoid,
}

IN_PLACE: dict[str, Activation] = {
    "none": lambda x: x,
    "relu": torch.relu_,
    "relu6": lambda x: F.relu6(x, inplace=True),
    "silu": lambda x: F.silu(x, inplace=True),
    "gelu": F.gelu,
    "sigmoid": torch.sigmoid_,
}


def activation_name(act: str | None) -> str:
    """The canonical name of ``act`` (``None`` is ``"none"``); unknown names raise ValueError."""
    name = "none" if act is None else act
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}; expected one of {sorted(ACTIVATIONS)}")
    return name


def apply_epilogue(
    acc: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    act: str,
    residual: torch.Tensor | None,
    channel_dim: int,
) -> torch.Tensor:
    """The float32 epilogue of ``acc``; per-channel terms broadcast along ``channel_dim``."""
    shape = [1] * acc.dim()
    shape[channel_dim] = -1
    y = acc * scale.float().reshape(shape)
    if bias is not None:
        y = y + bias.float().reshape(shape)
    if residual is not None:
        y = y + residual.float()
    return ACTIVATIONS[act](y)
