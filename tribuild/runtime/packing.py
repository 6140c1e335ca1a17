"""2-bit packing of ternary codes, and the zero-skip report the optimizer reads.

Terms:
- *K*: the reduction dim. A linear weight ``[out, in]`` has ``K = in``; a conv weight
  ``[out, in/groups, kh, kw]`` is packed as its implicit-GEMM matrix ``[out, K]`` with
  ``K = in/groups · kh · kw`` (``weight.reshape(out, -1)``, so ``k = (c·kh + i)·kw + j``).
- *code*: 2 bits per weight: ``0b00 = 0``, ``0b01 = +1``, ``0b10 = -1`` (``0b11`` is never
  written and decodes as 0). Decoding is ``(c & 1) - (c >> 1)``, the same in the kernels.
- *packed*: uint8 ``[out, ceil(K / 4)]``; byte ``b`` of a row holds the codes of
  ``k = 4b .. 4b+3``, weight ``4b + t`` in bits ``2t .. 2t+1`` (little end first). K is
  padded to a multiple of 4 with code ``0b00``, so the padding decodes as 0.
- *zero-skip*: output channels whose codes are all zero, and K blocks (``block_k``
  consecutive weights, ``block_k`` a multiple of 4) that are zero in every output channel.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F

from tribuild.base.record import record
from tribuild.runtime.ternarize import ternary_scale

CODES_PER_BYTE = 4
_PLACES = 4 ** torch.arange(CODES_PER_BYTE, dtype=torch.int32)  # 1 << 2t: field t of a byte


def packed_cols(k: int) -> int:
    """Bytes per packed row for a reduction dim of ``k`` weights."""
    return -(-k // CODES_PER_BYTE)


def pack(codes: torch.Tensor) -> torch.Tensor:
    """Pack int codes in {-1, 0, 1} of shape ``[out, ...]`` into uint8 ``[out, ceil(K/4)]``."""
    rows = codes.reshape(codes.shape[0], -1)
    if rows.numel():
        low, high = torch.aminmax(rows)  # one pass over the codes
        if int(low) < -1 or int(high) > 1:
            raise ValueError("codes must lie in {-1, 0, 1}")
    cols, device = packed_cols(rows.shape[1]), codes.device
    packed = torch.empty(rows.shape[0], cols, dtype=torch.uint8, device=device)
    for start, stop in _chunks(rows):
        packed[start:stop] = _pack_rows(rows[start:stop])
    return packed


CHUNK_CODES = 1 << 18
"""Codes ``pack`` and ``pack_ternary`` take at once: every pass over a chunk stays in the
CPU's cache, and its temporaries are small enough for the allocator to reuse (a pass over a
whole weight of millions of codes makes a tensor the allocator maps and unmaps, faulting in
every page: most of a checkpoint's load time, measured)."""


