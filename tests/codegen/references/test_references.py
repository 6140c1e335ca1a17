"""The hand-written references mirror the zoo's `.tri` sources.

For each case (a model built with its defaults or with small arguments): the reference's
module tree matches the instance tribuild's checker evaluates (class and child names,
built-in types and hyper-parameters), its state_dict keys and shapes are those the members
imply, its constructor has the entry layer's parameters and defaults, a forward pass gives
the shape the `.tri` signature declares, and every ternary layer's effective weight holds at
most three values per scale group. Every Tribuild.toml target is checked for structure on
the meta device (no memory, no forward). The built-ins of common.py are checked against
PyTorch's own functions and tribuild's runtime.
"""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tests.budget import examples
from tribuild.config.load import load_config
from tribuild.lang.check.values import normalise

from . import common, tri_structure

STEMS = (
    "mlp",
    "lenet",
    "vgg",
    "resnet",
    "mobilenet_v2",
    "efficientnet",
    "densenet",
    "vit",
    "bitnet",
    "bitnet_lm",
)

# (reference module, construction args, input shape, output shape)
CASES = [
    ("mlp", {}, (2, 1, 28, 28), (2, 10)),
    ("mlp", {"hidden1": 32, "hidden2": 16, "num_classes": 5}, (3, 1, 28, 28), (3, 5)),
    ("lenet", {}, (2, 1, 32, 32), (2, 10)),
    ("lenet", {"num_classes": 3}, (1, 1, 32, 32), (1, 3)),
    ("vgg", {}, (1, 3, 32, 32), (1, 1000)),
    (
        "vgg",
        {"depths": [1, 1, 2, 1, 1], "widths": [8, 16, 16, 32, 32], "num_classes": 10},
        (2, 3, 32, 32),
        (2, 10),
    ),
    ("resnet", {}, (1, 3, 64, 64), (1, 1000)),
    (
        "resnet",
        {"blocks": [1, 2, 1, 1], "bottleneck": True, "num_classes": 10},
        (2, 3, 64, 64),
        (2, 10),
    ),
    ("mobilenet_v2", {}, (1, 3, 64, 64), (1, 1000)),
    (
        "mobilenet_v2",
        {"num_classes": 10, "repeats": [1, 2, 1, 1, 1, 1, 1]},
        (2, 3, 32, 32),
        (2, 10),
    ),
    ("efficientnet", {}, (1, 3, 64, 64), (1, 1000)),
    (
        "efficientnet",
        {
            "num_classes": 10,
            "repeats": [1, 2, 1, 1, 1, 1, 1],
            "channels": [8, 16, 24, 32, 48, 64, 96],
        },
        (2, 3, 32, 32),
        (2, 10),
    ),
    ("densenet", {}, (1, 3, 64, 64), (1, 1000)),
    ("densenet", {"growth": 8, "num_classes": 10}, (2, 3, 64, 64), (2, 10)),
    ("vit", {}, (1, 3, 32, 32), (1, 1000)),
    (
        "vit",
        {"patch": 4, "dim": 32, "depth": 2, "heads": 2, "num_classes": 10},
        (2, 3, 16, 16),
        (2, 10),
    ),
    ("bitnet", {}, (2, 16, 64), (2, 16, 64)),
    ("bitnet", {"dim": 32, "heads": 2, "hidden": 48}, (2, 8, 32), (2, 8, 32)),
    (
        "bitnet_lm",
        {"vocab": 61, "dim": 48, "layers": 2, "heads": 6, "kv_heads": 2, "hidden": 40},
        (2, 7),
        (2, 7, 61),
    ),
]
CASE_IDS = [f"{stem}-{'defaults' if not args else 'small'}" for stem, args, _, _ in CASES]
REQUIRED = {"bitnet_lm": CASES[-1][1]}  # entry layers with parameters that have no default
TARGETS = load_config(tri_structure.REPO / "Tribuild.toml").targets


def reference(stem: str):
    return importlib.import_module(f"{__package__}.{stem}")


def check_structure(stem: str, args: dict) -> None:
    """Build on the meta device and compare with the checker's instance of ENTRY."""
    ref = reference(stem)
    key = tri_structure.instance(ref.ENTRY, args)
    with torch.device("meta"):
        model = ref.make(**args)
    assert tri_structure.mismatches(model, key) == []
    found = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert found == tri_structure.expected_state(key)


@pytest.mark.parametrize("stem,args,input_shape,output_shape", CASES, ids=CASE_IDS)
def test_structure(stem, args, input_shape, output_shape):
    check_structure(stem, args)


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_structure_of_every_target(target):
    stem = next(
        s for s in STEMS if reference(s).ENTRY == f"{target.entry_path}:{target.entry_layer}"
    )
    check_structure(stem, dict(target.args))


@pytest.mark.parametrize("stem", STEMS)
def test_constructor_takes_the_entry_layer_parameters(stem):
    ref = reference(stem)
    required = REQUIRED.get(stem, {})
    key = tri_structure.instance(ref.ENTRY, required)
    with torch.device("meta"):
        cls = type(ref.make(**required))
    params = inspect.signature(cls).parameters
    assert list(params) == [name for name, _ in key.args]
    defaults = {name: normalise(p.default) for name, p in params.items() if name not in required}
    assert defaults == {k: v for k, v in key.args if k not in required}


def test_cases_reach_every_zoo_layer():
    reached = set()
    for stem, args, _, _ in CASES:
        reached |= tri_structure.reached_layers(tri_structure.instance(reference(stem).ENTRY, args))
    assert reached == tri_structure.zoo_layers()


