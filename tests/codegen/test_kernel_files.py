"""Generated kernel files, one per shape class, imported from disk and run under
TRITON_INTERPRET=1 (or on CUDA, tests/device.py) against the same file on the torch
backend (the launcher's CPU arithmetic, itself checked against a float64 oracle in
tests/runtime): odd sizes that exercise every mask, fp32 and fp16, each epilogue flag, and the
-O3 file (tuned configs, which fall back to the default under the interpreter)."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tests.device import on_device  # noqa: E402
from tribuild.codegen.kernels import (  # noqa: E402
    act_quant_spec,
    conv_spec,
    epilogue,
    kernel_source,
    linear_spec,
)  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402
from tribuild.runtime.packing import pack  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16}

# (id, spec, input shape)
LINEAR = [
    (
        "gemv-fp32-plain",
        linear_spec({"in_features": 45, "out_features": 19}, "float32", epilogue(), False),
        (3, 45),
    ),
    (
        "gemv-fp16-all",
        linear_spec(
            {"in_features": 13, "out_features": 21},
            "float16",
            epilogue("relu", True, True, True),
            False,
        ),
        (2, 13),
    ),
    (
        "gemm-fp32-gelu",
        linear_spec(
            {"in_features": 50, "out_features": 33},
            "float32",
            epilogue("gelu", True, True, False),
            True,
        ),
        (37, 50),
    ),
    (
        "gemm-fp16-residual",
        linear_spec(
            {"in_features": 9, "out_features": 17},
            "float16",
            epilogue("silu", False, False, True),
            False,
        ),
        (2, 5, 9),
    ),
]
CONV = [
    (
        "conv-fp32-relu-res",
        {"in_channels": 3, "out_channels": 5, "kernel": 3, "stride": 1, "padding": 1, "groups": 1},
        "float32",
        epilogue("relu", True, True, True),
        (2, 3, 7, 6),
    ),
    (
        "conv-fp16-strided",
        {"in_channels": 4, "out_channels": 6, "kernel": 3, "stride": 2, "padding": 0, "groups": 2},
        "float16",
        epilogue("relu6", False, False, False),
        (1, 4, 9, 9),
    ),
    (
        "conv-1x1-tuned",
        {"in_channels": 6, "out_channels": 7, "kernel": 1, "stride": 1, "padding": 0, "groups": 1},
        "float32",
        epilogue("none", True, False, False),
        (2, 6, 5, 5),
    ),
    (
        "depthwise-fp32",
        {"in_channels": 5, "out_channels": 5, "kernel": 3, "stride": 2, "padding": 1, "groups": 5},
        "float32",
        epilogue("silu", True, True, True),
        (2, 5, 7, 7),
    ),
    (
        "depthwise-fp16",
        {"in_channels": 3, "out_channels": 3, "kernel": 5, "stride": 1, "padding": 2, "groups": 3},
        "float16",
        epilogue("sigmoid", False, True, False),
        (1, 3, 6, 5),
    ),
]


def load(spec, tmp_path):
    path = tmp_path / f"{spec.key}.py"
    path.write_text(kernel_source(spec))
    module_spec = importlib.util.spec_from_file_location(f"kernel_{spec.key}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def operands(n: int, k_shape: tuple, e: dict, out_shape: tuple, dtype, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(-1, 2, (n, *k_shape), generator=gen)
    scale = torch.rand(n if e["channel_scale"] else 1, generator=gen) + 0.5
    bias = torch.randn(n, generator=gen) if e["bias"] else None
    residual = torch.randn(out_shape, generator=gen).to(dtype) if e["residual"] else None
    return pack(codes), scale, bias, residual


def both_backends(run, *args):
    """``run`` on the test device's copies of ``args``, on the Triton and torch backends;
    results on the CPU."""
    args = [on_device(a) for a in args]
    with torch.no_grad():
        with force_backend("triton"):
            got = run(*args)
        with force_backend("torch"):
            want = run(*args)
    return got.cpu(), want.cpu()


def assert_close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 2e-2 if dtype == torch.float16 else 1e-4
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("case", LINEAR, ids=[c[0] for c in LINEAR])
def test_linear_kernel_file(case, tmp_path):
    _, spec, shape = case
    s, e, dtype = dict(spec.shape), dict(spec.epilogue), DTYPES[spec.dtype]
    kernel = load(spec, tmp_path)
    assert (kernel.IN_FEATURES, kernel.OUT_FEATURES, kernel.ACT) == (
        s["in_features"],
        s["out_features"],
        e["act"],
    )
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    packed, scale, bias, residual = operands(
        s["out_features"], (s["in_features"],), e, (*shape[:-1], s["out_features"]), dtype
    )
    assert_close(*both_backends(kernel.run, x, packed, scale, bias, residual), dtype)


@pytest.mark.parametrize("case", CONV, ids=[c[0] for c in CONV])
def test_conv_kernel_file(case, tmp_path):
    name, args, dtype_name, epi, shape = case
    spec = conv_spec(args, dtype_name, epi, tuned=name.endswith("tuned"))
    assert spec.family == ("depthwise" if name.startswith("depthwise") else "conv2d")
    e, dtype, k = dict(epi), DTYPES[dtype_name], args["kernel"]
    kernel = load(spec, tmp_path)
    b, _, h, w = shape
    oh, ow = ((d + 2 * args["padding"] - k) // args["stride"] + 1 for d in (h, w))
    n = args["out_channels"]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    packed, scale, bias, residual = operands(
        n, (args["in_channels"] // args["groups"], k, k), e, (b, n, oh, ow), dtype
    )
    assert_close(*both_backends(kernel.run, x, packed, scale, bias, residual), dtype)


@pytest.mark.parametrize("dtype_name", ["float32", "float16"])
def test_act_quant_kernel_file(dtype_name, tmp_path):
    dtype = DTYPES[dtype_name]
    kernel = load(act_quant_spec(37, dtype_name, tuned=True), tmp_path)
    assert kernel.FEATURES == 37
    x = (torch.randn(3, 5, 37, generator=torch.Generator().manual_seed(4)) * 3).to(dtype)
    got, want = both_backends(kernel.run, x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_identical_specs_share_a_key_and_different_ones_do_not():
    a = linear_spec({"in_features": 8, "out_features": 4}, "float32", epilogue(), False)
    b = linear_spec({"in_features": 8, "out_features": 4}, "float32", epilogue(), False)
    c = linear_spec({"in_features": 8, "out_features": 4}, "float32", epilogue("relu"), False)
    assert a.key == b.key != c.key
    assert kernel_source(a) == kernel_source(b)
    assert a.key.startswith("linear_4x8_")


# (id, conv args (None: a linear layer 70 -> 9), input shape, zeroed K range,
#  zeroed output channels)
SKIPS = [
    ("linear", None, (5, 70), (32, 64), [1, 4]),
    (
        "conv-channels",
        {"in_channels": 3, "out_channels": 6, "kernel": 3, "stride": 1, "padding": 1, "groups": 1},
        (2, 3, 5, 4),
        None,
        [1, 4],
    ),
    (
        "conv-k-blocks",
        {"in_channels": 8, "out_channels": 5, "kernel": 3, "stride": 2, "padding": 1, "groups": 1},
        (2, 8, 7, 6),
        (36, 72),
        [2],
    ),
    (
        "conv-k-blocks-only",
        {"in_channels": 8, "out_channels": 5, "kernel": 3, "stride": 1, "padding": 0, "groups": 1},
        (1, 8, 5, 5),
        (0, 36),
        [],
    ),
    (
        "grouped",
        {"in_channels": 6, "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "groups": 2},
        (2, 6, 5, 5),
        None,
        [0, 5, 6],
    ),
    (
        "depthwise",
        {"in_channels": 6, "out_channels": 6, "kernel": 3, "stride": 2, "padding": 1, "groups": 6},
        (2, 6, 7, 7),
        None,
        [1, 2, 5],
    ),
    (
        "depthwise-x2",
        {"in_channels": 3, "out_channels": 6, "kernel": 3, "stride": 1, "padding": 1, "groups": 3},
        (1, 3, 4, 5),
        None,
        [3],
    ),
]


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("case", SKIPS, ids=[c[0] for c in SKIPS])
def test_zero_skip_kernel_file_matches_the_plain_one(case, backend, tmp_path):
    _, args, shape, k_range, dead = case
    gen = torch.Generator().manual_seed(5)
    epi = epilogue("relu", True, True, True)
    if args is None:
        n, k = 9, 70
        spec = linear_spec(
            {"in_features": k, "out_features": n}, "float32", epi, False, zero_skip=True
        )
        plain = linear_spec({"in_features": k, "out_features": n}, "float32", epi, False)
        codes, out_shape = torch.randint(-1, 2, (n, k), generator=gen), (*shape[:-1], n)
    else:
        spec, plain = (
            conv_spec(args, "float32", epi, False, zero_skip=True),
            conv_spec(args, "float32", epi, False),
        )
        n, kk = args["out_channels"], args["kernel"]
        codes = torch.randint(
            -1, 2, (n, args["in_channels"] // args["groups"], kk, kk), generator=gen
        )
        oh, ow = ((d + 2 * args["padding"] - kk) // args["stride"] + 1 for d in shape[2:])
        out_shape = (shape[0], n, oh, ow)
    flat = codes.view(n, -1)
    if k_range:
        flat[:, k_range[0] : k_range[1]] = 0  # at least one all-zero K block of 32
    flat[dead] = 0  # all-zero output channels
    assert "skip." in kernel_source(spec) and spec.key != plain.key
    skipping, reference = load(spec, tmp_path), load(plain, tmp_path)
    x = torch.randn(shape, generator=gen)
    scale, bias, residual = (
        torch.rand(n, generator=gen) + 0.5,
        torch.randn(n, generator=gen),
        torch.randn(out_shape),
    )
    args = on_device(x, pack(codes), scale, bias, residual)
    with torch.no_grad(), force_backend(backend):
        got, want = skipping.run(*args), reference.run(*args)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_skip_plans_find_what_the_codes_allow():
    from tribuild.runtime import skip

    codes = torch.randint(-1, 2, (6, 8, 3, 3), generator=torch.Generator().manual_seed(6))
    codes.view(6, -1)[:, 32:64] = 0
    codes[[0, 3]] = 0
    channels, columns, compact = skip._plan(pack(codes), 72)
    assert channels.tolist() == [1, 2, 4, 5] and compact.shape == (4, 10)
    assert columns.tolist() == list(range(32)) + list(range(64, 72))
