"""2-bit packing: known bytes, round trips over shapes, padding, zero-skip detection."""

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.runtime.packing import ZeroSkip, pack, pack_ternary, packed_cols, unpack, zero_skip
from tribuild.runtime.ternarize import ternarize

CASES = json.loads((Path(__file__).parent / "fixtures" / "packing_cases.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_known_bytes(case):
    codes = torch.tensor(case["codes"])
    packed = pack(codes)
    assert packed.dtype == torch.uint8
    assert packed.tolist() == case["bytes"]
    assert unpack(packed, codes.shape).tolist() == case["codes"]


shapes = st.one_of(
    st.tuples(st.integers(1, 9), st.integers(1, 23)),  # linear [out, in]
    st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3)),  # conv
)


@settings(max_examples=examples(150), deadline=None)
@given(shapes, st.randoms(use_true_random=False))
def test_round_trip_and_zero_padding(shape, rnd):
    codes = torch.tensor(
        [rnd.choice((-1, 0, 1)) for _ in range(torch.Size(shape).numel())]
    ).reshape(shape)
    packed = pack(codes)
    k = torch.Size(shape[1:]).numel()
    assert packed.shape == (shape[0], packed_cols(k)) and packed_cols(k) == -(-k // 4)
    assert torch.equal(unpack(packed, shape), codes.to(torch.int8))
    pad = packed_cols(k) * 4 - k  # padded weights sit in the top bits of the last byte
    if pad:
        assert bool((packed[:, -1] >> (2 * (4 - pad)) == 0).all())


def test_pack_ternary_is_ternarize_then_pack():
    w = torch.randn(6, 3, 3, 3)
    packed, g = pack_ternary(w, "channel")
    codes, g_ref = ternarize(w, "channel")
    assert torch.equal(g, g_ref) and torch.equal(unpack(packed, w.shape), codes)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 257), (4, 3, 3, 3), (5, 300)])
@pytest.mark.parametrize("scale", ["tensor", "channel"])
def test_the_native_pack_gives_the_bytes_of_the_torch_loop(shape, scale, monkeypatch):
    """pack_ternary runs natively where the CPU kernels load: the same bytes as its torch
    loop, ties at half a step included (round half to even)."""
    from tribuild.runtime import native, packing

    if native.library() is None:
        pytest.skip("no C++ compiler: the native kernels did not build")
    w = torch.randn(shape, generator=torch.Generator().manual_seed(sum(shape)))
    flat = w.view(shape[0], -1)
    flat[0, 0] = 0.5 * flat.abs().mean()  # exactly half a step (the tensor scale's, row 0's
    flat[-1, -1] = -1.5 * flat.abs().mean()  # near it), and one and a half
    native_bytes, native_g = pack_ternary(w, scale)
    monkeypatch.setattr(packing, "_native_pack", lambda *_: False)
    torch_bytes, torch_g = pack_ternary(w, scale)
    assert torch.equal(native_g, torch_g) and torch.equal(native_bytes, torch_bytes)


def test_pack_rejects_non_ternary_codes():
    with pytest.raises(ValueError, match="codes must lie in"):
        pack(torch.tensor([[2, 0]]))


def test_unpack_rejects_a_shape_that_does_not_fit():
    with pytest.raises(ValueError, match="does not hold"):
        unpack(torch.zeros(2, 3, dtype=torch.uint8), (2, 13))


def test_zero_skip_reports_zero_channels_and_k_blocks():
    codes = torch.zeros(4, 20, dtype=torch.int8)
    codes[0, 1] = 1  # block 0 of 8
    codes[2, 19] = -1  # block 2 (16..19, with padding up to 24)
    assert zero_skip(pack(codes), 8) == ZeroSkip(channels=(1, 3), k_blocks=(1,), block_k=8)
    assert zero_skip(pack(codes), 4) == ZeroSkip(channels=(1, 3), k_blocks=(1, 2, 3), block_k=4)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 30),
    st.sampled_from([4, 8, 16]),
    st.randoms(use_true_random=False),
)
def test_zero_skip_agrees_with_the_codes(n, k, block_k, rnd):
    codes = torch.tensor([rnd.choice((-1, 0, 0, 0, 1)) for _ in range(n * k)]).reshape(n, k)
    report = zero_skip(pack(codes), block_k)
    nonzero = codes != 0
    assert report.channels == tuple(i for i in range(n) if not nonzero[i].any())
    blocks = range(-(-k // block_k))
    assert report.k_blocks == tuple(
        b for b in blocks if not nonzero[:, b * block_k : (b + 1) * block_k].any()
    )


def test_zero_skip_block_must_be_whole_bytes():
    with pytest.raises(ValueError, match="multiple of 4"):
        zero_skip(torch.zeros(1, 2, dtype=torch.uint8), 6)
