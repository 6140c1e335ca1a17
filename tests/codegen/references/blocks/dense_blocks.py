"""Reference of models/blocks/dense_blocks.tri: DenseLayer, DenseBlock and Transition
(DenseNet-BC, pre-activation BN -> ReLU -> ternary conv)."""

from __future__ import annotations

import torch
from torch import nn

from ..common import TernaryConv2d


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = TernaryConv2d(cin, 4 * growth, kernel=1)
        self.bn2 = nn.BatchNorm2d(4 * growth)
        self.conv2 = TernaryConv2d(4 * growth, growth, kernel=3, padding=1)

    def forward(self, x):
        y = self.conv1(torch.relu(self.bn1(x)))
        y = self.conv2(torch.relu(self.bn2(y)))
        return torch.cat([x, y], 1)


class DenseBlock(nn.Module):
    def __init__(self, cin: int, depth: int, growth: int = 32):
        super().__init__()
        self.layers = nn.ModuleList([DenseLayer(cin + i * growth, growth) for i in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class Transition(nn.Module):
    def __init__(self, cin: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(cin)
        self.conv = TernaryConv2d(cin, cin // 2, kernel=1)
        self.pool = nn.AvgPool2d(2, 2, 0)

    def forward(self, x):
        return self.pool(self.conv(torch.relu(self.bn(x))))