@pytest.mark.parametrize("stem,args,input_shape,output_shape", CASES, ids=CASE_IDS)
def test_forward(stem, args, input_shape, output_shape):
    ref = reference(stem)
    assert (
        tri_structure.output_shape(tri_structure.instance(ref.ENTRY, args), input_shape)
        == output_shape
    )
    torch.manual_seed(0)
    model = ref.make(**args).eval()
    x = ref.example(input_shape) if hasattr(ref, "example") else torch.randn(input_shape)
    with torch.no_grad():
        y = model(x)
    assert tuple(y.shape) == output_shape
    assert torch.isfinite(y).all()
    ternary = common.ternary_weights(model)
    assert ternary, "every zoo model has ternary layers"
    for _, master, effective, scale in ternary:
        assert_ternary(effective, master, scale)


def assert_ternary(effective: torch.Tensor, weight: torch.Tensor, scale: str) -> None:
    """Each scale group holds at most three values, -m, 0 and m, where m is the group's
    g = max(mean|W|, 1e-5) (or the group is all zero)."""
    rows = (
        (effective.reshape(1, -1), weight.reshape(1, -1))
        if scale == "tensor"
        else (effective.flatten(1), weight.flatten(1))
    )
    e, w = rows
    m = e.abs().amax(dim=1, keepdim=True)
    assert bool(((e == 0) | (e.abs() == m)).all()), "more than three values in a scale group"
    g = w.abs().mean(dim=1, keepdim=True).clamp_min(common.EPS)
    used = m[:, 0] > 0
    torch.testing.assert_close(m[used], g[used], rtol=1e-6, atol=0)


@settings(max_examples=examples(50), deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 4),
    st.sampled_from(common.SCALES),
    st.floats(1e-7, 10.0),
    st.integers(0, 2**31 - 1),
)
def test_ternarize_matches_the_runtime(rows, kernel, scale, magnitude, seed):
    from tribuild.runtime.ternarize import ternarize_ste

    w = (
        torch.randn(rows, 3, kernel, kernel, generator=torch.Generator().manual_seed(seed))
        * magnitude
    )
    effective = common.ternarize(w, scale)
    assert_ternary(effective, w, scale)
    torch.testing.assert_close(effective, ternarize_ste(w, scale), rtol=1e-6, atol=0)


def test_ternarize_known_values():
    w = torch.tensor([[0.9, -0.05, -2.0, 0.0], [0.2, 0.2, -0.2, 0.0]])
    # g = mean|w| = 3.55 / 8 = 0.44375: codes round(w / g) clamped.
    torch.testing.assert_close(
        common.ternarize(w), 0.44375 * torch.tensor([[1.0, 0, -1, 0], [0, 0, 0, 0]])
    )
    # per row: g = 0.7375 and 0.15.
    torch.testing.assert_close(
        common.ternarize(w, "channel"),
        torch.tensor([[0.7375, 0, -0.7375, 0], [0.15, 0.15, -0.15, 0]]),
    )
    assert torch.equal(common.ternarize(torch.zeros(2, 2)), torch.zeros(2, 2))
    with pytest.raises(ValueError):
        common.ternarize(w, "row")


def test_quantize_activations():
    from tribuild.runtime.ternarize import quantize_activations as runtime

    x = torch.tensor([[1.0, -0.5, 0.25, 0.001], [0.0, 0.0, 0.0, 0.0], [3e-6, -1e-6, 0.0, 2e-6]])
    s = torch.tensor([[127.0], [127 / 1e-5], [127 / 1e-5]])
    expected = torch.clamp(torch.round(x * s), -128, 127) / s
    torch.testing.assert_close(common.quantize_activations(x), expected, rtol=0, atol=0)
    assert common.quantize_activations(x)[0].tolist() == pytest.approx(
        [1.0, -64 / 127, 32 / 127, 0.0]
    )
    y = torch.randn(4, 5, 33, generator=torch.Generator().manual_seed(1)) * 3
    torch.testing.assert_close(common.quantize_activations(y), runtime(y), rtol=0, atol=0)


def test_rms_norm_matches_pytorch():
    norm = common.RMSNorm(16)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(norm(x), F.rms_norm(x, (16,), norm.weight, eps=1e-6))


def test_multi_head_attention_matches_pytorch():
    torch.manual_seed(0)
    mha, x = common.MultiHeadAttention(24, 3), torch.randn(2, 7, 24)
    with torch.no_grad():
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    state = mha.state_dict()
    state["in_proj_weight"] = common.ternarize(state["in_proj_weight"])
    state["out_proj.weight"] = common.ternarize(state["out_proj.weight"])
    torch_mha = nn.MultiheadAttention(24, 3, batch_first=True).eval()
    torch_mha.load_state_dict(state)
    torch.testing.assert_close(mha(x), torch_mha(x, x, x, need_weights=False)[0])
    with pytest.raises(ValueError):
        common.MultiHeadAttention(10, 3)


def test_ternary_layers_use_the_effective_weight():
    torch.manual_seed(0)
    conv = common.TernaryConv2d(
        4, 6, kernel=3, stride=2, padding=1, groups=2, bias=True, scale="channel"
    )
    x = torch.randn(2, 4, 9, 9)
    expected = F.conv2d(
        x, common.ternarize(conv.weight, "channel"), conv.bias, stride=2, padding=1, groups=2
    )
    torch.testing.assert_close(conv(x), expected)
    linear = common.TernaryLinear(5, 3)
    assert linear.bias is None
    torch.testing.assert_close(
        linear(x[0, 0, :, :5]), x[0, 0, :, :5] @ common.ternarize(linear.weight).T
    )
