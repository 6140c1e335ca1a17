"""Reference of models/blocks/inverted_residual.tri: InvertedResidual (MBConv) and MBStage."""

from __future__ import annotations

from torch import nn

from .conv_bn_act import ACT_NONE, ACT_RELU6, ConvBNAct
from .squeeze_excite import SqueezeExcite


class InvertedResidual(nn.Module):
    def __init__(
        self,
        cin: int,
        cout: int,
        stride: int = 1,
        expand_ratio: int = 6,
        kernel: int = 3,
        act: int = ACT_RELU6,
        se: bool = False,
    ):
        super().__init__()
        self.residual = stride == 1 and cin == cout
        hidden = cin * expand_ratio
        self.expand = (
            nn.Identity() if expand_ratio == 1 else ConvBNAct(cin, hidden, kernel=1, act=act)
        )
        self.depthwise = ConvBNAct(
            hidden, hidden, kernel=kernel, stride=stride, groups=hidden, act=act
        )
        self.excite = SqueezeExcite(hidden, cin // 4) if se else nn.Identity()
        self.project = ConvBNAct(hidden, cout, kernel=1, act=ACT_NONE)

    def forward(self, x):
        y = self.project(self.excite(self.depthwise(self.expand(x))))
        if self.residual:
            y = y + x
        return y


class MBStage(nn.Module):
    def __init__(
        self,
        cin: int,
        cout: int,
        depth: int,
        stride: int = 1,
        expand_ratio: int = 6,
        kernel: int = 3,
        act: int = ACT_RELU6,
        se: bool = False,
    ):
        super().__init__()
        self.blocks = nn.ModuleList(
            [
                InvertedResidual(
                    cin if i == 0 else cout,
                    cout,
                    stride if i == 0 else 1,
                    expand_ratio,
                    kernel,
                    act,
                    se,
                )
                for i in range(depth)
            ]
        )

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x
