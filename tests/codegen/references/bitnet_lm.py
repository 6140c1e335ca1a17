"""Reference of models/bitnet_lm.tri: a BitNet b1.58 decoder LM (transformers'
``BitNetForCausalLM`` layout), written out step by step: token embedding, rotary embeddings
in the rotate-half form, causal grouped-query attention with an explicit mask, squared ReLU.
(tests/runtime/test_bitnet_lm.py checks the generated module against transformers itself.)"""

from __future__ import annotations

import math

import torch
from torch import nn

from .common import RMSNorm, TernaryLinear, quantize_activations

ENTRY = "models/bitnet_lm.tri:BitNetLM"


def example(shape: tuple[int, ...]) -> torch.Tensor:
    """Token ids of ``shape`` for the zoo's module tests (the vocabulary of every case is
    larger than 50)."""
    return torch.randint(0, 50, shape, generator=torch.Generator().manual_seed(0))


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Position p, pair i (of i and i + D/2) rotated by the angle p * theta^(-2i/D)."""
    t, d = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float) / d))
    angles = torch.arange(t, dtype=torch.float)[:, None] * inv_freq
    cos, sin = torch.cos(angles), torch.sin(angles)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Query head h reads key/value head h // (H / Hkv); position t sees keys 0..t."""
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    t = q.shape[2]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), -1) @ v


class BitNetAttention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, rope_theta: float, eps: float):
        super().__init__()
        self.heads, self.kv_heads, self.theta = heads, kv_heads, rope_theta
        width = dim // heads
        self.q_proj = TernaryLinear(dim, dim)
        self.k_proj = TernaryLinear(dim, kv_heads * width)
        self.v_proj = TernaryLinear(dim, kv_heads * width)
        self.attn_sub_norm = RMSNorm(dim, eps)
        self.o_proj = TernaryLinear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        h = quantize_activations(x)

        def heads(y: torch.Tensor, count: int) -> torch.Tensor:
            return y.reshape(n, t, count, d // self.heads).transpose(1, 2)

        q = rope(heads(self.q_proj(h), self.heads), self.theta)
        k = rope(heads(self.k_proj(h), self.kv_heads), self.theta)
        v = heads(self.v_proj(h), self.kv_heads)
        o = causal_attention(q, k, v).transpose(1, 2).reshape(n, t, d)
        return self.o_proj(quantize_activations(self.attn_sub_norm(o)))


class BitNetMLP(nn.Module):
    def __init__(self, dim: int, hidden: int, eps: float):
        super().__init__()
        self.gate_proj = TernaryLinear(dim, hidden)
        self.up_proj = TernaryLinear(dim, hidden)
        self.ffn_sub_norm = RMSNorm(hidden, eps)
        self.down_proj = TernaryLinear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = quantize_activations(x)
        gated = torch.relu(self.gate_proj(h)) ** 2 * self.up_proj(h)
        return self.down_proj(quantize_activations(self.ffn_sub_norm(gated)))


class BitNetDecoderLayer(nn.Module):
    def __init__(
        self, dim: int, heads: int, kv_heads: int, hidden: int, rope_theta: float, eps: float
    ):
        super().__init__()
        self.input_layernorm = RMSNorm(dim, eps)
        self.self_attn = BitNetAttention(dim, heads, kv_heads, rope_theta, eps)
        self.post_attention_layernorm = RMSNorm(dim, eps)
        self.mlp = BitNetMLP(dim, hidden, eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class BitNetModel(nn.Module):
    def __init__(self, vocab, dim, depth, heads, kv_heads, hidden, rope_theta, eps):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            BitNetDecoderLayer(dim, heads, kv_heads, hidden, rope_theta, eps) for _ in range(depth)
        )
        self.norm = RMSNorm(dim, eps)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class BitNetLM(nn.Module):
    def __init__(
        self,
        vocab: int = 0,
        dim: int = 0,
        layers: int = 0,
        heads: int = 0,
        kv_heads: int = 0,
        hidden: int = 0,
        rope_theta: float = 500000.0,
        eps: float = 1e-5,
    ):
        super().__init__()
        self.model = BitNetModel(vocab, dim, layers, heads, kv_heads, hidden, rope_theta, eps)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.model(ids))


def make(**args) -> nn.Module:
    return BitNetLM(**args)
