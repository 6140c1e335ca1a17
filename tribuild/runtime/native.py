"""The ``cpu`` backend's launches: BitLinear layers on the native kernels of
``tribuild.runtime.kernels.cpu`` (2-bit codes, int8 activations, the quantization fused).

Terms:
- *library*: the kernels built for the machine's ISA (``kernels.cpu.build``), loaded once per
  process at the first CPU call in ``auto`` mode (``launch.backend_for``). No compiler, or a
  build that fails, is said once (a ``RuntimeWarning`` naming the layer that asked, the
  compiler's first error and the fallback) and the CPU then runs the torch path.
- *layout*: a packed weight converted once to the kernels' interleaved layout (``tb_repack``,
  ≤ 2 bits a weight), cached while the packed tensor lives and is not modified (keyed by its
  identity and version counter, as ``launch``'s unpacked cache). The packed tensor, the
  state_dict's, is left as it is.
- *takes*: what the kernels run: a quantized (BitLinear) call on float32 activations, float32
  epilogue operands, ``1 ≤ K ≤ MAX_K`` (the int32 sums stay exact and below 2^24 · 2^7); the
  rest stays on the torch path, never a wrong result.
- *operator*: while ``torch.compile`` or ``torch.export`` traces, a call is
  ``tribuild::cpu_ternary_linear`` (its fake gives the shape), as the Triton launches are.
"""

from __future__ import annotations

import warnings
import weakref
from typing import NamedTuple

import torch

from tribuild.runtime import ops
from tribuild.runtime.kernels.cpu import build
from tribuild.runtime.ternarize import EPS

# ternary.cpp's ``Act`` codes of the activations (``epilogue.ACTIVATIONS``' names)
ACT_CODES = {"none": 0, "relu": 1, "relu6": 2, "silu": 3, "gelu": 4, "sigmoid": 5}
MAX_K = 1 << 17
_state: dict[str, build.Library | None] = {}  # "lib": the library, None when it cannot be had
_layouts: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}


def library(asking: str = "a ternary layer") -> build.Library | None:
    """The loaded kernels, built at the first call (``asking`` names the layer for a warning),
    or None when they cannot be had (said once)."""
    if "lib" in _state:
        return _state["lib"]
    lib = None
    try:
        compiler = build.find_compiler()
        if compiler is None:
            warnings.warn(
                "tribuild: no C++ compiler found ($CXX, g++, c++ or clang++): ternary layers on "
                "the CPU run on the torch path (float32 codes); install g++ for the native kernels",
                RuntimeWarning,
                stacklevel=3,
            )
        else:
            lib = build.build_and_load(build.wanted_isa(), compiler)
    except build.BuildError as e:
        warnings.warn(
            f"tribuild: the CPU kernels failed to compile for {asking}: {e.first_error}; "
            "every ternary layer on the CPU runs on the torch path",
            RuntimeWarning,
            stacklevel=3,
        )
    except (OSError, ValueError) as e:
        warnings.warn(
            f"tribuild: the CPU kernels could not be loaded for {asking} ({e}); "
            "every ternary layer on the CPU runs on the torch path",
            RuntimeWarning,
            stacklevel=3,
        )
    _state["lib"] = lib
    return lib


def reset() -> None:
    """Forget the loaded library and the converted weights: the next call loads again (tests)."""
    _state.clear()
    _layouts.clear()


def takes(
    x: torch.Tensor,
    packed: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    quantize: bool,
) -> bool:
    """Whether the kernels run this call (see *takes*; the library loaded first)."""
    return (
        quantize
        and library() is not None
        and x.dtype == torch.float32
        and packed.dtype == torch.uint8
        and 0 < x.shape[-1] <= MAX_K
        and (bias is None or bias.dtype == torch.float32)
        and (residual is None or residual.dtype == torch.float32)
        and not x.requires_grad
        and not packed.is_cuda
    )


def layout(lib: build.Library, packed: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """``packed`` in the kernels' layout, converted once (see *layout*)."""
    key = id(packed)
    hit = _layouts.get(key)
    if hit and hit[0]() is packed and hit[1] == packed._version:
        return hit[2]

    def forget(ref: weakref.ref, key: int = key) -> None:
        if _layouts.get(key, (None,))[0] is ref:
            del _layouts[key]

    src = packed.contiguous()
    out = torch.empty(lib.cdll.tb_layout_bytes(n, k), dtype=torch.uint8)
    lib.cdll.tb_repack(src.data_ptr(), n, k, out.data_ptr())
    _layouts[key] = (weakref.ref(packed, forget), packed._version, out)
    return out


class Call(NamedTuple):
    """What a call passes the kernel besides ``x`` and ``out``."""

    weight: int
    scale: int
    channel_scale: int
    bias: int | None
    act: int


def linear(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    act: str,
) -> torch.Tensor:
    """``act(scale · (quantize_activations(x) @ codesᵀ) + bias + residual)`` on the kernels,
    arguments checked by the caller and :func:`takes`; the library must be loaded."""
    lib = _state["lib"]
    assert lib is not None
    n, k = packed.shape[0], x.shape[-1]
    x2 = x if x.dim() == 2 and x.is_contiguous() else x.reshape(-1, k).contiguous()
    m = x2.shape[0]
    out = torch.empty((*x.shape[:-1], n), dtype=torch.float32)
    if m:
        w = layout(lib, packed, n, k)
        # held in names: a temporary's memory would be freed before the kernel reads it
        b = None if bias is None else bias.contiguous()
        res = None if residual is None else residual.contiguous()
        lib.cdll.tb_linear(
            x2.data_ptr(),
            m,
            k,
            w.data_ptr(),
            n,
            scale.data_ptr(),
            scale.numel() > 1,
            None if b is None else b.data_ptr(),
            None if res is None else res.data_ptr(),
            ACT_CODES[act],
            out.data_ptr(),
            EPS,
            torch.get_num_threads(),
        )
    return out


def _linear_op(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    act: str,
) -> torch.Tensor:
    """The operator's implementation: the kernels, or the torch path in a process where they
    cannot be had (a traced graph run where it was not traced)."""
    if library() is None:
        from tribuild.runtime import launch

        with launch.force_backend("torch"):
            return launch.ternary_linear(x, packed, scale, bias, act, residual, quantize=True)
    return linear(x, packed, scale, bias, residual, act)


CPU_TERNARY_LINEAR = ops.define(
    "cpu_ternary_linear(Tensor x, Tensor packed, Tensor scale, Tensor? bias, Tensor? residual, "
    "str act) -> Tensor",
    _linear_op,
    lambda x, packed, *_: x.new_empty([*x.shape[:-1], packed.shape[0]]),
)
