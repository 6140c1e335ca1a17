"""A model's large float layers held in 8 bits for inference: the token embedding and the
output head of a language model, most of a small BitNet model's bytes once its projections
are 2 bits a weight.

Terms:
- *row quantization*: a float weight ``[n, k]`` as int8 codes and one float32 scale a row
  (``max|row| / 127``, codes rounded half to even), as ``kernels/cpu/int8.cpp`` states it; a
  row is one token's vector, of the embedding and of a tied head alike. The codes are held in
  ``int8.cpp``'s *panel layout* (``Rows``), the one its kernels read, on every backend: a
  second copy in row order would double the table. The activations stay
  float32, but for one row on AVX2, where they are rounded to int16 (``int8.cpp``'s
  *product*: 1/65534 of the row's largest, against the weight's 1/254).
- *tied*: a head whose weight is the embedding's own parameter (``tie_word_embeddings``)
  shares its codes and scales with the embedding: one table in memory, as before.
- *head*: the layer that maps the last hidden state to the vocabulary's logits (its rows are
  the embedding's count, or its weight is the embedding's). In a ``KVCache`` step made with
  ``last_only=True`` (what ``generate`` makes), it computes the last position's logits only:
  a prompt of T tokens needs one row of logits, not T.
- *backend*: on the ``cpu`` backend (``backends.backend_for``: the native kernels loaded,
  not forced to ``torch``), the product is ``tb_i8_linear``; anywhere else the weight is
  widened to float32 for the call (correct, not lean). While ``torch.compile`` or
  ``torch.export`` traces, the kernel's call is the operator ``tribuild::cpu_int8_linear``.

``quantize_floats(model)`` replaces the layers in place; the state_dict then holds
``<layer>.codes`` (row order) and ``<layer>.scale`` instead of ``<layer>.weight``: it is a
form to run, not to save (save the model before, or load the checkpoint again).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tribuild.runtime import backends, decoding, native, ops

MIN_WEIGHTS = 1 << 20  # smaller float layers stay as they are: their bytes do not matter
PANEL_CHANNELS, PANEL_PIECE = 4, 16  # int8.cpp's *panel layout*: CHANNELS, PIECE


class Rows:
    """A weight ``[n, k]`` row-quantized: ``panel``, its int8 codes in the panel layout
    ``[groups, kp / 16, 4, 16]`` (``int8.cpp``; ``kp``: ``k`` rounded up to 16, padding
    codes 0), and ``scale`` float32 ``[n]``. Made by :meth:`quantize` or :meth:`from_codes`."""

    __slots__ = ("panel", "scale", "shape")

    def __init__(self, panel: torch.Tensor, scale: torch.Tensor, shape: tuple[int, int]):
        self.panel, self.scale, self.shape = panel, scale, shape

    @classmethod
    def quantize(cls, weight: torch.Tensor) -> Rows:
        """``weight`` row-quantized (see *row quantization*): by the kernels, which write the
        panel as they go, where they are loaded, else in torch."""
        w = weight.detach().to(torch.float32).contiguous()
        n, k = w.shape
        lib = native.library("an 8-bit layer") if w.device.type == "cpu" else None
        if lib is None:
            scale = w.abs().amax(dim=1) / 127.0
            safe = torch.where(scale > 0, scale, torch.ones_like(scale))
            codes = torch.where(scale[:, None] > 0, (w / safe[:, None]).round(), 0.0)
            return cls.from_codes(codes.clamp(-127, 127).to(torch.int8), scale)
        panel = torch.empty(panel_shape(n, k), dtype=torch.int8)
        scale = torch.empty(n, dtype=torch.float32)
        threads = torch.get_num_threads()
        lib.cdll.tb_i8_quantize(w.data_ptr(), n, k, panel.data_ptr(), scale.data_ptr(), threads)
        return cls(panel, scale, (n, k))

    @classmethod
    def from_codes(cls, codes: torch.Tensor, scale: torch.Tensor) -> Rows:
        """Int8 ``codes [n, k]`` in row order and their ``scale [n]``, as a panel."""
        n, k = codes.shape
        groups, pieces = panel_shape(n, k)[:2]
        padded = F.pad(codes, (0, pieces * PANEL_PIECE - k, 0, groups * PANEL_CHANNELS - n))
        panel = padded.view(groups, PANEL_CHANNELS, pieces, PANEL_PIECE).permute(0, 2, 1, 3)
        return cls(panel.contiguous(), scale, (n, k))

    def codes(self) -> torch.Tensor:
        """The int8 codes ``[n, k]`` in row order (a copy)."""
        n, k = self.shape
        groups, pieces = self.panel.shape[:2]
        # sizes spelled out: -1 cannot be inferred from a panel of no bytes (k = 0)
        whole = self.panel.permute(0, 2, 1, 3).reshape(
            groups * PANEL_CHANNELS, pieces * PANEL_PIECE
        )
        return whole[:n, :k].contiguous()

    def weight(self, dtype: torch.dtype) -> torch.Tensor:
        """The float weight ``scale · codes`` ``[n, k]`` in ``dtype``, widened for a call that
        the kernels do not run."""
        return self.codes().to(dtype) * self.scale.to(dtype)[:, None]

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """The codes of rows ``ids [...]``: ``[..., k]`` int8."""
        found = self.panel[ids // PANEL_CHANNELS, :, ids % PANEL_CHANNELS, :]
        kp = self.panel.shape[1] * PANEL_PIECE  # not -1: no ids (or k = 0) leave it open
        return found.reshape(*ids.shape, kp)[..., : self.shape[1]]


def panel_shape(n: int, k: int) -> tuple[int, int, int, int]:
    """The shape of an ``[n, k]`` weight's panel (see :class:`Rows`)."""
    pieces = -(-k // PANEL_PIECE)
    return (-(-n // PANEL_CHANNELS), pieces, PANEL_CHANNELS, PANEL_PIECE)


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(codes int8 [n, k], scale float32 [n])`` of a float weight (see *row quantization*),
    the codes in row order."""
    rows = Rows.quantize(weight)
    return rows.codes(), rows.scale


class Int8Linear(nn.Module):
    """``x @ (scale · codes)ᵀ + bias`` over a row-quantized weight (see the module doc)."""

    def __init__(self, rows: Rows, bias: torch.Tensor | None = None, head: bool = False) -> None:
        super().__init__()
        self.out_features, self.in_features = rows.shape
        self.rows, self.bias = rows, bias
        self.head = head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cache = decoding.active()
        if self.head and cache is not None and cache.last_only and x.dim() >= 2:
            x = x[..., -1:, :]  # the logits of the step's last position only
        if (
            x.dtype != torch.float32
            or x.device.type != "cpu"
            or x.requires_grad
            or backends.backend_for(x) != "cpu"
        ):
            return F.linear(x, self.rows.weight(x.dtype), self.bias)
        if torch.compiler.is_compiling():
            out = CPU_INT8_LINEAR(x, self.rows.panel, self.rows.scale, self.in_features)
        else:
            out = _linear(x, self.rows.panel, self.rows.scale, self.in_features)
        return out if self.bias is None else out + self.bias

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:  # type: ignore[no-untyped-def]
        destination[prefix + "codes"] = self.rows.codes()
        destination[prefix + "scale"] = self.rows.scale
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def extra_repr(self) -> str:
        head = ", head" if self.head else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, int8{head}"


def _linear(x: torch.Tensor, panel: torch.Tensor, scale: torch.Tensor, k: int) -> torch.Tensor:
    """``x @ (scale · codes)ᵀ`` on ``tb_i8_linear`` (the ``cpu`` backend's library), or widened
    in torch where the library cannot be had (a traced graph run where it was not traced)."""
    n = scale.shape[0]
    if x.dim() == 0 or x.shape[-1] != k:  # the kernel would read and write past x and out
        got = "a scalar" if x.dim() == 0 else f"{x.shape[-1]} columns"
        raise ValueError(
            f"an 8-bit layer of in_features {k} was given x of shape {tuple(x.shape)} "
            f"({got}): its last dimension must be {k}"
        )
    lib = native.library("an 8-bit layer")
    if lib is None:
        return F.linear(x, Rows(panel, scale, (n, k)).weight(torch.float32))
    x2 = x.contiguous()
    m = x2.numel() // k if k else 0
    # no K: sums of nothing, 0 (as F.linear), not torch.empty's leftovers
    out = (torch.empty if k else torch.zeros)((*x.shape[:-1], n), dtype=torch.float32)
    if m:
        threads = torch.get_num_threads()
        fn = lib.cdll.tb_i8_linear
        fn(x2.data_ptr(), m, k, panel.data_ptr(), scale.data_ptr(), n, out.data_ptr(), threads)
    return out


CPU_INT8_LINEAR = ops.define(
    "cpu_int8_linear(Tensor x, Tensor panel, Tensor scale, int k) -> Tensor",
    _linear,
    lambda x, panel, scale, k: x.new_empty([*x.shape[:-1], scale.shape[0]]),
)


class Int8Embedding(nn.Module):
    """Token ids ``[...]`` to ``scale[id] · codes[id]``, ``[..., dim]`` float32."""

    def __init__(self, rows: Rows) -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = rows.shape
        self.rows = rows

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        decoding.check_ids(ids, self.num_embeddings)
        codes = self.rows.lookup(ids).to(torch.float32)
        return codes * self.rows.scale[ids].unsqueeze(-1)

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:  # type: ignore[no-untyped-def]
        destination[prefix + "codes"] = self.rows.codes()
        destination[prefix + "scale"] = self.rows.scale

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, int8"


class MappedEmbedding(nn.Module):
    """Token ids ``[...]`` to rows of ``table`` as float32: a checkpoint's own embedding tensor
    mapped from its file copy-on-write (``safetensors_io.Entry.map(populate=False,
    private=True)``), so only the rows looked up are read and resident (a write changes the
    module's copy, never the file); exact, where 8-bit rows move a BitNet LM's logits far more
    than an 8-bit head does (their rounding runs through every layer's activation
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
    rows: dict[str, Rows] | None = None,
) -> nn.Module:
    """``model`` with its float ``nn.Linear`` and ``nn.Embedding`` layers of at least
    ``min_weights`` weights replaced by 8-bit ones (see the module doc), in place; a weight
    shared by several layers (tied) is quantized once. ``mapped`` (an embedding's module name
    to its checkpoint tensor, mapped: ``checkpoint.load_checkpoint`` passes them) makes those
    embeddings ``MappedEmbedding``s instead of 8-bit ones; ``rows`` (a layer's name to its
    weight's rows made before: ``weight_cache``'s, from :func:`quantized_rows`) are taken
    instead of quantizing that weight again. For inference: raises
    ``ValueError`` on a model in training mode."""
    if model.training:
        raise ValueError("quantize_floats is for inference: call model.eval() first")
    done: dict[int, Rows] = {}
    vocab = {
        m.weight.shape[0]
        for m in model.modules()
        if isinstance(m, nn.Embedding) and m.weight.numel() >= min_weights
    }

    def rows_of(name: str, weight: torch.Tensor) -> Rows:
        if id(weight) not in done:  # a tied weight's second layer shares the first's rows
            done[id(weight)] = rows[name] if rows and name in rows else Rows.quantize(weight)
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
                new = Int8Embedding(rows_of(name, weight))
            else:
                bias = None if module.bias is None else module.bias.detach()
                head = weight.shape[0] in vocab
                new = Int8Linear(rows_of(name, weight), bias, head=head)
            owner, _, attr = name.rpartition(".")
            setattr(model.get_submodule(owner) if owner else model, attr, new)
    return model


def quantized_rows(model: nn.Module) -> dict[str, Rows]:
    """The rows of ``model``'s 8-bit layers by name, what ``quantize_floats``'s ``rows`` takes
    back; a table shared by tied layers once, under its first layer's name (the one
    ``quantize_floats`` quantizes it for)."""
    out: dict[str, Rows] = {}
    seen: set[int] = set()
    for name, module in model.named_modules():
        if isinstance(module, (Int8Linear, Int8Embedding)) and id(module.rows) not in seen:
            seen.add(id(module.rows))
            out[name] = module.rows
    return out
