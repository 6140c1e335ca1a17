"""Reference of models/resnet.tri: ResNet-18/34/50/101/152 from one generic layer."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks.conv_bn_act import ACT_RELU, ConvBNAct
from .blocks.resnet_blocks import ResStage

ENTRY = "models/resnet.tri:ResNet"


class ResNet(nn.Module):
    def __init__(self, blocks=(2, 2, 2, 2), bottleneck: bool = False, num_classes: int = 1000):
        super().__init__()
        expansion = 4 if bottleneck else 1
        self.stem = nn.Sequential(
            ConvBNAct(3, 64, kernel=7, stride=2, act=ACT_RELU, ternary=False), nn.MaxPool2d(3, 2, 1)
        )
        self.layer1 = ResStage(64, 64, blocks[0], 1, expansion)
        self.layer2 = ResStage(256 if bottleneck else 64, 128, blocks[1], 2, expansion)
        self.layer3 = ResStage(512 if bottleneck else 128, 256, blocks[2], 2, expansion)
        self.layer4 = ResStage(1024 if bottleneck else 256, 512, blocks[3], 2, expansion)
        self.fc = nn.Linear(2048 if bottleneck else 512, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make(**args) -> nn.Module:
    return ResNet(**args)
