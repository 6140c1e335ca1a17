"""The torch backend's arithmetic on ternary weights: their codes as a dense float32 weight,
and convolutions on it.

Terms:
- *unpacked cache*: a packed weight is decoded once and its float32 codes kept while the
  packed tensor lives and is not modified (``tensor_cache``: keyed by its identity, checked
  against its version counter), for the shape it was asked as.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tribuild.runtime.packing import unpack
from tribuild.runtime.tensor_cache import TensorCache

# id(packed) -> (the shape asked, its codes)
_unpacked: TensorCache[int, tuple[tuple[int, ...], torch.Tensor]] = TensorCache()


def unpacked_codes(packed: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The float32 codes of ``packed`` as a weight of ``shape``, decoded once and cached (in a
    traced graph, decoded in the graph: a graph cannot guard on the cache's identities)."""
    if torch.compiler.is_compiling():
        return unpack(packed, shape).float()
    hit = _unpacked.get(id(packed), packed)
    if hit is not None and hit[0] == shape:
        return hit[1]
    codes = unpack(packed, shape).float()
    _unpacked.put(id(packed), packed, (shape, codes))
    return codes


def dense_conv2d(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: torch.Tensor | None,
    stride: int | tuple[int, int],
    padding: int | tuple[int, int],
    groups: int,
) -> torch.Tensor:
    """``F.conv2d(x, w, bias, stride, padding, 1, groups)`` on the torch backend. A window that
    covers the whole input (ungrouped, unpadded: one output position) runs as the matrix product
    it is, which PyTorch's CPU convolution computes several times slower."""
    if groups == 1 and padding in (0, (0, 0)) and x.size(3) == w.size(3) and x.size(2) == w.size(2):
        b, n = x.size(0), w.size(0)
        return F.linear(x.reshape(b, -1), w.reshape(n, -1), bias).reshape(b, n, 1, 1)
    return F.conv2d(x, w, bias, stride, padding, 1, groups)
