"""The functions generated modules call: ternary linear, ternary conv2d, activation
quantization. Generated modules and kernel files import them from here (``launch.ternary_linear``,
``from tribuild.runtime.launch import ...``), files written by any earlier tree too; each is
defined in the module of its concern:

- ``backends``: which backend runs a call (``triton``, ``torch``, ``cpu``; ``force_backend``,
  ``backend_for``).
- ``linear``: ``ternary_linear`` (GEMV, GEMM, the decode and int8 variants, BitLinear).
- ``conv``: ``ternary_conv2d`` (implicit GEMM, depthwise).
- ``quantize``: ``quantize_activations``.
- ``prepared``: the Triton launches, prepared once per call site (``prepared_kernels``).
- ``dense``: the torch backend's codes and convolutions (``unpacked_codes``, ``dense_conv2d``).

A kernel file passes ``tuned=TUNED`` (whether to try the tuned configs); one generated before
that name passes ``opt_level=LEVEL``, which every launcher still takes
(``autotune.tuned_at``).
"""

from __future__ import annotations

from tribuild.runtime.backends import (
    BACKENDS,
    DENSE_BACKENDS,
    backend_for,
    force_backend,
    native_takes,
)
from tribuild.runtime.conv import TERNARY_CONV2D, conv2d_shape, ternary_conv2d
from tribuild.runtime.dense import dense_conv2d, unpacked_codes
from tribuild.runtime.linear import (
    GEMV_MAX_ROWS,
    SMALL_GEMM_MAX_ROWS,
    TERNARY_LINEAR,
    linear_shape,
    ternary_linear,
)
from tribuild.runtime.prepared import PREPARED_LAUNCHES, Prepared, Variant, prepared_kernels
from tribuild.runtime.quantize import QUANTIZE_ACTIVATIONS, quantize_activations

__all__ = [
    "BACKENDS",
    "DENSE_BACKENDS",
    "GEMV_MAX_ROWS",
    "PREPARED_LAUNCHES",
    "QUANTIZE_ACTIVATIONS",
    "SMALL_GEMM_MAX_ROWS",
    "TERNARY_CONV2D",
    "TERNARY_LINEAR",
    "Prepared",
    "Variant",
    "backend_for",
    "conv2d_shape",
    "dense_conv2d",
    "force_backend",
    "linear_shape",
    "native_takes",
    "prepared_kernels",
    "quantize_activations",
    "ternary_conv2d",
    "ternary_linear",
    "unpacked_codes",
]
