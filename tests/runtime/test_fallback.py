"""The PyTorch backend: equal to the float64 oracle, its unpacked-weight cache, the backend
choice, and the launchers' argument checks. Needs torch only (no triton)."""

import gc
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tests.runtime import oracle
from tribuild.runtime import backends, native
from tribuild.runtime.launch import (
    backend_for,
    force_backend,
    ternary_conv2d,
    ternary_linear,
    unpacked_codes,
)
from tribuild.runtime.packing import pack

ACTS = sorted(oracle.ACTS)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.integers(1, 9),
    st.integers(1, 12),
    st.integers(1, 30),
    st.sampled_from(ACTS),
    st.booleans(),
    st.booleans(),
    st.sampled_from([torch.float32, torch.float16]),
)
def test_linear_matches_oracle(m, n, k, act, channel, residual, dtype):
    gen = torch.Generator().manual_seed(m + 10 * n + 100 * k)
    x = torch.randn(m, k, generator=gen).to(dtype)
    codes = torch.randint(-1, 2, (n, k), generator=gen)
    g = torch.rand(n if channel else 1, generator=gen) + 0.1
    b = torch.randn(n, generator=gen)
    r = torch.randn(m, n, generator=gen).to(dtype) if residual else None
    with force_backend("torch"):
        out = ternary_linear(x, pack(codes), g, b, act, r)
    assert out.dtype == dtype
    oracle.assert_matches(out, oracle.linear(x, codes, g, b, act, r))


# (groups, input H x W, kernel, stride, padding): a window covering the whole input (one output
# position, unpadded) runs as a matrix product; padded or grouped ones stay convolutions
CONVS = [
    (1, (7, 6), 3, 2, 1),
    (2, (7, 6), 3, 2, 1),
    (4, (7, 6), 3, 2, 1),
    (1, (5, 5), 5, 1, 0),
    (1, (3, 3), 3, 2, 0),
    (1, (3, 3), 3, 1, 1),
    (2, (3, 3), 3, 1, 0),
]


@pytest.mark.parametrize("groups, size, kernel, stride, padding", CONVS)
def test_conv_matches_oracle(groups, size, kernel, stride, padding):
    gen = torch.Generator().manual_seed(groups + kernel)
    x = torch.randn(2, 4, *size, generator=gen)
    codes = torch.randint(-1, 2, (8, 4 // groups, kernel, kernel), generator=gen)
    g, b = torch.rand(8, generator=gen) + 0.1, torch.randn(8, generator=gen)
    with force_backend("torch"):
        out = ternary_conv2d(
            x,
            pack(codes),
            g,
            b,
            kernel_size=kernel,
            stride=stride,
            padding=padding,
            groups=groups,
            act="relu",
        )
    oracle.assert_matches(out, oracle.conv2d(x, codes, g, b, "relu", None, stride, padding, groups))


def test_unpacked_codes_are_cached_until_the_buffer_changes_or_dies():
    packed = pack(torch.tensor([[1, -1, 0, 1, 1]]))
    first = unpacked_codes(packed, (1, 5))
    assert unpacked_codes(packed, (1, 5)) is first
    assert first.tolist() == [[1.0, -1.0, 0.0, 1.0, 1.0]]
    packed[0, 0] = 0b10101010  # in-place edit: the version counter moves
    second = unpacked_codes(packed, (1, 5))
    assert second is not first and second.tolist() == [[-1.0, -1.0, -1.0, -1.0, 1.0]]
    alive = weakref.ref(second)
    del packed, first, second
    gc.collect()
    assert alive() is None  # the cache let go of the codes with the buffer


def test_backend_choice(monkeypatch):
    x = torch.zeros(1)
    monkeypatch.setattr(backends, "_cpu_backend", None)  # as in a fresh process
    assert backend_for(x) == "triton"  # conftest sets TRITON_INTERPRET=1
    monkeypatch.delenv("TRITON_INTERPRET")
    assert backend_for(x) == "triton"  # read once: the kernels were defined for the interpreter
    monkeypatch.setattr(backends, "_cpu_backend", None)
    # the native CPU kernels where they build (tests/runtime/test_cpu_kernels_build.py), else torch
    assert backend_for(x) == ("torch" if native.library() is None else "cpu")
    with force_backend("triton"):
        assert backend_for(x) == "triton"
    with pytest.raises(ValueError, match="backend must be one of"):
        with force_backend("cuda"):
            pass


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(packed=torch.zeros(3, 3, dtype=torch.uint8)), "does not fit K=5"),
        (dict(scale=torch.ones(2)), "scale must be float32 with 1 or 3"),
        (dict(scale=torch.ones(1, dtype=torch.float64)), "scale must be float32"),
        (dict(bias=torch.ones(4)), r"bias must have shape \(3,\)"),
        (dict(residual=torch.ones(2, 4)), r"residual must have the output's shape \(2, 3\)"),
        (dict(act="tanh"), "unknown activation 'tanh'"),
    ],
)
def test_linear_rejects_bad_arguments(kwargs, message):
    args = (
        dict(x=torch.ones(2, 5), packed=torch.zeros(3, 2, dtype=torch.uint8), scale=torch.ones(1))
        | kwargs
    )
    with force_backend("torch"), pytest.raises(ValueError, match=message):
        ternary_linear(**args)
