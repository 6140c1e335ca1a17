"""Activation quantization as generated modules call it: per-token int8 absmax, on the Triton
kernel ``act_quant`` or in PyTorch (``ternarize.quantize_activations``).

Terms:
- *operator*: on the Triton backend, a call made while ``torch.compile`` or ``torch.export``
  traces is the operator ``tribuild::quantize_activations`` (``tribuild.runtime.ops``),
  whose implementation is the eager launch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tribuild.runtime import autotune, ops
from tribuild.runtime.autotune import KernelConfig
from tribuild.runtime.backends import backend_for
from tribuild.runtime.prepared import Variant, prepared
from tribuild.runtime.ternarize import quantize_activations as quantize_activations_torch


def quantize_activations(
    x: torch.Tensor,
    *,
    tuned: bool = False,
    configs: Sequence[KernelConfig] | None = None,
    opt_level: int | None = None,
) -> torch.Tensor:
    """Per-token int8 absmax fake quantization
    (``tribuild.runtime.ternarize.quantize_activations``).
    While autograd records (training), the torch path runs on any device: the kernel has no
    backward, the torch path the straight-through estimator's. On the Triton backend a traced
    call is the operator ``tribuild::quantize_activations``. ``opt_level``: the old kernel
    files' ``tuned`` (``autotune.tuned_at``)."""
    if opt_level is not None:
        tuned = autotune.tuned_at(opt_level)
    backend = backend_for(x)
    if backend != "triton" or (x.requires_grad and torch.is_grad_enabled()):
        out = quantize_activations_torch(x)
        if backend == "cpu" and not out.requires_grad and not torch.compiler.is_compiling():
            from tribuild.runtime import native

            native.mark_quantized(out)
        return out
    if configs is None and torch.compiler.is_compiling():
        return QUANTIZE_ACTIVATIONS(x, tuned)
    return quantize_kernel(x, tuned, configs)


def quantize_kernel(
    x: torch.Tensor, tuned: bool, configs: Sequence[KernelConfig] | None = None
) -> torch.Tensor:
    """``quantize_activations`` on the Triton backend."""
    k = x.shape[-1]
    x2 = x.reshape(-1, k).contiguous()
    out = torch.empty_like(x2)
    m = x2.shape[0]
    args = (x2, out, k)

    def prepare() -> tuple[dict[str, Variant], str]:
        from tribuild.runtime.kernels.triton.act_quant import act_quant_kernel

        return {"": Variant(act_quant_kernel, lambda meta: (m,), {})}, f"{x.dtype}|K={k}"

    site = ("act_quant", m, k, x.dtype, x.device, tuned)
    prepared(site, "act_quant", tuned, configs, prepare, args, x.device)(args)
    return out.reshape(x.shape)


QUANTIZE_ACTIVATIONS = ops.define(
    "quantize_activations(Tensor x, bool tuned) -> Tensor",
    quantize_kernel,
    lambda x, tuned: x.new_empty(x.shape),
)
