"""Reference of models/bitnet.tri: one BitNet b1.58 block (pre-norm, bidirectional attention,
SwiGLU)."""

from __future__ import annotations

from torch import nn

from .blocks.bitnet_blocks import BitAttention, BitSwiGLU
from .common import RMSNorm

ENTRY = "models/bitnet.tri:BitNetBlock"


class BitNetBlock(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4, hidden: int = 176):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = BitAttention(dim, heads)
        self.ffn_norm = RMSNorm(dim)
        self.ffn = BitSwiGLU(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


def make(**args) -> nn.Module:
    return BitNetBlock(**args)
