"""BitNet b1.58 ternarization and per-token activation quantization against their formulas."""

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.runtime.ternarize import dequantize, quantize_activations, ternarize, ternarize_ste

CASES = json.loads((Path(__file__).parent / "fixtures" / "ternarize_cases.json").read_text())
SETTINGS = settings(max_examples=examples(100), deadline=None)


@pytest.mark.parametrize("case", CASES["ternarize"], ids=lambda c: c["name"])
def test_ternarize_hand_computed(case):
    codes, g = ternarize(torch.tensor(case["w"]), case["scale"])
    assert codes.dtype == torch.int8
    assert codes.tolist() == case["codes"]
    torch.testing.assert_close(g, torch.tensor(case["g"]), rtol=1e-6, atol=0)


@pytest.mark.parametrize("case", CASES["quantize_activations"], ids=lambda c: c["name"])
def test_quantize_activations_hand_computed(case):
    out = quantize_activations(torch.tensor(case["x"]))
    torch.testing.assert_close(out, torch.tensor(case["out"]), rtol=1e-6, atol=0)


def weights(max_rows=6, max_cols=9):
    shape = st.tuples(st.integers(1, max_rows), st.integers(1, max_cols))
    return shape.flatmap(
        lambda s: st.lists(
            st.floats(-10, 10, width=32), min_size=s[0] * s[1], max_size=s[0] * s[1]
        ).map(lambda v: torch.tensor(v).reshape(s))
    )


@SETTINGS
@given(weights(), st.sampled_from(["tensor", "channel"]))
def test_codes_ternary_scale_positive_and_formula(w, scale):
    codes, g = ternarize(w, scale)
    assert set(codes.unique().tolist()) <= {-1, 0, 1}
    assert bool((g > 0).all()) and g.shape == ((1,) if scale == "tensor" else (w.shape[0],))
    means = w.abs().mean().reshape(1) if scale == "tensor" else w.abs().mean(dim=1)
    torch.testing.assert_close(g, means.clamp_min(1e-5))
    expected = torch.clamp(torch.round(w / g.reshape(-1, 1)), -1, 1)
    assert torch.equal(codes.float(), expected)


@SETTINGS
@given(weights(), st.floats(1e-3, 1e3), st.sampled_from(["tensor", "channel"]))
def test_ternarizing_scaled_ternary_weights_keeps_the_codes(w, a, scale):
    codes, _ = ternarize(w, scale)
    again, g = ternarize(codes.float() * a, scale)
    assert torch.equal(again, codes)
    assert torch.equal(ternarize(dequantize(again, g), scale)[0], codes)


@SETTINGS
@given(weights(), st.sampled_from(["tensor", "channel"]))
def test_ste_forward_ternarizes_and_backward_is_identity(w, scale):
    w = w.clone().requires_grad_(True)
    y = ternarize_ste(w, scale)
    assert torch.equal(y.detach(), dequantize(*ternarize(w, scale)))
    grad = torch.randn_like(w)
    y.backward(grad)
    assert torch.equal(w.grad, grad)


@SETTINGS
@given(weights(max_rows=4, max_cols=33))
def test_quantize_activations_formula_per_token(x):
    out = quantize_activations(x)
    for row, q in zip(x.double(), out.double(), strict=True):
        s = 127 / max(row.abs().max().item(), 1e-5)
        levels = q * s
        torch.testing.assert_close(levels, levels.round(), rtol=0, atol=1e-3)  # on the int8 grid
        assert bool((levels.round().abs() <= 127).all())
        assert bool(((q - row).abs() <= 0.5 / s * (1 + 1e-5) + 1e-12).all())  # within half a step


@SETTINGS
@given(weights(max_rows=4, max_cols=33), st.floats(1e-6, 1e3))
def test_quantize_activations_is_the_formula_bit_for_bit_with_the_ste_gradient(x, magnitude):
    """The in-place steps give the values of the plain formula, bit for bit, with and without
    autograd; the gradient is the straight-through estimator's (the incoming one, unchanged)."""
    x = (x * magnitude).requires_grad_(True)
    plain = x.detach().clone()
    amax = plain.abs().amax(dim=-1, keepdim=True).clamp_min(1e-5)
    s = torch.full_like(amax, 127.0) / amax
    want = torch.clamp(torch.round(plain * s), -128, 127) / s
    got = quantize_activations(x)
    assert torch.equal(got, want)
    with torch.no_grad():
        assert torch.equal(quantize_activations(x), want)
    grad = torch.randn_like(want)
    got.backward(grad)
    assert torch.equal(x.grad, grad)


def test_quantize_activations_keeps_dtype():
    x = torch.randn(3, 8).half()
    assert quantize_activations(x).dtype == torch.float16


def test_unknown_scale_mode_is_rejected():
    with pytest.raises(ValueError, match="scale must be one of"):
        ternarize(torch.ones(2, 2), "row")
