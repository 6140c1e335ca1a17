"""Reference of models/densenet.tri: DenseNet-121 (BC, growth k, blocks of 6, 12, 24, 16)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .blocks.conv_bn_act import ACT_RELU, ConvBNAct
from .blocks.dense_blocks import DenseBlock, Transition

ENTRY = "models/densenet.tri:DenseNet121"


class DenseNet121(nn.Module):
    def __init__(self, growth: int = 32, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            ConvBNAct(3, 2 * growth, kernel=7, stride=2, act=ACT_RELU, ternary=False),
            nn.MaxPool2d(3, 2, 1),
        )
        self.block1 = DenseBlock(2 * growth, 6, growth)
        self.trans1 = Transition(8 * growth)
        self.block2 = DenseBlock(4 * growth, 12, growth)
        self.trans2 = Transition(16 * growth)
        self.block3 = DenseBlock(8 * growth, 24, growth)
        self.trans3 = Transition(32 * growth)
        self.block4 = DenseBlock(16 * growth, 16, growth)
        self.norm = nn.BatchNorm2d(32 * growth)
        self.classifier = nn.Linear(32 * growth, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.trans1(self.block1(x))
        x = self.trans2(self.block2(x))
        x = self.trans3(self.block3(x))
        x = torch.relu(self.norm(self.block4(x)))
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make(**args) -> nn.Module:
    return DenseNet121(**args)
