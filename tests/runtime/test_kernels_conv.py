"""The implicit-GEMM and depthwise convolution kernels, under TRITON_INTERPRET=1 (or on CUDA),
against the float64 oracle (``F.conv2d`` with ``scale · codes``) and the CPU fallback.

Odd spatial sizes, strides and paddings exercise the gather masks; blocks smaller than M,
N and K force several programs and K steps.
"""

import pytest
import torch

pytest.importorskip("triton")

from tests.device import on_device  # noqa: E402
from tests.runtime import oracle  # noqa: E402
from tribuild.runtime.autotune import config  # noqa: E402
from tribuild.runtime.launch import force_backend, ternary_conv2d  # noqa: E402
from tribuild.runtime.packing import pack  # noqa: E402

CONV = config(BLOCK_M=32, BLOCK_N=16, BLOCK_K=16)
DEPTHWISE = config(BLOCK_M=32, BLOCK_N=4)

F32, F16 = torch.float32, torch.float16

# (id, x shape, out channels, kernel, stride, padding, groups, dtype, scale, bias, act, residual,
#  config)
CASES = [
    ("conv3x3-s2-p1", (2, 5, 9, 7), 20, 3, 2, 1, 1, F32, "channel", True, "relu", False, CONV),
    (
        "conv1x1-fp16-residual",
        (1, 8, 5, 6),
        12,
        1,
        1,
        0,
        1,
        F16,
        "tensor",
        False,
        "none",
        True,
        CONV,
    ),
    (
        "conv3x1-s(1,2)-p(1,0)",
        (2, 3, 7, 9),
        6,
        (3, 1),
        (1, 2),
        (1, 0),
        1,
        F32,
        "tensor",
        True,
        "gelu",
        True,
        CONV,
    ),
    ("conv-grouped", (1, 6, 6, 5), 8, 3, 1, 1, 2, F16, "channel", True, "silu", False, CONV),
    (
        "depthwise3x3-p1",
        (2, 6, 7, 5),
        6,
        3,
        1,
        1,
        6,
        F32,
        "channel",
        True,
        "relu6",
        True,
        DEPTHWISE,
    ),
    (
        "depthwise-mult2-s2-fp16",
        (1, 3, 9, 8),
        6,
        5,
        2,
        2,
        3,
        F16,
        "tensor",
        False,
        "sigmoid",
        False,
        DEPTHWISE,
    ),
]


def _pair(v):
    return (v, v) if isinstance(v, int) else v


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_conv_matches_oracle_and_fallback(case):
    _, shape, n, ksize, stride, padding, groups, dtype, scale, bias, act, residual, cfg = case
    gen = torch.Generator().manual_seed(1)
    (kh, kw), (sh, sw), (ph, pw) = _pair(ksize), _pair(stride), _pair(padding)
    bsz, c, h, w = shape
    out_shape = (bsz, n, (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1)
    x = torch.randn(shape, generator=gen).to(dtype)
    codes = torch.randint(-1, 2, (n, c // groups, kh, kw), generator=gen)
    g = torch.rand(n if scale == "channel" else 1, generator=gen) + 0.5
    b = torch.randn(n, generator=gen) if bias else None
    r = torch.randn(out_shape, generator=gen).to(dtype) if residual else None
    kwargs = dict(
        kernel_size=ksize,
        stride=stride,
        padding=padding,
        groups=groups,
        act=act,
        residual=on_device(r),
    )
    args = on_device(x, pack(codes), g, b)
    with force_backend("triton"):
        out = ternary_conv2d(*args, configs=(cfg,), **kwargs)
    with force_backend("torch"):
        fallback = ternary_conv2d(*args, **kwargs)
    assert out.shape == out_shape and out.dtype == dtype
    ref = oracle.conv2d(x, codes, g, b, act, r, (sh, sw), (ph, pw), groups)
    oracle.assert_matches(out, ref)
    oracle.assert_matches(fallback, ref)
    oracle.assert_matches(out, fallback.double())


def test_conv_rejects_groups_that_do_not_divide():
    with pytest.raises(ValueError, match="groups=4 must divide"):
        ternary_conv2d(
            torch.zeros(1, 6, 3, 3),
            torch.zeros(6, 1, dtype=torch.uint8),
            torch.ones(1),
            kernel_size=1,
            groups=4,
        )
