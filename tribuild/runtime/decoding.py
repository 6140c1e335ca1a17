"""The runtime of decoder language models: rotary position embeddings, causal grouped-query
attention, and the KV cache that makes both incremental while decoding.

Terms:
- *KV cache* (``KVCache``): the keys and values every `attention` call of a model has seen,
  in buffers of ``capacity`` positions allocated on first use (a step writes its positions
  in place: nothing is concatenated or copied per token; grouped-query heads read their
  key/value head through ``scaled_dot_product_attention(enable_gqa=True)``, not a widened
  copy), and ``offset``, the number of positions they hold. A forward run inside
  ``cache.step()`` is a *step*: its tokens sit at positions ``offset .. offset + T - 1``,
  ``rope`` rotates them by those positions, and each `attention` call appends its keys and
  values and attends over everything held.
- *slot*: the attention calls of one forward are numbered in the order they run. A `.tri`
  forward never branches on tensor data (E0308), so every step makes the same calls in the
  same order, and call ``i`` of every step reads and writes slot ``i``.
- *last only*: a cache made with ``last_only=True`` (``generate``'s) asks the model's output
  head for the logits of each step's last position alone, where the head can (an 8-bit head,
  ``int8``); a step's output is then ``[N, 1, vocab]``.
- Outside a step (a plain ``model(ids)``), positions start at 0 and attention sees only the
  keys of its own call: the function the source describes.
- ``Embedding``: ``nn.Embedding`` whose ids out of range raise a ``ValueError`` naming the
  range before the lookup (PyTorch's own error names neither).
- *rotate-half*: LLaMA's (and transformers') form of rotary embeddings: the last dim ``D``
  is split in halves ``x1, x2`` and ``x · cos + (-x2, x1) · sin`` with the angle of
  position ``p`` and pair ``i`` being ``p · theta^(-2i / D)``, computed as transformers
  computes it (float32 frequencies, ``cat(freqs, freqs)``), so the values agree bit for bit.
- *kernels* (:func:`kernels`): on the ``cpu`` backend, float32 inference of ``RMSNorm`` and
  ``rope`` is one native call each (``kernels/cpu/norm.cpp``, ``rope.cpp``): a decode step
  makes a few dozen of them on vectors of a few thousand floats, where PyTorch's dispatch of
  the same expressions costs more than the arithmetic. ``rope``'s kernel gives the torch
  expression's bits; anywhere else (autograd, tracing, other dtypes) both are PyTorch's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from tribuild.runtime import backends, native
from tribuild.runtime.kernels.cpu.build import Library

_ACTIVE = threading.local()
_F32 = torch.float32
_F32_BYTES = 4
_FEW_IDS = 64  # check_ids reads at most this many ids in Python, past it two reductions


class KVCache:
    """Keys and values for ``capacity`` positions of every attention call of one model."""

    def __init__(self, capacity: int, last_only: bool = False) -> None:
        if capacity < 1:
            raise ValueError(f"a KV cache holds at least 1 position, not {capacity}")
        self.capacity = capacity
        self.last_only = last_only  # a head that can (int8.Int8Linear) gives the last row only
        self.offset = 0
        self._slots: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._next = 0
        self._new = 0

    @contextmanager
    def step(self) -> Iterator[KVCache]:
        """Run one forward as the next positions of the sequences this cache holds."""
        previous = getattr(_ACTIVE, "cache", None)
        _ACTIVE.cache, self._next, self._new = self, 0, 0
        try:
            yield self
        finally:
            _ACTIVE.cache = previous
        self.offset += self._new

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store the step's keys and values ``[N, Hkv, T, D]`` in the next slot; every key and
        value held for it, this step's included."""
        i, self._next = self._next, self._next + 1
        end = self.offset + k.shape[2]
        if end > self.capacity:
            raise ValueError(f"the KV cache holds {self.capacity} positions; this step needs {end}")
        if i == len(self._slots):
            n, h, _, d = k.shape
            self._slots.append(
                (
                    k.new_empty(n, h, self.capacity, d),
                    v.new_empty(n, h, self.capacity, v.shape[3]),
                )
            )
        keys, values = self._slots[i]
        keys[:, :, self.offset : end] = k
        values[:, :, self.offset : end] = v
        self._new = k.shape[2]
        return keys[:, :, :end], values[:, :, :end]


def active() -> KVCache | None:
    """The cache of the step running on this thread, if any."""
    return getattr(_ACTIVE, "cache", None)


_TABLES: dict[tuple[object, ...], tuple[torch.Tensor, torch.Tensor]] = {}
"""cos and sin tables by (theta, D, dtype, device), for positions 0 .. len - 1."""


