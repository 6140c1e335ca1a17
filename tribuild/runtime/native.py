"""The ``cpu`` backend's launches: ternary linear layers on the native kernels of
``tribuild.runtime.kernels.cpu`` (2-bit codes; BitLinear's int8 quantization fused, integer
sums; or float32 activations as they are, float32 sums).

Terms:
- *library*: the kernels built for the machine's ISA (``kernels.cpu.build``), loaded once per
  process at the first CPU call in ``auto`` mode (``launch.backend_for``). No compiler, or a
  build that fails, is said once (a ``RuntimeWarning`` naming the layer that asked, the
  compiler's first error and the fallback) and the CPU then runs the torch path.
- *layout*: a packed weight converted once to the kernels' interleaved layout (``tb_repack``,
  ≤ 2 bits a weight), cached while the packed tensor lives and is not modified (keyed by its
  identity and version counter: ``tensor_cache``). The packed tensor, the
  state_dict's, is left as it is. A layout made before (``weight_cache``'s, mapped from its
  file) is *adopted*: kept for the packed tensor as if the first call had made it. A layout
  has no version number of its own: :func:`layout_identity` (the library's name) stands for
  it.
- *takes*: what the kernels run: float32 activations (quantized, or at most
  ``FLOAT_MAX_ROWS`` rows as they are), float32 epilogue operands, ``1 ≤ K ≤ MAX_K`` (so that
  ``|sum c q| ≤ 128 · K ≤ 2^24`` converts to float32 exactly); the rest stays on the torch
  path, never a wrong result.
- *prepared launch*: what a call site's launch needs (the converted weight, the shape, the
  epilogue's constants), made at its first call and kept by :func:`site_key` while the packed
  tensor lives unmodified; ``launch.ternary_linear`` looks it up before its checks, so a
  repeated call does one lookup and the C call.
- *operator*: while ``torch.compile`` or ``torch.export`` traces, a call is
  ``tribuild::cpu_ternary_linear`` (its fake gives the shape), as the Triton launches are.
"""

from __future__ import annotations

import warnings

import torch

from tribuild.runtime import ops
from tribuild.runtime.kernels.cpu import build
from tribuild.runtime.tensor_cache import TensorCache
from tribuild.runtime.ternarize import EPS

# ternary.cpp's ``Act`` codes of the activations (``epilogue.ACTIVATIONS``' names)
ACT_CODES = {"none": 0, "relu": 1, "relu6": 2, "silu": 3, "gelu": 4, "sigmoid": 5}
MAX_K = 1 << 17
# Unquantized calls of more rows stay on the torch path: there PyTorch's float32 GEMM (MKL,
# oneDNN) outruns the float kernel, whose rows gain no integer arithmetic.
FLOAT_MAX_ROWS = 16
_state: dict[str, build.Library | None] = {}  # "lib": the library, None when it cannot be had
_layouts: TensorCache[int, torch.Tensor] = TensorCache()  # id(packed) -> its layout


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
    """Forget the loaded library, the converted weights and the prepared launches: the next
    call loads again (tests)."""
    _state.clear()
    _layouts.clear()
    _sites.clear()


QUANTIZED = "_tribuild_quantized_at"  # a tensor attribute: its version when quantized


def mark_quantized(x: torch.Tensor) -> torch.Tensor:
    """``x`` (``quantize_activations``' output) marked as BitLinear's quantized activations,
    while it is not modified: a linear layer on it may run the int8 kernels, which quantize
    ``x`` again to the same codes (``x = q / s`` with ``max |q| = 127``, or ``max |x|`` under
    the EPS clamp: the absmax and scale come back within a unit in the last place, and
    ``round(x · s')`` is ``q``). So -O2's separate quantization reaches the integer kernels
    as -O3's fusion does, instead of the float-activation path."""
    setattr(x, QUANTIZED, x._version)
    return x


def quantized(x: torch.Tensor) -> bool:
    """Whether ``x`` is marked by :func:`mark_quantized` and unmodified since."""
    return getattr(x, QUANTIZED, None) == x._version


