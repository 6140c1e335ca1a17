"""A model's large float layers held in 8 bits for inference: the token embedding and the
output head of a language model, most of a small BitNet model's bytes once its projections
are 2 bits a weight.

Terms:
- *row quantization*: a float weight ``[n, k]`` as int8 codes and one float32 scale a row
  (``max|row| / 127``, codes rounded half to even), as ``kernels/cpu/int8.cpp`` states it; a
  row is one token's vector, of the embedding and of a tied head alike. The activations stay
  float32, but for one row on AVX2, where they are rounded to int16 (``int8.cpp``'s
  *product*: 1/65534 of the row's largest, against the weight's 1/254).
- *tied*: a head whose weight is the embedding's own parameter (``tie_word_embeddings``)
  shares its codes and scales with the embedding: one table in memory, as before.
- *head*: the layer that maps the last hidden state to the vocabulary's logits (its rows are
  the embedding's count, or its weight is the embedding's). In a ``KVCache`` step made with
  ``last_only=True`` (what ``generate`` makes), it computes the last position's logits only:
  a prompt of T tokens needs one row of logits, not T.
- *backend*: on the CPU with the native kernels loaded (``native.library``), the product is
  ``tb_i8_linear``; anywhere else the weight is widened to float32 for the call (correct,
  not lean).

``quantize_floats(model)`` replaces the layers in place; the state_dict then holds
``<layer>.codes`` and ``<layer>.scale`` instead of ``<layer>.weight``: it is a form to run,
not to save (save the model before, or load the checkpoint again).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tribuild.runtime import decoding, native

MIN_WEIGHTS = 1 << 20  # smaller float layers stay as they are: their bytes do not matter


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(codes int8 [n, k], scale float32 [n])`` of a float weight (see *row quantization*)."""
    w = weight.detach().to(torch.float32).contiguous()
    lib = native.library("an 8-bit layer") if w.device.type == "cpu" else None
    if lib is not None:
        n, k = w.shape
        codes = torch.empty(n, k, dtype=torch.int8)
        scale = torch.empty(n, dtype=torch.float32)
        threads = torch.get_num_threads()
        lib.cdll.tb_i8_quantize(w.data_ptr(), n, k, codes.data_ptr(), scale.data_ptr(), threads)
        return codes, scale
    scale = w.abs().amax(dim=1) / 127.0
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.where(scale[:, None] > 0, (w / safe[:, None]).round(), 0.0)
    return codes.clamp(-127, 127).to(torch.int8), scale


class Int8Linear(nn.Module):
    """``x @ (scale · codes)ᵀ + bias`` over a row-quantized weight (see the module doc)."""

    def __init__(
        self,
        codes: torch.Tensor,
        scale: torch.Tensor,
        bias: torch.Tensor | None = None,
        head: bool = False,
    ) -> None:
        super().__init__()
        self.out_features, self.in_features = codes.shape
        self.codes, self.scale, self.bias = codes, scale, bias
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cache = decoding.active()
        if self.head and cache is not None and cache.last_only and x.dim() >= 2:
            x = x[..., -1:, :]  # the logits of the step's last position only
        lib = native.library("an 8-bit layer") if x.device.type == "cpu" else None
        if lib is None or x.dtype != torch.float32 or x.requires_grad:
            weight = self.codes.to(x.dtype) * self.scale.to(x.dtype)[:, None]
            return F.linear(x, weight, self.bias)
        x2 = x.contiguous()
        out = torch.empty((*x.shape[:-1], self.out_features), dtype=torch.float32)
        m = x2.numel() // self.in_features if self.in_features else 0
        if m:
            lib.cdll.tb_i8_linear(
                x2.data_ptr(),
                m,
                self.in_features,
                self.codes.data_ptr(),
                self.scale.data_ptr(),
                self.out_features,
                out.data_ptr(),
                torch.get_num_threads(),
            )
        return out if self.bias is None else out + self.bias

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:  # type: ignore[no-untyped-def]
        destination[prefix + "codes"] = self.codes
        destination[prefix + "scale"] = self.scale
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def extra_repr(self) -> str:
        head = ", head" if self.head else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, int8{head}"


class Int8Embedding(nn.Module):
    """Token ids ``[...]`` to ``scale[id] · codes[id]``, ``[..., dim]`` float32."""

    def __init__(self, codes: torch.Tensor, scale: torch.Tensor) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = codes.shape
        self.codes, self.scale = codes, scale

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        decoding.check_ids(ids, self.num_embeddings)
        return self.codes[ids].to(torch.float32) * self.scale[ids].unsqueeze(-1)

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:  # type: ignore[no-untyped-def]
        destination[prefix + "codes"] = self.codes
        destination[prefix + "scale"] = self.scale

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, int8"


class MappedEmbedding(nn.Module):
    """Token ids ``[...]`` to rows of ``table`` as float32: a checkpoint's own embedding tensor
    mapped from its file (``safetensors_io.Entry.map(populate=False)``), so only the rows
    looked up are read and resident; exact, where 8-bit rows move a BitNet LM's logits far
    more than an 8-bit head does (their rounding runs through every layer's activation
    quantization)."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = table.shape
        self.table = table

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        decoding.check_ids(ids, self.num_embeddings)
        return F.embedding(ids, self.table).to(torch.float32)

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:  # type: ignore[no-untyped-def]
        destination[prefix + "weight"] = self.table.to(torch.float32)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, mapped {self.table.dtype}"


def quantize_floats(
    model: nn.Module,
    min_weights: int = MIN_WEIGHTS,
    mapped: dict[str, torch.Tensor] | None = None,
) -> nn.Module:
    """``model`` with its float ``nn.Linear`` and ``nn.Embedding`` layers of at least
    ``min_weights`` weights replaced by 8-bit ones (see the module doc), in place; a weight
    shared by several layers (tied) is quantized once. ``mapped`` (an embedding's module name
    to its checkpoint tensor, mapped: ``checkpoint.load_checkpoint`` passes them) makes those
    embeddings ``MappedEmbedding``s instead of 8-bit ones. For inference: raises
    ``ValueError`` on a model in training mode."""
    if model.training:
        raise ValueError("quantize_floats is for inference: call model.eval() first")
    done: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    vocab = {
        m.weight.shape[0]
        for m in model.modules()
        if isinstance(m, nn.Embedding) and m.weight.numel() >= min_weights
    }

    def rows_of(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if id(weight) not in done:
            done[id(weight)] = quantize_rows(weight)
        return done[id(weight)]

    for name, module in list(model.named_modules()):
        if name and (type(module) is nn.Linear or isinstance(module, nn.Embedding)):
            weight = module.weight
            if weight.numel() < min_weights or weight.is_meta or weight.dim() != 2:
                continue
            new: nn.Module
            if isinstance(module, nn.Embedding) and mapped and name in mapped:
                new = MappedEmbedding(mapped[name])  # not quantized, unless a tied head asks
            elif isinstance(module, nn.Embedding):
                new = Int8Embedding(*rows_of(weight))
            else:
                bias = None if module.bias is None else module.bias.detach()
                head = weight.shape[0] in vocab
                new = Int8Linear(*rows_of(weight), bias, head=head)
            owner, _, attr = name.rpartition(".")
            setattr(model.get_submodule(owner) if owner else model, attr, new)
    return model
