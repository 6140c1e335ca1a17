"""Reference of models/blocks/squeeze_excite.tri: EfficientNet's squeeze-and-excitation gate
(full-precision 1x1 convs with bias)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..common import Conv2d


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeeze: int):
        super().__init__()
        self.reduce = Conv2d(channels, squeeze, kernel=1)
        self.expand = Conv2d(squeeze, channels, kernel=1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        s = torch.sigmoid(self.expand(F.silu(self.reduce(s))))
        return x * s
