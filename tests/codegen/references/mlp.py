"""Reference of models/mlp.tri: the MNIST MLP 784-hidden1-hidden2-classes."""

from __future__ import annotations

import torch
from torch import nn

from .common import TernaryLinear

ENTRY = "models/mlp.tri:MnistMLP"


class MnistMLP(nn.Module):
    def __init__(self, hidden1: int = 256, hidden2: int = 128, num_classes: int = 10):
        super().__init__()
        self.fc1 = TernaryLinear(784, hidden1, bias=True)
        self.fc2 = TernaryLinear(hidden1, hidden2, bias=True)
        self.fc3 = nn.Linear(hidden2, num_classes)

    def forward(self, x):
        h = torch.flatten(x, 1)
        h = torch.relu(self.fc1(h))
        h = torch.relu(self.fc2(h))
        return self.fc3(h)


def make(**args) -> nn.Module:
    return MnistMLP(**args)
