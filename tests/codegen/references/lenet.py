"""Reference of models/lenet.tri: LeNet-5 with tanh and average pooling."""

from __future__ import annotations

import torch
from torch import nn

from .common import Conv2d, TernaryConv2d, TernaryLinear

ENTRY = "models/lenet.tri:LeNet5"


class LeNet5(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.c1 = Conv2d(1, 6, kernel=5)
        self.s2 = nn.AvgPool2d(2, 2, 0)
        self.c3 = TernaryConv2d(6, 16, kernel=5, bias=True)
        self.s4 = nn.AvgPool2d(2, 2, 0)
        self.c5 = TernaryConv2d(16, 120, kernel=5, bias=True)
        self.f6 = TernaryLinear(120, 84, bias=True)
        self.out = nn.Linear(84, num_classes)

    def forward(self, x):
        a = self.s2(torch.tanh(self.c1(x)))
        b = self.s4(torch.tanh(self.c3(a)))
        c = torch.flatten(torch.tanh(self.c5(b)), 1)
        return self.out(torch.tanh(self.f6(c)))


def make(**args) -> nn.Module:
    return LeNet5(**args)
