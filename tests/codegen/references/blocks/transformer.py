"""Reference of models/blocks/transformer.tri: the pre-norm ViT encoder block."""

from __future__ import annotations

from torch import nn

from ..common import MultiHeadAttention, TernaryLinear


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int = 4):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = MultiHeadAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            TernaryLinear(dim, dim * mlp_ratio, bias=True),
            nn.GELU(),
            TernaryLinear(dim * mlp_ratio, dim, bias=True),
        )

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))
