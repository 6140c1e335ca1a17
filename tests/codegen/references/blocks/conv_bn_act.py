"""Reference of models/blocks/conv_bn_act.tri: conv -> BatchNorm -> activation.

``act`` is one of the ACT_* codes; ``ternary=False`` gives a full-precision Conv2d
without bias.
"""

from __future__ import annotations

from torch import nn

from ..common import Conv2d, TernaryConv2d

ACT_NONE = 0
ACT_RELU = 1
ACT_RELU6 = 2
ACT_SILU = 3


class ConvBNAct(nn.Module):
    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int = 3,
        stride: int = 1,
        groups: int = 1,
        act: int = ACT_RELU,
        ternary: bool = True,
    ):
        super().__init__()
        self.conv = (
            TernaryConv2d(
                cin, cout, kernel=kernel, stride=stride, padding=kernel // 2, groups=groups
            )
            if ternary
            else Conv2d(
                cin,
                cout,
                kernel=kernel,
                stride=stride,
                padding=kernel // 2,
                groups=groups,
                bias=False,
            )
        )
        self.bn = nn.BatchNorm2d(cout)
        self.activation = (
            nn.ReLU()
            if act == ACT_RELU
            else nn.ReLU6()
            if act == ACT_RELU6
            else nn.SiLU()
            if act == ACT_SILU
            else nn.Identity()
        )

    def forward(self, x):
        return self.activation(self.bn(self.conv(x)))
