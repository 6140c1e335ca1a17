"""Which backend runs a ternary call: ``triton``, ``torch`` or ``cpu``.

Terms:
- *backend*: ``triton`` runs the kernels of ``tribuild.runtime.kernels.triton``; ``torch`` runs
  the same arithmetic in PyTorch (float32 accumulation and epilogue, result in ``x``'s dtype);
  ``cpu`` runs linear calls on float32 activations (BitLinear's quantized ones on int8) on the
  native kernels of ``tribuild.runtime.kernels.cpu`` (``tribuild.runtime.native``) and
  everything else as ``torch`` does (``DENSE_BACKENDS``).
- *auto* mode (the default): CUDA tensors take ``triton``, as do CPU tensors when
  ``TRITON_INTERPRET=1`` (the interpreter); other CPU tensors take ``cpu`` when the native
  kernels build and load (once per process, at the first choice), else ``torch``. The
  variable is read once, at the first choice for a CPU tensor (Triton, too, reads it once,
  when its kernels are defined): reading the environment costs more than a small layer's
  Python. :func:`force_backend` overrides the choice (``torch``: the reference path).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from tribuild.runtime import autotune

BACKENDS = ("auto", "triton", "torch", "cpu")
# The backends whose convolutions and unquantized linear layers run PyTorch's dense arithmetic.
DENSE_BACKENDS = ("torch", "cpu")
_backend = "auto"
_cpu_backend: str | None = None  # auto mode's choice for CPU tensors, once TRITON_INTERPRET is read


@contextmanager
def force_backend(name: str) -> Iterator[None]:
    """Run the enclosed calls on backend ``name`` (``auto``, ``triton``, ``torch`` or ``cpu``)."""
    global _backend
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {name!r}")
    previous, _backend = _backend, name
    try:
        yield
    finally:
        _backend = previous


def backend_for(x: torch.Tensor) -> str:
    """The backend a call on ``x`` takes now: ``triton``, ``torch`` or ``cpu``."""
    global _cpu_backend
    if _backend != "auto":
        return _backend
    if x.is_cuda:
        return "triton"
    if _cpu_backend is None:
        if autotune.interpreted():
            _cpu_backend = "triton"
        else:
            from tribuild.runtime import native

            _cpu_backend = "torch" if native.library() is None else "cpu"
    return _cpu_backend


def native_chosen() -> bool:
    """Whether CPU calls run on the ``cpu`` backend, forced or chosen already (then the native
    library is loaded): what ``ternary_linear`` asks before it looks for a prepared launch."""
    return _backend == "cpu" or (_backend == "auto" and _cpu_backend == "cpu")


def native_takes(
    x: torch.Tensor,
    packed: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    quantize: bool,
) -> bool:
    """Whether the ``cpu`` backend's kernels run this linear call (``native.takes``)."""
    from tribuild.runtime import native

    return native.takes(x, packed, bias, residual, quantize)