def takes(
    x: torch.Tensor,
    packed: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    quantize: bool,
) -> bool:
    """Whether the kernels run this call (see *takes*; the library loaded first)."""
    return (
        library() is not None
        and (quantize or x.numel() <= FLOAT_MAX_ROWS * x.shape[-1])
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
    hit = _layouts.get(id(packed), packed)
    if hit is not None:
        return hit

    src = packed.contiguous()
    out = torch.empty(lib.cdll.tb_layout_bytes(n, k), dtype=torch.uint8)
    lib.cdll.tb_repack(src.data_ptr(), n, k, out.data_ptr())
    return _layouts.put(id(packed), packed, out)


def adopt_layout(lib: build.Library, packed: torch.Tensor, k: int, converted: torch.Tensor) -> bool:
    """Keep ``converted`` (``layout(lib, packed, n, k)`` made by a library of the same
    :func:`layout_identity`) as ``packed``'s (see *layout*): its first call finds it. False
    (nothing kept) when its size is not the layout's of ``packed``'s shape."""
    n = packed.shape[0]
    if packed.dim() != 2 or converted.numel() != lib.cdll.tb_layout_bytes(n, k):
        return False
    _layouts.put(id(packed), packed, converted)
    return True


def layout_identity(lib: build.Library) -> str:
    """What the bytes of ``lib``'s layouts depend on: the library's file name, which holds
    its ISA and the digest of its sources, compiler and flags (``build.key``); so a cached
    layout is used only by the build that made it (any change to the kernels' sources
    converts again: conservative, never a wrong layout)."""
    return lib.path.name


class Launch:
    """A call site's launch, made once (see *prepared launch*): the C function, the weight in
    the kernels' layout (held, with its address), the shape and the epilogue's constants."""

    __slots__ = ("fn", "weight", "address", "n", "k", "channel_scale", "act", "quantize")

    def __init__(
        self,
        lib: build.Library,
        weight: torch.Tensor,
        n: int,
        k: int,
        channel: bool,
        act: str,
        quantize: bool,
    ):
        self.fn = lib.cdll.tb_linear if quantize else lib.cdll.tb_linear_f32
        self.weight, self.address, self.quantize = weight, weight.data_ptr(), quantize
        self.n, self.k, self.channel_scale, self.act = n, k, channel, ACT_CODES[act]

    def __call__(
        self,
        x: torch.Tensor,
        scale: torch.Tensor,
        bias: torch.Tensor | None,
        residual: torch.Tensor | None,
    ) -> torch.Tensor:
        out = torch.empty((*x.shape[:-1], self.n), dtype=torch.float32)
        m = out.numel() // self.n if self.n else 0
        if m:
            # held in names: a temporary's memory would be freed before the kernel reads it
            x2 = x if x.is_contiguous() else x.contiguous()
            b = None if bias is None else bias.contiguous()
            res = None if residual is None else residual.contiguous()
            args = (
                x2.data_ptr(),
                m,
                self.k,
                self.address,
                self.n,
                scale.data_ptr(),
                self.channel_scale,
                None if b is None else b.data_ptr(),
                None if res is None else res.data_ptr(),
                self.act,
                out.data_ptr(),
            )
            if self.quantize:
                self.fn(*args, EPS, torch.get_num_threads())
            else:
                self.fn(*args, torch.get_num_threads())
        return out


PREPARED_LAUNCHES = 4096  # call sites kept; past it, all are dropped
# site key -> its launch, held while its packed tensor is unmodified; dropped all at once when
# PREPARED_LAUNCHES are kept, not one by one as their tensors die
_sites: TensorCache[tuple[object, ...], Launch] = TensorCache(forget_dead=False)


def site_key(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    act: str | None,
    residual: torch.Tensor | None,
    quantize: bool,
) -> tuple[object, ...]:
    """What a prepared launch depends on beyond the packed tensor's identity and version: with
    equal keys, the checks of the first call hold for the next."""
    return (
        id(packed),
        quantize,
        x.shape,
        x.dtype,
        x.device,
        x.requires_grad,
        act,
        scale.numel(),
        scale.dtype,
        None if bias is None else (bias.shape, bias.dtype),
        None if residual is None else (residual.shape, residual.dtype),
    )


def prepared(key: tuple[object, ...], packed: torch.Tensor) -> Launch | None:
    """The launch prepared for ``key`` (:func:`site_key`) if ``packed`` is still the tensor
    and the version it was made for, else None."""
    return _sites.get(key, packed)


def linear(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    act: str,
    key: tuple[object, ...] | None = None,
    quantize: bool = True,
) -> torch.Tensor:
    """``act(scale · (quantize_activations(x) @ codesᵀ) + bias + residual)`` on the kernels
    (without ``quantize``, ``x`` as it is, summed in float32), arguments checked by the caller
    and :func:`takes`; the library must be loaded. With ``key`` (:func:`site_key`, made before
    ``act`` was canonical), the launch is kept for it."""
    lib = _state["lib"]
    assert lib is not None
    n, k = packed.shape[0], x.shape[-1]
    launch = Launch(lib, layout(lib, packed, n, k), n, k, scale.numel() > 1, act, quantize)
    if key is not None:
        if len(_sites) >= PREPARED_LAUNCHES:
            _sites.clear()
        _sites.put(key, packed, launch)
    return launch(x, scale, bias, residual)


def _linear_op(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    act: str,
    quantize: bool,
) -> torch.Tensor:
    """The operator's implementation: the kernels, or the torch path in a process where they
    cannot be had (a traced graph run where it was not traced)."""
    if library() is None:
        from tribuild.runtime import launch

        with launch.force_backend("torch"):
            return launch.ternary_linear(x, packed, scale, bias, act, residual, quantize=quantize)
    return linear(x, packed, scale, bias, residual, act, None, quantize)


CPU_TERNARY_LINEAR = ops.define(
    "cpu_ternary_linear(Tensor x, Tensor packed, Tensor scale, Tensor? bias, Tensor? residual, "
    "str act, bool quantize) -> Tensor",
    _linear_op,
    lambda x, packed, *_: x.new_empty([*x.shape[:-1], packed.shape[0]]),
)
