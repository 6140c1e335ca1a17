"""Reference of models/mobilenet_v2.tri: MobileNetV2 (width 1.0).

``MBNetwork`` is the shape that models/efficientnet.tri repeats member for member (stem,
seven MBStages, 1x1 head, dropout, classifier); the two entry layers differ only in their
arguments, so both subclass it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks.conv_bn_act import ACT_RELU6, ConvBNAct
from .blocks.inverted_residual import MBStage

ENTRY = "models/mobilenet_v2.tri:MobileNetV2"


class MBNetwork(nn.Module):
    def __init__(
        self, num_classes, expand, kernels, channels, repeats, strides, act: int, se: bool
    ):
        super().__init__()
        self.stem = ConvBNAct(3, 32, kernel=3, stride=2, act=act, ternary=False)
        self.stages = nn.ModuleList(
            [
                MBStage(
                    32 if i == 0 else channels[i - 1],
                    channels[i],
                    repeats[i],
                    strides[i],
                    expand[i],
                    kernels[i],
                    act,
                    se,
                )
                for i in range(7)
            ]
        )
        self.head = ConvBNAct(channels[6], 1280, kernel=1, act=act)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x):
        x = self.stem(x)
        for s in self.stages:
            x = s(x)
        x = self.head(x)
        return self.classifier(self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))


class MobileNetV2(MBNetwork):
    def __init__(
        self,
        num_classes: int = 1000,
        expand=(1, 6, 6, 6, 6, 6, 6),
        channels=(16, 24, 32, 64, 96, 160, 320),
        repeats=(1, 2, 3, 4, 3, 3, 1),
        strides=(1, 2, 2, 2, 1, 2, 1),
    ):
        super().__init__(
            num_classes, expand, (3,) * 7, channels, repeats, strides, ACT_RELU6, False
        )


def make(**args) -> nn.Module:
    return MobileNetV2(**args)
