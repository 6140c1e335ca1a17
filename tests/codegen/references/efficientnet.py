"""Reference of models/efficientnet.tri: EfficientNet-B0 (MBConv with squeeze-excitation, SiLU)."""

from __future__ import annotations

from torch import nn

from .blocks.conv_bn_act import ACT_SILU
from .mobilenet_v2 import MBNetwork

ENTRY = "models/efficientnet.tri:EfficientNetB0"


class EfficientNetB0(MBNetwork):
    def __init__(
        self,
        num_classes: int = 1000,
        expand=(1, 6, 6, 6, 6, 6, 6),
        kernels=(3, 3, 5, 3, 5, 5, 3),
        channels=(16, 24, 40, 80, 112, 192, 320),
        repeats=(1, 2, 2, 3, 3, 4, 1),
        strides=(1, 2, 2, 2, 1, 2, 1),
    ):
        super().__init__(num_classes, expand, kernels, channels, repeats, strides, ACT_SILU, True)


def make(**args) -> nn.Module:
    return EfficientNetB0(**args)
