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

import torch
import torch.nn.functional as F

from tribuild.base.record import record
from tribuild.runtime.ternarize import ternarize

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
    out, k = rows.shape
    # Bytes all the way (a weight is loaded tensor by tensor: its passes are the load time):
    # in two's complement -1 is 0b...11, so (c & 3) ^ ((c >> 1) & 1) maps -1, 0, 1 to the
    # codes 0b10, 0b00, 0b01.
    c = rows.to(torch.int8)
    c = (c & 3) ^ ((c >> 1) & 1)
    if k % CODES_PER_BYTE:
        c = F.pad(c, (0, -k % CODES_PER_BYTE))  # padding is code 0b00, which decodes as 0
    v = c.view(torch.uint8).reshape(out, -1, CODES_PER_BYTE)
    return v[..., 0] | (v[..., 1] << 2) | (v[..., 2] << 4) | (v[..., 3] << 6)


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


def pack_ternary(w: torch.Tensor, scale: str = "tensor") -> tuple[torch.Tensor, torch.Tensor]:
    """Ternarize a float weight and pack it: ``(packed, g)``, what a generated module stores."""
    codes, g = ternarize(w, scale)
    return pack(codes), g


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
    zero = packed == 0
    channels = torch.nonzero(zero.all(dim=1)).flatten().tolist()
    per_block = block_k // CODES_PER_BYTE
    cols = zero.all(dim=0)
    pad = (-cols.numel()) % per_block
    blocks = torch.cat([cols, cols.new_ones(pad)]).reshape(-1, per_block).all(dim=1)
    return ZeroSkip(tuple(channels), tuple(torch.nonzero(blocks).flatten().tolist()), block_k)
