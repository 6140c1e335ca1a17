"""The functions generated modules call: ternary linear, ternary conv2d, activation quantization.

Terms:
- *backend*: ``triton`` runs the kernels of ``tribuild.runtime.kernels.triton``; ``torch`` runs
  the same arithmetic in PyTorch (float32 accumulation and epilogue, result in ``x``'s dtype);
  ``cpu`` runs linear calls on float32 activations (BitLinear's quantized ones on int8) on the
  native kernels of ``tribuild.runtime.kernels.cpu`` (``tribuild.runtime.native``) and
  everything else as ``torch`` does (``DENSE_BACKENDS``). In ``auto`` mode (the default) CUDA
  tensors take ``triton``, as do CPU tensors when ``TRITON_INTERPRET=1`` (the interpreter);
  other CPU tensors take ``cpu`` when the native kernels build and load (once per process, at
  the first choice), else ``torch``. The variable is read once, at the first choice for a CPU
  tensor (Triton, too, reads it once, when its kernels are defined): reading the environment
  costs more than a small layer's Python. :func:`force_backend` overrides the choice
  (``torch``: the reference path).
- *packed*: the uint8 ``[N, ceil(K/4)]`` weight of ``tribuild.runtime.packing``; *scale* its
  float32 ``[1]`` or ``[N]`` scale; the epilogue is ``act(scale · acc + bias + residual)``.
- *unpacked cache*: the torch backend decodes a packed weight once and keeps the float32
  codes while the packed tensor lives and is not modified (keyed by its identity and
  version counter).
- *tuned* picks the config set of ``tribuild.runtime.autotune`` (a kernel file's ``TUNED``: at
  -O3, off the interpreter); ``configs`` replaces it. Tuning keys bucket M (tokens or output
  pixels) to the next power of two. Kernel files generated before it had its name pass
  ``opt_level`` (an int, tuned from 3), which the launchers still take.
- *prepared launch*: the kernel, grid and keyword arguments of a launch, made once per call
  site (kernel family, shapes, dtype, device, epilogue flags, tuned) and then reused, so that a
  call neither rebuilds tuning keys nor asks the autotuner again (a tuned one stays valid for
  the tuning cache it was chosen with).
- *variant*: a kernel a call site can run, named by the configs that are for it
  (``KernelConfig.kernel``): ``""``, the family's own, and for a linear layer of at most 16
  rows with packed rows of a multiple of 4 bytes also ``decode`` (``kernels.ternary_decode``,
  split-K; its configs join the GEMV's and the small GEMM's at -O3 only, so the autotuner's
  timing decides whether it runs); for one of more rows that quantizes its input, ``int8``
  (``kernels.ternary_gemm_int8``: ``act_quant_int8_kernel``, then int8 ``tl.dot``; its
  configs join the GEMM's at -O3).
- *quantize*: ``ternary_linear(..., quantize=True)`` is BitLinear,
  ``quantize_activations(x)`` then the product: the decode kernel does both in one launch
  (keeping ``q / s`` exact, where ``quantize_activations`` rounds it to ``x``'s dtype), the
  int8 GEMM keeps ``q`` and ``s`` apart too; the other kernels run ``act_quant`` first.
- *operators*: on the Triton backend, a call made while ``torch.compile`` or ``torch.export``
  traces is the operator ``tribuild::ternary_linear``, ``tribuild::ternary_conv2d`` or
  ``tribuild::quantize_activations`` (``tribuild.runtime.ops``), whose implementation is the
  eager launch; the torch backend's arithmetic is traced as it is.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import torch
import torch.nn.functional as F

from tribuild.runtime import autotune, ops
from tribuild.runtime.autotune import KernelConfig
from tribuild.runtime.epilogue import activation_name, apply_epilogue
from tribuild.runtime.packing import packed_cols, unpack
from tribuild.runtime.ternarize import quantize_activations as quantize_activations_torch

BACKENDS = ("auto", "triton", "torch", "cpu")
GEMV_MAX_ROWS = 4  # up to this many rows (memory-bound decoding) the GEMV kernel runs, not the GEMM
SMALL_GEMM_MAX_ROWS = 16  # up to this many the GEMM runs 16-row tiles (family gemm_small)
# The backends whose convolutions and unquantized linear layers run PyTorch's dense arithmetic.
DENSE_BACKENDS = ("torch", "cpu")
_backend = "auto"
_cpu_backend: str | None = None  # auto mode's choice for CPU tensors, once TRITON_INTERPRET is read
_unpacked: dict[int, tuple[weakref.ref, int, tuple[int, ...], torch.Tensor]] = {}


@contextmanager
def force_backend(name: str) -> Iterator[None]:
    """Run the enclosed calls on backend ``name`` (``auto``, ``triton`` or ``torch``)."""
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


def unpacked_codes(packed: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """The float32 codes of ``packed`` as a weight of ``shape``, decoded once and cached (in a
    traced graph, decoded in the graph: a graph cannot guard on the cache's identities)."""
    if torch.compiler.is_compiling():
        return unpack(packed, shape).float()
    key = id(packed)
    hit = _unpacked.get(key)
    if hit and hit[0]() is packed and hit[1] == packed._version and hit[2] == shape:
        return hit[3]

    def forget(ref: weakref.ref, key: int = key) -> None:
        if _unpacked.get(key, (None,))[0] is ref:
            del _unpacked[key]

    codes = unpack(packed, shape).float()
    _unpacked[key] = (weakref.ref(packed, forget), packed._version, shape, codes)
    return codes


def _check_epilogue(
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    n: int,
    out_shape: tuple[int, ...],
) -> None:
    """Raise ValueError unless the epilogue operands fit ``n`` channels and ``out_shape``."""
    if scale.dtype != torch.float32 or scale.numel() not in (1, n):
        raise ValueError(
            f"scale must be float32 with 1 or {n} elements, got {scale.dtype} {tuple(scale.shape)}"
        )
    if bias is not None and tuple(bias.shape) != (n,):
        raise ValueError(f"bias must have shape ({n},), got {tuple(bias.shape)}")
    if residual is not None and tuple(residual.shape) != out_shape:
        raise ValueError(
            f"residual must have the output's shape {out_shape}, got {tuple(residual.shape)}"
        )


class Variant(NamedTuple):
    """A kernel a call site's configs may name (``KernelConfig.kernel``, ``""`` for the
    family's own): the kernel, its grid of a config's block sizes, its flags, and ``arguments``
    when a launch's arguments are not the call's own: a function of the call's arguments and the
    config's block sizes (scratch tensors added, the input quantized first)."""

    kernel: Any
    grid: Callable[[dict[str, int]], tuple[int, ...]]
    flags: dict[str, Any]
    arguments: Callable[[tuple, dict[str, int]], tuple] | None = None


class Prepared(NamedTuple):
    """A launch made ready once per call site: the kernel, its grid, its keyword arguments
    (flags, block sizes, warps, stages), and what makes its arguments when they are not the
    call's own (``Variant.arguments`` with the config's block sizes bound)."""

    kernel: Any
    grid: tuple[int, ...]
    kwargs: dict[str, Any]
    arguments: Callable[[tuple], tuple] | None = None

    def __call__(self, args: tuple) -> None:
        """Launch on the call's arguments ``args``."""
        if self.arguments is not None:
            args = self.arguments(args)
        self.kernel[self.grid](*args, **self.kwargs)


PREPARED_LAUNCHES = 4096  # prepared launches kept (per distinct shape); past it, all are dropped
_prepared_launches: dict[tuple[object, ...], tuple[autotune.AutotuneCache | None, Prepared]] = {}


def prepared_kernels() -> list[str]:
    """``kernel(block sizes)`` of each prepared launch, oldest first: which kernel and config
    the autotuner chose (``benchmarks/bench_kernels.py`` reports it)."""
    out = []
    for _, p in _prepared_launches.values():
        meta = ",".join(f"{k}={v}" for k, v in p.kwargs.items() if k.startswith(("BLOCK", "SPLIT")))
        out.append(f"{p.kernel.__name__}({meta},warps={p.kwargs['num_warps']})")
    return out


def _bound(
    arguments: Callable[[tuple, dict[str, int]], tuple] | None, meta: dict[str, int]
) -> Callable[[tuple], tuple] | None:
    return None if arguments is None else lambda args: arguments(args, meta)


def _prepared(
    site: tuple[object, ...],
    family: str,
    tuned: bool,
    configs: Sequence[KernelConfig] | None,
    prepare: Callable[[], tuple[dict[str, Variant], str]],
    args: tuple,
    device: torch.device,
) -> Prepared:
    """The launch at ``site`` (a tuple of everything its config and grid depend on), from the
    prepared-launch cache, else made by ``prepare`` (the variants by kernel name, shape key)
    with the config ``autotune.choose`` picks among those whose kernel is a variant, timed on
    ``args`` when there are several (a prepared tuned launch is valid for the tuning cache it
    was chosen with)."""
    if configs is None:
        hit = _prepared_launches.get(site)
        if hit is not None and (hit[0] is None or hit[0] is autotune.default_cache()):
            return hit[1]
    variants, shape_key = prepare()
    wanted = tuple(configs or autotune.configs(family, tuned))
    candidates = tuple(cfg for cfg in wanted if cfg.kernel in variants)
    if not candidates:
        names = ", ".join(repr(name) for name in variants)
        raise ValueError(
            f"no config of {wanted} names a kernel this call can run (here: {names}; the "
            "decode kernel needs at most 16 rows and packed rows of a multiple of 4 bytes)"
        )
    tuning = autotune.default_cache() if len(candidates) > 1 else None

    def make(cfg: KernelConfig) -> Prepared:
        v, meta = variants[cfg.kernel], dict(cfg.meta)
        kwargs = {**v.flags, **cfg.launch_kwargs()}
        return Prepared(v.kernel, v.grid(meta), kwargs, _bound(v.arguments, meta))

    own = variants.get("") or next(iter(variants.values()))
    flag_key = ",".join(f"{k}={v}" for k, v in sorted(own.flags.items()))
    key = f"{family}[{flag_key}]|{shape_key}"
    cfg = autotune.choose(key, candidates, lambda cfg: make(cfg)(args), device, tuning)
    launch = make(cfg)
    if configs is None:
        if len(_prepared_launches) >= PREPARED_LAUNCHES:
            _prepared_launches.clear()
        _prepared_launches[site] = (tuning, launch)
    return launch


def _epilogue_ptrs(
    out: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernels' ``bias`` and ``residual`` pointers (``out`` stands in for absent ones)."""
    return out if bias is None else bias, out if residual is None else residual.contiguous()


def _epilogue_flags(
    scale: torch.Tensor, bias: torch.Tensor | None, act: str, residual: torch.Tensor | None
) -> dict[str, Any]:
    return {
        "CHANNEL_SCALE": scale.numel() > 1,
        "HAS_BIAS": bias is not None,
        "ACT": act,
        "HAS_RESIDUAL": residual is not None,
    }


def _epilogue_site(
    scale: torch.Tensor, bias: torch.Tensor | None, act: str, residual: torch.Tensor | None
) -> tuple[bool, bool, str, bool]:
    """What a prepared launch's epilogue flags depend on."""
    return scale.numel() > 1, bias is not None, act, residual is not None


def _m_bucket(m: int) -> int:
    return 1 << max(m - 1, 0).bit_length()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _tile_grid(m: int, n: int, *rest: int) -> Callable[[dict[str, int]], tuple[int, ...]]:
    """The grid of ``[BLOCK_M, BLOCK_N]`` tiles over an ``m × n`` output, then ``rest`` axes."""
    return lambda meta: (_cdiv(m, meta["BLOCK_M"]), _cdiv(n, meta["BLOCK_N"]), *rest)


def ternary_linear(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    act: str | None = None,
    residual: torch.Tensor | None = None,
    *,
    tuned: bool = False,
    configs: Sequence[KernelConfig] | None = None,
    quantize: bool = False,
    opt_level: int | None = None,
) -> torch.Tensor:
    """``act(scale · (x @ codesᵀ) + bias + residual)`` for ``x [..., K]``: shape ``[..., N]``;
    with ``quantize``, ``x`` first goes through :func:`quantize_activations` (BitLinear), which
    the decode kernel fuses. On the Triton backend a traced call is the operator
    ``tribuild::ternary_linear`` (``configs``, for tests and tuning, is not: it is eager only).
    ``opt_level``: the old kernel files' ``tuned`` (``autotune.tuned_at``)."""
    if opt_level is not None:
        tuned = autotune.tuned_at(opt_level)
    site = None
    if _backend == "cpu" or (_backend == "auto" and _cpu_backend == "cpu"):
        from tribuild.runtime import native  # loaded already: the backend is chosen

        quantize = quantize or native.quantized(x)  # -O2's quantization, as -O3's fusion
        if not torch.compiler.is_compiling():
            site = native.site_key(x, packed, scale, bias, act, residual, quantize)
            if (prepared := native.prepared(site, packed)) is not None:
                return prepared(x, scale, bias, residual)
    act = activation_name(act)
    n, k = packed.shape[0], x.shape[-1]
    if packed.shape[1] != packed_cols(k):
        raise ValueError(f"packed weight {tuple(packed.shape)} does not fit K={k}")
    _check_epilogue(scale, bias, residual, n, (*x.shape[:-1], n))
    backend = backend_for(x)
    if backend == "cpu" and native_takes(x, packed, bias, residual, quantize):
        from tribuild.runtime import native

        if torch.compiler.is_compiling():
            return native.CPU_TERNARY_LINEAR(x, packed, scale, bias, residual, act, quantize)
        return native.linear(x, packed, scale, bias, residual, act, site, quantize)
    if backend != "triton":
        if quantize:
            x = quantize_activations_torch(x)
        acc = x.float() @ unpacked_codes(packed, (n, k)).T
        return apply_epilogue(acc, scale, bias, act, residual, -1).to(x.dtype)
    if configs is None and torch.compiler.is_compiling():
        return TERNARY_LINEAR(x, packed, scale, bias, residual, act, tuned, quantize)
    return _linear_kernel(x, packed, scale, bias, residual, act, tuned, quantize, configs)


def _decode_arguments(args: tuple, meta: dict[str, int]) -> tuple:
    """The decode kernel's arguments from the linear call's: the packed rows as int32 words,
    and its split-K scratch (partial tiles, zeroed tile counters) when it splits K."""
    x2, packed, scale, bias, residual, out, m, n, k, row_bytes = args
    split = meta["SPLIT_K"]
    if split == 1:
        partial = count = out  # unused: the kernel's split-K finish is compiled out
    else:
        partial = torch.empty((split, m, n), dtype=torch.float32, device=out.device)
        tiles = _cdiv(n, meta["BLOCK_N"]) * _cdiv(m, _m_bucket(m))
        count = torch.zeros(tiles, dtype=torch.int32, device=out.device)
    words = packed.view(torch.int32)
    return (x2, words, scale, bias, residual, out, m, n, k, row_bytes // 4, partial, count)


def _int8_arguments(args: tuple, meta: dict[str, int]) -> tuple:
    """The int8 GEMM's arguments from the linear call's: ``x`` quantized to int8 rows and their
    float32 scales (``act_quant_int8_kernel``, at ``act_quant``'s default config), which it
    takes in place of ``x`` and after the shared arguments."""
    from tribuild.runtime.kernels.triton.act_quant import act_quant_int8_kernel

    x2, m, k = args[0], args[6], args[8]
    q = torch.empty((m, k), dtype=torch.int8, device=x2.device)
    s = torch.empty(m, dtype=torch.float32, device=x2.device)
    act_quant_int8_kernel[(m,)](x2, q, s, k, **autotune.configs("act_quant")[0].launch_kwargs())
    return (q, *args[1:], s)


def _linear_kernel(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    act: str,
    tuned: bool,
    quantize: bool = False,
    configs: Sequence[KernelConfig] | None = None,
) -> torch.Tensor:
    """``ternary_linear`` on the Triton backend, arguments checked."""
    n, k = packed.shape[0], x.shape[-1]
    flat = x.dim() == 2  # [M, K] already: no reshapes (a small layer's call notices them)
    x2 = x.contiguous() if flat else x.reshape(-1, k).contiguous()
    m = x2.shape[0]
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    args = (x2, packed, scale, *_epilogue_ptrs(out, bias, residual), out, m, n, k, packed.shape[1])
    if m <= GEMV_MAX_ROWS:
        family = "gemv"
    else:
        family = "gemm_small" if m <= SMALL_GEMM_MAX_ROWS else "gemm"
    site = (
        family,
        m,
        n,
        k,
        x.dtype,
        x.device,
        tuned,
        quantize,
        *_epilogue_site(scale, bias, act, residual),
    )

    def prepare() -> tuple[dict[str, Variant], str]:
        flags = _epilogue_flags(scale, bias, act, residual)
        shape_key = f"{x.dtype}|M~{_m_bucket(m)},N={n},K={k}" + ("|quantize" if quantize else "")
        quantized: Callable[[tuple, dict[str, int]], tuple] | None = None
        if quantize:  # the family's own kernel on the quantized input: two launches
            _quantize_kernel(x2, tuned)  # its config chosen now, not while the product is timed
            quantized = lambda args, meta: (_quantize_kernel(args[0], tuned), *args[1:])  # noqa: E731
        if family == "gemv":
            from tribuild.runtime.kernels.triton.ternary_gemv import ternary_gemv_kernel

            own = Variant(
                ternary_gemv_kernel, lambda meta: (m, _cdiv(n, meta["BLOCK_N"])), flags, quantized
            )
        else:
            from tribuild.runtime.kernels.triton.ternary_gemm import ternary_gemm_kernel

            own = Variant(ternary_gemm_kernel, _tile_grid(m, n), flags, quantized)
        variants = {"": own}
        if quantize and family == "gemm":
            from tribuild.runtime.kernels.triton.ternary_gemm_int8 import ternary_gemm_int8_kernel

            variants["int8"] = Variant(
                ternary_gemm_int8_kernel, _tile_grid(m, n), flags, _int8_arguments
            )
        if (
            m <= SMALL_GEMM_MAX_ROWS
            and packed.shape[1] % 4 == 0
            and packed.is_contiguous()
            and packed.storage_offset() % 4 == 0  # viewed as int32 words
        ):
            from tribuild.runtime.kernels.triton.ternary_decode import ternary_decode_kernel

            block_m = _m_bucket(m)
            variants["decode"] = Variant(
                ternary_decode_kernel,
                lambda meta: (_cdiv(n, meta["BLOCK_N"]), _cdiv(m, block_m), meta["SPLIT_K"]),
                {**flags, "BLOCK_M": block_m, "QUANTIZE": quantize},
                _decode_arguments,
            )
        return variants, shape_key

    _prepared(site, family, tuned, configs, prepare, args, x.device)(args)
    return out if flat else out.reshape(*x.shape[:-1], n)


def linear_shape(x: torch.Tensor, packed: torch.Tensor) -> list:
    """The shape of a ternary linear layer's output: ``x``'s with ``N`` rows of ``packed`` last."""
    return [*x.shape[:-1], packed.shape[0]]


TERNARY_LINEAR = ops.define(
    "ternary_linear(Tensor x, Tensor packed, Tensor scale, Tensor? bias, Tensor? residual, "
    "str act, bool tuned, bool quantize=False) -> Tensor",
    _linear_kernel,
    lambda x, packed, *_: x.new_empty(linear_shape(x, packed)),
)


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


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def conv2d_shape(
    x: torch.Tensor,
    packed: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
) -> list:
    """The NCHW shape of a ternary convolution's output (``N``: the rows of ``packed``)."""
    b, _, h, w = x.shape
    return [
        b,
        packed.shape[0],
        (h + 2 * padding[0] - kernel_size[0]) // stride[0] + 1,
        (w + 2 * padding[1] - kernel_size[1]) // stride[1] + 1,
    ]


def ternary_conv2d(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    kernel_size: int | tuple[int, int],
    stride: int | tuple[int, int] = 1,
    padding: int | tuple[int, int] = 0,
    groups: int = 1,
    act: str | None = None,
    residual: torch.Tensor | None = None,
    tuned: bool = False,
    configs: Sequence[KernelConfig] | None = None,
    opt_level: int | None = None,
) -> torch.Tensor:
    """The fused ternary convolution of NCHW ``x``: shape ``[B, N, OH, OW]``.

    ``groups == C > 1`` runs the depthwise kernel, any other ``groups`` the implicit GEMM.
    On the Triton backend a traced call is the operator ``tribuild::ternary_conv2d``.
    ``opt_level``: the old kernel files' ``tuned`` (``autotune.tuned_at``).
    """
    if opt_level is not None:
        tuned = autotune.tuned_at(opt_level)
    act = activation_name(act)
    size, strides, pads = _pair(kernel_size), _pair(stride), _pair(padding)
    b, c, h, w = x.shape
    n = packed.shape[0]
    if c % groups or n % groups:
        raise ValueError(f"groups={groups} must divide the channels (in {c}, out {n})")
    shape = (n, c // groups, *size)
    if packed.shape[1] != packed_cols(c // groups * size[0] * size[1]):
        raise ValueError(
            f"packed weight {tuple(packed.shape)} does not fit a weight of shape {shape}"
        )
    _check_epilogue(scale, bias, residual, n, tuple(conv2d_shape(x, packed, size, strides, pads)))
    if backend_for(x) != "triton":
        acc = dense_conv2d(x.float(), unpacked_codes(packed, shape), None, strides, pads, groups)
        return apply_epilogue(acc, scale, bias, act, residual, 1).to(x.dtype)
    if configs is None and torch.compiler.is_compiling():
        return TERNARY_CONV2D(
            x, packed, scale, bias, residual, size, strides, pads, groups, act, tuned
        )
    return _conv2d_kernel(
        x, packed, scale, bias, residual, size, strides, pads, groups, act, tuned, configs
    )


def _conv2d_kernel(
    x: torch.Tensor,
    packed: torch.Tensor,
    scale: torch.Tensor,
    bias: torch.Tensor | None,
    residual: torch.Tensor | None,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    groups: int,
    act: str,
    tuned: bool,
    configs: Sequence[KernelConfig] | None = None,
) -> torch.Tensor:
    """``ternary_conv2d`` on the Triton backend, arguments checked."""
    (kh, kw), (sh, sw), (ph, pw) = kernel_size, stride, padding
    x = x.contiguous()
    b, n = x.shape[0], packed.shape[0]
    _, c, h, w = x.shape
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    out = torch.empty((b, n, oh, ow), dtype=x.dtype, device=x.device)
    m = b * oh * ow
    args = (
        x,
        packed,
        scale,
        *_epilogue_ptrs(out, bias, residual),
        out,
        c,
        h,
        w,
        n,
        oh,
        ow,
        m,
        packed.shape[1],
        sh,
        sw,
        ph,
        pw,
    )
    family = "depthwise" if groups == c > 1 else "conv2d"
    site = (
        *(family, b, c, h, w, n, kh, kw, sh, sw, ph, pw, groups, x.dtype, x.device, tuned),
        *_epilogue_site(scale, bias, act, residual),
    )

    def prepare() -> tuple[dict[str, Variant], str]:
        flags = {**_epilogue_flags(scale, bias, act, residual), "KH": kh, "KW": kw}
        shape_key = (
            f"{x.dtype}|M~{_m_bucket(m)},C={c},H={h},W={w},N={n},G={groups},S={sh}x{sw},P={ph}x{pw}"
        )
        if family == "depthwise":
            from tribuild.runtime.kernels.triton.ternary_depthwise import ternary_depthwise_kernel

            return {"": Variant(ternary_depthwise_kernel, _tile_grid(m, n), flags)}, shape_key
        from tribuild.runtime.kernels.triton.ternary_conv2d import ternary_conv2d_kernel

        grid = _tile_grid(m, n // groups, groups)
        return {"": Variant(ternary_conv2d_kernel, grid, flags)}, shape_key

    _prepared(site, family, tuned, configs, prepare, args, x.device)(args)
    return out


TERNARY_CONV2D = ops.define(
    "ternary_conv2d(Tensor x, Tensor packed, Tensor scale, Tensor? bias, Tensor? residual, "
    "int[2] kernel_size, int[2] stride, int[2] padding, int groups, str act, bool tuned) "
    "-> Tensor",
    _conv2d_kernel,
    lambda x, packed, scale, bias, residual, size, stride, padding, *_: x.new_empty(
        conv2d_shape(x, packed, size, stride, padding)
    ),
)


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
    if backend_for(x) != "triton" or (x.requires_grad and torch.is_grad_enabled()):
        out = quantize_activations_torch(x)
        if backend_for(x) == "cpu" and not out.requires_grad and not torch.compiler.is_compiling():
            from tribuild.runtime import native

            native.mark_quantized(out)
        return out
    if configs is None and torch.compiler.is_compiling():
        return QUANTIZE_ACTIVATIONS(x, tuned)
    return _quantize_kernel(x, tuned, configs)


def _quantize_kernel(
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
    _prepared(site, "act_quant", tuned, configs, prepare, args, x.device)(args)
    return out.reshape(x.shape)


QUANTIZE_ACTIVATIONS = ops.define(
    "quantize_activations(Tensor x, bool tuned) -> Tensor",
    _quantize_kernel,
    lambda x, tuned: x.new_empty(x.shape),
)
