"""Prepared launches of the Triton kernels: made once per call site, then reused.

Terms:
- *prepared launch*: the kernel, grid and keyword arguments of a launch, made once per call
  site (kernel family, shapes, dtype, device, epilogue flags, tuned) and then reused, so that a
  call neither rebuilds tuning keys nor asks the autotuner again (a tuned one stays valid for
  the tuning cache it was chosen with).
- *tuned* picks the config set of ``tribuild.runtime.autotune`` (a kernel file's ``TUNED``);
  ``configs`` replaces it. Tuning keys bucket M (tokens or output pixels) to the next power
  of two (``m_bucket``).
- *variant*: a kernel a call site can run, named by the configs that are for it
  (``KernelConfig.kernel``): ``""``, the family's own, and the others a launcher offers beside
  it (``linear``'s ``decode`` and ``int8``); the autotuner's timing decides among them.
- *epilogue*: ``act(scale · acc + bias + residual)``; its operands are checked once per call
  (``check_epilogue``) and become the kernels' flags and pointers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import torch

from tribuild.runtime import autotune
from tribuild.runtime.autotune import KernelConfig

# A kernel's positional arguments, tensors and ints in the kernel's order: unchecked here, as
# Triton's launch takes them.
Args = tuple[Any, ...]
Grid = Callable[[dict[str, int]], tuple[int, ...]]  # a config's block sizes -> the grid


class Kernel(Protocol):
    """A ``@triton.jit`` kernel as the launcher uses it (Triton has no type hints)."""

    __name__: str

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., object]: ...


class Variant(NamedTuple):
    """A kernel a call site's configs may name (``KernelConfig.kernel``, ``""`` for the
    family's own): the kernel, its grid of a config's block sizes, its flags, and ``arguments``
    when a launch's arguments are not the call's own: a function of the call's arguments and the
    config's block sizes (scratch tensors added, the input quantized first)."""

    kernel: Kernel
    grid: Grid
    flags: dict[str, Any]  # the kernel's ``tl.constexpr`` flags: bools, ints, names
    arguments: Callable[[Args, dict[str, int]], Args] | None = None


class Prepared(NamedTuple):
    """A launch made ready once per call site: the kernel, its grid, its keyword arguments
    (flags, block sizes, warps, stages), and what makes its arguments when they are not the
    call's own (``Variant.arguments`` with the config's block sizes bound)."""

    kernel: Kernel
    grid: tuple[int, ...]
    kwargs: dict[str, Any]  # as ``Variant.flags``, with the config's sizes, warps and stages
    arguments: Callable[[Args], Args] | None = None

    def __call__(self, args: Args) -> None:
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
    arguments: Callable[[Args, dict[str, int]], Args] | None, meta: dict[str, int]
) -> Callable[[Args], Args] | None:
    return None if arguments is None else lambda args: arguments(args, meta)


def prepared(
    site: tuple[object, ...],
    family: str,
    tuned: bool,
    configs: Sequence[KernelConfig] | None,
    prepare: Callable[[], tuple[dict[str, Variant], str]],
    args: Args,
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


def check_epilogue(
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


def epilogue_ptrs(
    out: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernels' ``bias`` and ``residual`` pointers (``out`` stands in for absent ones)."""
    return out if bias is None else bias, out if residual is None else residual.contiguous()


def epilogue_flags(
    scale: torch.Tensor, bias: torch.Tensor | None, act: str, residual: torch.Tensor | None
) -> dict[str, Any]:
    return {
        "CHANNEL_SCALE": scale.numel() > 1,
        "HAS_BIAS": bias is not None,
        "ACT": act,
        "HAS_RESIDUAL": residual is not None,
    }


def epilogue_site(
    scale: torch.Tensor, bias: torch.Tensor | None, act: str, residual: torch.Tensor | None
) -> tuple[bool, bool, str, bool]:
    """What a prepared launch's epilogue flags depend on."""
    return scale.numel() > 1, bias is not None, act, residual is not None


def m_bucket(m: int) -> int:
    return 1 << max(m - 1, 0).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tile_grid(m: int, n: int, *rest: int) -> Grid:
    """The grid of ``[BLOCK_M, BLOCK_N]`` tiles over an ``m × n`` output, then ``rest`` axes."""
    return lambda meta: (cdiv(m, meta["BLOCK_M"]), cdiv(n, meta["BLOCK_N"]), *rest)
