"""Reference of models/vit.tri: the ViT encoder with a depthwise positional conv and a
mean-over-tokens head (no class token, no learned position table)."""

from __future__ import annotations

import torch
from torch import nn

from .blocks.transformer import EncoderBlock
from .common import Conv2d

ENTRY = "models/vit.tri:ViT"


class ViT(nn.Module):
    def __init__(
        self,
        patch: int = 16,
        dim: int = 192,
        depth: int = 12,
        heads: int = 3,
        mlp_ratio: int = 4,
        num_classes: int = 1000,
    ):
        super().__init__()
        self.patch_embed = Conv2d(3, dim, kernel=patch, stride=patch)
        self.pos = Conv2d(dim, dim, kernel=3, padding=1, groups=dim)
        self.blocks = nn.ModuleList([EncoderBlock(dim, heads, mlp_ratio) for i in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        grid = self.patch_embed(x)
        grid = grid + self.pos(grid)
        t = torch.transpose(torch.flatten(grid, 2), 1, 2)
        for b in self.blocks:
            t = b(t)
        return self.head(torch.mean(self.norm(t), [1], False))


def make(**args) -> nn.Module:
    return ViT(**args)
