"""Reference of models/blocks/bitnet_blocks.tri: BitLinear, BitAttention and BitSwiGLU.

A BitLinear quantizes its input per token to 8 bits, then applies a ternary projection
without bias.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from ..common import TernaryLinear, attention, quantize_activations


class BitLinear(nn.Module):
    def __init__(self, din: int, dout: int):
        super().__init__()
        self.proj = TernaryLinear(din, dout)

    def forward(self, x):
        return self.proj(quantize_activations(x))


class BitAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.wq = BitLinear(dim, dim)
        self.wk = BitLinear(dim, dim)
        self.wv = BitLinear(dim, dim)
        self.wo = BitLinear(dim, dim)

    def forward(self, x):
        return self.wo(attention(self.wq(x), self.wk(x), self.wv(x), self.heads))


class BitSwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = BitLinear(dim, hidden)
        self.up = BitLinear(dim, hidden)
        self.down = BitLinear(hidden, dim)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))
