"""Reference of models/vgg.tri: VGG with batch normalization (VGG-16 by default)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks.conv_bn_act import ACT_RELU, ConvBNAct
from .common import TernaryLinear

ENTRY = "models/vgg.tri:VGG"


class VGGStage(nn.Module):
    def __init__(self, cin: int, cout: int, depth: int, fp_first: bool = False):
        super().__init__()
        self.convs = nn.ModuleList(
            [
                ConvBNAct(
                    cin if j == 0 else cout,
                    cout,
                    kernel=3,
                    act=ACT_RELU,
                    ternary=not (fp_first and j == 0),
                )
                for j in range(depth)
            ]
        )
        self.pool = nn.MaxPool2d(2, 2, 0)

    def forward(self, x):
        for c in self.convs:
            x = c(x)
        return self.pool(x)


class VGG(nn.Module):
    def __init__(
        self, depths=(2, 2, 3, 3, 3), widths=(64, 128, 256, 512, 512), num_classes: int = 1000
    ):
        super().__init__()
        self.stages = nn.ModuleList(
            [
                VGGStage(3 if i == 0 else widths[i - 1], widths[i], depths[i], i == 0)
                for i in range(5)
            ]
        )
        self.classifier = nn.Sequential(
            TernaryLinear(widths[4] * 7 * 7, 4096, bias=True),
            nn.ReLU(),
            nn.Dropout(0.5),
            TernaryLinear(4096, 4096, bias=True),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        for s in self.stages:
            x = s(x)
        x = F.adaptive_avg_pool2d(x, 7)
        return self.classifier(torch.flatten(x, 1))


def make(**args) -> nn.Module:
    return VGG(**args)