def _rope_tables(
    theta: float, d: int, end: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    key = (float(theta), d, dtype, device)
    hit = _TABLES.get(key)
    if hit is not None and hit[0].shape[0] >= end:
        return hit
    size = max(end, 2 * hit[0].shape[0] if hit is not None else 64)
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float, device=device) / d))
    positions = torch.arange(size, device=device).float()
    freqs = positions[:, None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    tables = (emb.cos().to(dtype), emb.sin().to(dtype))
    _TABLES[key] = tables
    return tables


def rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary embeddings of ``x [..., T, D]``, positions along dim -2 from the step's offset.

    On the ``cpu`` backend (see :func:`kernels`), a 4-d ``x`` with even ``D`` is one native
    call (``kernels/cpu/rope.cpp``): the expression below, bit for bit."""
    cache = getattr(_ACTIVE, "cache", None)
    start = cache.offset if cache is not None else 0
    shape = x.shape
    t, d = shape[-2], shape[-1]
    cos, sin = _rope_tables(theta, d, start + t, x.dtype, x.device)
    lib = kernels(x) if len(shape) == 4 else None  # first: a trace reads no shape as a bool
    if lib is not None and d % 2 == 0 and x.stride(3) == 1:
        out = torch.empty_like(x)  # x's layout where x is dense, as the expression's result
        sx, so, row = x.stride(), out.stride(), start * d * _F32_BYTES
        if out.numel():
            lib.cdll.tb_rope(
                x.data_ptr(), shape[0], shape[1], t, d, sx[0], sx[1], sx[2],
                cos.data_ptr() + row, sin.data_ptr() + row,
                out.data_ptr(), so[0], so[1], so[2],
            )  # fmt: skip
        return out
    cos, sin = cos[start : start + t], sin[start : start + t]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def kernels(x: torch.Tensor, weight: torch.Tensor | None = None) -> Library | None:
    """The native library when an inference call on ``x`` (and its ``weight``) runs on the
    ``cpu`` backend's kernels: float32 CPU tensors that need no gradient, no trace or compile
    under way, the ``cpu`` backend chosen and its library loaded; else None (the torch path).
    The checks are ordered for the hot case, a decode step in ``no_grad``: each is a fraction
    of a microsecond, and a step makes dozens of these calls."""
    if (
        x.dtype is not _F32
        or not x.is_cpu
        or (
            torch.is_grad_enabled()
            and (x.requires_grad or (weight is not None and weight.requires_grad))
        )
        or (weight is not None and (weight.dtype is not _F32 or not weight.is_cpu))
        or backends.backend_for(x) != "cpu"  # the native backend's, as its linear layers
        or torch.compiler.is_compiling()
        or torch.jit.is_tracing()
        or torch.jit.is_scripting()
    ):
        return None
    return native.library()  # None: the cpu backend forced where the kernels cannot be had


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """``softmax(q k^T / sqrt(D)) v`` with grouped-query heads (query head ``h`` reads key/value
    head ``h // (H / Hkv)``); in a step, over every key held for this call."""
    cache = active()
    if cache is not None:
        k, v = cache.append(k, v)
    t, s = q.shape[2], k.shape[2]
    groups = q.shape[1] // k.shape[1]
    gqa = groups > 1 and not (torch.compiler.is_compiling() or torch.jit.is_tracing())
    if groups > 1 and not gqa:  # a traced graph (export, ONNX) gets the copy every exporter has
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
    mask = None
    if causal and t > 1 and t != s:  # new positions after cached ones: row i sees s - t + i
        rows = torch.arange(t, device=q.device)[:, None] + (s - t)
        mask = torch.arange(s, device=q.device)[None, :] <= rows
    return F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=mask,
        is_causal=causal and t > 1 and t == s,
        scale=q.shape[-1] ** -0.5,
        enable_gqa=gqa,  # the kernel reads head h // groups: no copy of the cache per call
    )


class RMSNorm(nn.RMSNorm):
    """``nn.RMSNorm`` (the same parameters and state_dict) whose inference on the ``cpu``
    backend is one native call (``kernels/cpu/norm.cpp``): a decode step's norms
    are vectors of a few thousand floats, where ``torch.rms_norm``'s eight dispatched
    operations cost more than the arithmetic. Anywhere else (the torch backend, autograd,
    tracing, other dtypes or devices) it is ``nn.RMSNorm`` itself."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight: torch.Tensor | None = self.weight
        lib = kernels(x, weight) if len(self.normalized_shape) == 1 else None
        if lib is None:
            return super().forward(x)
        x = x.contiguous()
        out = torch.empty_like(x)
        k = x.shape[-1]
        m = x.numel() // k if k else 0
        eps = torch.finfo(_F32).eps if self.eps is None else self.eps
        if m:
            if weight is not None and not weight.is_contiguous():
                weight = weight.detach().contiguous()
            lib.cdll.tb_rms_norm(
                x.data_ptr(),
                m,
                k,
                None if weight is None else weight.data_ptr(),
                eps,
                out.data_ptr(),
            )
        return out


class Embedding(nn.Embedding):
    """Token embedding: integer ids ``[...]`` to vectors ``[..., dim]``."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        check_ids(ids, self.num_embeddings)
        return super().forward(ids)


def check_ids(ids: torch.Tensor, vocab: int) -> None:
    """Raise ``ValueError`` unless every id lies in ``0 .. vocab - 1``."""
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise ValueError(f"token ids must be an integer tensor, not {ids.dtype}")
    n = ids.numel()
    if n == 0:
        return
    if (
        n <= _FEW_IDS
        and ids.is_cpu
        and not (torch.compiler.is_compiling() or torch.jit.is_tracing())
    ):
        values = ids.reshape(n).tolist()  # a decode step's few ids: no reductions dispatched
        low, high = min(values), max(values)
    else:
        low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab:
        bad = low if low < 0 else high
        raise ValueError(f"token id {bad} is out of range: ids must lie in 0..{vocab - 1}")