def _chunks(rows: torch.Tensor) -> Iterator[tuple[int, int]]:
    step = max(1, CHUNK_CODES // max(rows.shape[1], 1))
    for start in range(0, rows.shape[0], step):
        yield start, min(start + step, rows.shape[0])


def _pack_rows(rows: torch.Tensor) -> torch.Tensor:
    """``pack`` of a ``[r, K]`` block of codes known to lie in {-1, 0, 1}."""
    c = rows.to(torch.int8)
    if c.shape[1] % CODES_PER_BYTE:
        c = F.pad(c, (0, -c.shape[1] % CODES_PER_BYTE))  # padding is 0b00, which decodes as 0
    if c.shape[1] == 0:
        return torch.empty(c.shape[0], 0, dtype=torch.uint8, device=c.device)
    # Four codes as the bytes of one int32 word w (little-endian: code t in bits 8t..8t+7).
    # In two's complement -1 is 0b...11, so per byte (c & 3) ^ ((c >> 1) & 1) maps -1, 0, 1
    # to the 2-bit codes 0b10, 0b00, 0b01; then byte t moves to bits 2t..2t+1 of the low byte
    # (the shifts bring no other code's bits below bit 8: each code is at most 2).
    w = c.contiguous().view(torch.int32)
    m = (w & 0x03030303) ^ ((w >> 1) & 0x01010101)
    return ((m | (m >> 6) | (m >> 12) | (m >> 18)) & 0xFF).to(torch.uint8)


def unpack(packed: torch.Tensor, shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """The int8 codes of a weight of ``shape`` (``[out, in]`` or ``[out, in/g, kh, kw]``)."""
    k = math.prod(shape[1:])
    if tuple(packed.shape) != (shape[0], packed_cols(k)):
        raise ValueError(
            f"packed shape {tuple(packed.shape)} does not hold a weight of shape {tuple(shape)}"
        )
    # Division and remainder rather than shifts and masks: the same values, and operators
    # every exporter has (ONNX has no signed shift).
    c = (packed.to(torch.int32).unsqueeze(-1) // _PLACES.to(packed.device)) % 4
    codes = c % 2 - c // 2
    return codes.reshape(shape[0], -1)[:, :k].reshape(tuple(shape)).to(torch.int8)


def pack_ternary(
    w: torch.Tensor, scale: str = "tensor", scratch: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ternarize a float weight and pack it: ``(packed, g)``, what a generated module stores;
    ``pack(ternarize(w, scale)[0])`` and the same ``g``, computed a chunk of rows at a time (no
    int8 codes of the whole weight); ``scratch`` as ``ternary_scale`` takes it."""
    g = ternary_scale(w, scale, scratch)
    rows = w.detach().reshape(w.shape[0], -1)
    cols, device = packed_cols(rows.shape[1]), w.device
    packed = torch.empty(rows.shape[0], cols, dtype=torch.uint8, device=device)
    if _native_pack(rows, g, packed):
        return packed, g
    for start, stop in _chunks(rows):
        part = g if g.numel() == 1 else g[start:stop, None]
        codes = rows[start:stop].float().div(part).round_().clamp_(-1, 1)  # ternarize's steps
        packed[start:stop] = _pack_rows(codes)
    return packed, g


def _native_pack(rows: torch.Tensor, g: torch.Tensor, packed: torch.Tensor) -> bool:
    """``pack_ternary``'s loop in one native pass (``kernels/cpu/pack.cpp``, the same bytes)
    where the kernels are loaded and ``rows`` (detached) is a float32 CPU tensor; whether it
    ran. A checkpoint's load is mostly this loop."""
    if rows.device.type != "cpu" or rows.dtype != torch.float32:
        return False
    from tribuild.runtime import native  # the kernels load on the first CPU call anyway

    lib = native.library("a ternary weight being packed")
    if lib is None or rows.numel() == 0:
        return False
    src, scale = rows.contiguous(), g.detach().to(torch.float32).contiguous()
    n, k = src.shape
    channel = int(scale.numel() > 1)
    threads = torch.get_num_threads()
    lib.cdll.tb_ternary_pack(
        src.data_ptr(), n, k, scale.data_ptr(), channel, packed.data_ptr(), threads
    )
    return True


@record
class ZeroSkip:
    """Output channels with all-zero codes and K blocks of ``block_k`` zero in every channel."""

    channels: tuple[int, ...]
    k_blocks: tuple[int, ...]
    block_k: int


def zero_skip(packed: torch.Tensor, block_k: int) -> ZeroSkip:
    """Report what a kernel may skip; ``block_k`` must be a positive multiple of 4."""
    if block_k <= 0 or block_k % CODES_PER_BYTE:
        raise ValueError(f"block_k must be a positive multiple of {CODES_PER_BYTE}, not {block_k}")
    if packed.numel():  # a byte is 0 where its four codes are: the largest byte says it
        channels = torch.nonzero(packed.amax(dim=1) == 0).flatten().tolist()
        cols = packed.amax(dim=0) == 0  # not (packed == 0).all(...): a bool copy, 70x slower
    else:
        channels = list(range(packed.shape[0])) if packed.shape[1] == 0 else []
        cols = torch.ones(packed.shape[1], dtype=torch.bool, device=packed.device)
    per_block = block_k // CODES_PER_BYTE
    pad = (-cols.numel()) % per_block
    blocks = torch.cat([cols, cols.new_ones(pad)]).reshape(-1, per_block).all(dim=1)
    return ZeroSkip(tuple(channels), tuple(torch.nonzero(blocks).flatten().tolist()), block_k)
