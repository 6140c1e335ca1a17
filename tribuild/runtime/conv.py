"""Ternary convolutions as generated modules call them: NCHW, the weight packed as
``[N, C/groups · KH · KW]`` codes, on the backend ``backends.backend_for`` picks.

Terms:
- *family*: ``groups == C > 1`` runs the depthwise kernel (``kernels.ternary_depthwise``), any
  other ``groups`` the implicit GEMM (``kernels.ternary_conv2d``); the torch and cpu backends
  run ``dense.dense_conv2d`` on the unpacked codes.
- *operators*: on the Triton backend, a call made while ``torch.compile`` or ``torch.export``
  traces is the operator ``tribuild::ternary_conv2d`` (``tribuild.runtime.ops``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tribuild.runtime import autotune, ops
from tribuild.runtime.autotune import KernelConfig
from tribuild.runtime.backends import backend_for
from tribuild.runtime.dense import dense_conv2d, unpacked_codes
from tribuild.runtime.epilogue import activation_name, apply_epilogue
from tribuild.runtime.packing import packed_cols
from tribuild.runtime.prepared import (
    Variant,
    check_epilogue,
    epilogue_flags,
    epilogue_ptrs,
    epilogue_site,
    m_bucket,
    prepared,
    tile_grid,
)


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def conv2d_shape(
    x: torch.Tensor,
    packed: torch.Tensor,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
) -> list[int]:
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
    check_epilogue(scale, bias, residual, n, tuple(conv2d_shape(x, packed, size, strides, pads)))
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
        *epilogue_ptrs(out, bias, residual),
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
        *epilogue_site(scale, bias, act, residual),
    )

    def prepare() -> tuple[dict[str, Variant], str]:
        flags = {**epilogue_flags(scale, bias, act, residual), "KH": kh, "KW": kw}
        shape_key = (
            f"{x.dtype}|M~{m_bucket(m)},C={c},H={h},W={w},N={n},G={groups},S={sh}x{sw},P={ph}x{pw}"
        )
        if family == "depthwise":
            from tribuild.runtime.kernels.triton.ternary_depthwise import ternary_depthwise_kernel

            return {"": Variant(ternary_depthwise_kernel, tile_grid(m, n), flags)}, shape_key
        from tribuild.runtime.kernels.triton.ternary_conv2d import ternary_conv2d_kernel

        grid = tile_grid(m, n // groups, groups)
        return {"": Variant(ternary_conv2d_kernel, grid, flags)}, shape_key

    prepared(site, family, tuned, configs, prepare, args, x.device)(args)
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
