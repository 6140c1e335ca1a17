"""Decoding new tokens from a generated language model with a KV cache.

Terms:
- *language model*: a generated module whose ``forward(ids)`` takes int64 token ids
  ``[N, T]`` and returns logits ``[N, T, vocab]`` (``models/bitnet_lm.tri``).
- *prefill*: the prompt run as one step of a fresh ``decoding.KVCache`` sized for the prompt
  and every new token; each new token then runs as a step of its own, one position, not
  the whole prefix (``decoding`` explains steps).
- *picking* a token from the last position's logits: the argmax when ``temperature`` is 0
  (greedy, as transformers' ``generate(do_sample=False)``), else a sample of
  ``softmax(logits / temperature)`` restricted to the ``top_k`` largest logits when given.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

from tribuild.runtime.decoding import KVCache, check_ids


def tokens(
    model: nn.Module,
    ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> Iterator[torch.Tensor]:
    """Each new token, ``[N, 1]`` int64, as soon as it is picked."""
    if ids.dim() != 2:
        raise ValueError(f"ids must be [batch, tokens], found shape {tuple(ids.shape)}")
    if ids.shape[1] == 0:
        raise ValueError("ids must hold at least one token per sequence")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be at least 0, not {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be at least 0, not {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, not {top_k}")
    vocab = _vocab(model)
    if vocab is not None:
        check_ids(ids, vocab)
    if max_new_tokens == 0:
        return
    cache = KVCache(ids.shape[1] + max_new_tokens, last_only=True)  # logits[:, -1] is read
    with torch.no_grad():
        step = ids.long()
        for i in range(max_new_tokens):
            with cache.step():
                logits = model(step)
            step = pick(logits[:, -1], temperature, top_k, generator)
            yield step
            if i + 1 == max_new_tokens:
                return


def generate(
    model: nn.Module,
    ids: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``ids`` with ``max_new_tokens`` new tokens appended: int64 ``[N, T + max_new_tokens]``."""
    new = list(tokens(model, ids, max_new_tokens, temperature, top_k, generator))
    return torch.cat([ids.long(), *new], dim=1)


def pick(
    logits: torch.Tensor,
    temperature: float = 0.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The next token of each row of ``logits [N, vocab]``, as ``[N, 1]`` int64."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    scaled = logits.float() / temperature
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


def _vocab(model: nn.Module) -> int | None:
    """The token count of the model's first embedding, to check ids before anything runs."""
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            return module.num_embeddings
    return None
