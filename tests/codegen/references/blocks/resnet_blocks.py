"""Reference of models/blocks/resnet_blocks.tri: BasicBlock, Bottleneck and ResStage.

Blocks take ``(cin, width, stride)``; a Bottleneck outputs ``width * 4`` channels. The
shortcut ``down`` is a ternary 1x1 conv + BatchNorm where the shape changes, else Identity.
"""

from __future__ import annotations

import torch
from torch import nn

from ..common import TernaryConv2d


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module:
    if stride != 1 or cin != cout:
        return nn.Sequential(
            TernaryConv2d(cin, cout, kernel=1, stride=stride), nn.BatchNorm2d(cout)
        )
    return nn.Identity()


class BasicBlock(nn.Module):
    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        self.conv1 = TernaryConv2d(cin, width, kernel=3, stride=stride, padding=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = TernaryConv2d(width, width, kernel=3, padding=1)
        self.bn2 = nn.BatchNorm2d(width)
        self.down = _shortcut(cin, width, stride)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.down(x))


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int = 1):
        super().__init__()
        self.conv1 = TernaryConv2d(cin, width, kernel=1)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = TernaryConv2d(width, width, kernel=3, stride=stride, padding=1)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = TernaryConv2d(width, width * 4, kernel=1)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.down = _shortcut(cin, width * 4, stride)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + self.down(x))


class ResStage(nn.Module):
    """``depth`` blocks, the first strided; ``expansion`` 4 builds Bottlenecks, 1 BasicBlocks."""

    def __init__(self, cin: int, width: int, depth: int, stride: int = 1, expansion: int = 1):
        super().__init__()
        self.blocks = nn.ModuleList(
            [
                Bottleneck(cin if i == 0 else width * 4, width, stride if i == 0 else 1)
                if expansion == 4
                else BasicBlock(cin if i == 0 else width, width, stride if i == 0 else 1)
                for i in range(depth)
            ]
        )

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x
