"""Every zoo model's generated module, on the CPU (or on CUDA through its Triton kernels,
tests/device.py), against its hand-written reference on the CPU
(tests/codegen/references): same float weights (BatchNorm statistics randomised so folding is
exercised), ``from_float`` on the generated side, eval mode, small arguments and inputs;
outputs agree to 1e-4 relative error at every optimization level (the levels share one
state_dict, packed once), state_dict keys are the reference's (plus the packed scales), and
``state_dict`` / ``load_state_dict`` round-trip."""

from __future__ import annotations

import importlib

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tests.device import DEVICE, MODULE_BACKEND, on_device  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402

# (reference module, construction args, input shape, levels checked)
CASES = [
    ("mlp", {"hidden1": 32, "hidden2": 16, "num_classes": 5}, (3, 1, 28, 28), "0123s"),
    ("lenet", {"num_classes": 3}, (2, 1, 32, 32), "0123s"),
    (
        "vgg",
        {"depths": [1, 1, 2, 1, 1], "widths": [8, 16, 16, 32, 32], "num_classes": 10},
        (1, 3, 32, 32),
        "02",
    ),
    ("resnet", {"blocks": [1, 1, 1, 1], "num_classes": 10}, (2, 3, 32, 32), "0123s"),
    (
        "resnet",
        {"blocks": [1, 2, 1, 1], "bottleneck": True, "num_classes": 10},
        (1, 3, 32, 32),
        "02",
    ),
    ("mobilenet_v2", {"num_classes": 10, "repeats": [1, 2, 1, 1, 1, 1, 1]}, (2, 3, 32, 32), "02"),
    (
        "efficientnet",
        {
            "num_classes": 10,
            "repeats": [1, 2, 1, 1, 1, 1, 1],
            "channels": [8, 16, 24, 32, 48, 64, 96],
        },
        (2, 3, 32, 32),
        "02",
    ),
    ("densenet", {"growth": 8, "num_classes": 10}, (1, 3, 32, 32), "02"),
    (
        "vit",
        {"patch": 4, "dim": 32, "depth": 2, "heads": 2, "num_classes": 10},
        (2, 3, 16, 16),
        "02s",
    ),
    ("bitnet", {"dim": 32, "heads": 2, "hidden": 48}, (2, 8, 32), "0123s"),
    (
        "bitnet_lm",
        {"vocab": 61, "dim": 48, "layers": 2, "heads": 6, "kv_heads": 2, "hidden": 40},
        (2, 7),
        "0123s",
    ),
]
IDS = [c[0] + ("-bottleneck" if c[1].get("bottleneck") else "") for c in CASES]


def reference(stem: str):
    return importlib.import_module(f"tests.codegen.references.{stem}")


def randomise_norms(model) -> None:
    gen = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)


def relative_error(a, b) -> float:
    return float((a - b).abs().max() / a.abs().max().clamp_min(1e-12))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Generated modules by (case index, level), built once for the module."""
    cache = {}

    def get(i: int, level: str):
        if (i, level) not in cache:
            stem, args, _, _ = CASES[i]
            folder = tmp_path_factory.mktemp(f"{stem}{i}-O{level}")
            cache[i, level] = write_and_import(build(reference(stem).ENTRY, args, level), folder)
        return cache[i, level]

    return get


@pytest.mark.parametrize("i", range(len(CASES)), ids=IDS)
def test_generated_module_matches_reference(i, built):
    stem, args, shape, levels = CASES[i]
    torch.manual_seed(0)
    ref = reference(stem).make(**args)
    with torch.no_grad():
        randomise_norms(ref)
    ref.eval()
    x = (
        reference(stem).example(shape)
        if hasattr(reference(stem), "example")
        else torch.randn(shape)
    )
    with torch.no_grad(), force_backend("torch"):
        expected = ref(x)
        packed = built(i, levels[0]).Model.from_float(ref.state_dict()).state_dict()
    outputs = {}
    with torch.no_grad(), force_backend(MODULE_BACKEND):
        for level in levels:
            model = built(i, level).build()  # every level has the same state_dict
            model.load_state_dict(packed)
            outputs[level] = model.to(DEVICE).eval()(on_device(x)).cpu()
            assert relative_error(expected, outputs[level]) < 1e-4, f"-O{level}"
    for level in levels[1:]:
        assert relative_error(outputs[levels[0]], outputs[level]) < 1e-4


@pytest.mark.parametrize("i", [0, 9], ids=[IDS[0], IDS[9]])
def test_state_dict_round_trip_and_keys(i, built):
    stem, args, shape, _ = CASES[i]
    torch.manual_seed(0)
    ref = reference(stem).make(**args).eval()
    gen = built(i, "2")
    model = gen.Model.from_float(ref.state_dict()).eval()
    keys = set(model.state_dict())
    scales = {k for k in keys if k.endswith("_scale")}
    assert keys - scales == set(ref.state_dict())
    again = gen.build()
    again.load_state_dict(model.state_dict())
    x = torch.randn(shape)
    with torch.no_grad(), force_backend("torch"):
        assert torch.equal(again.eval()(x), model(x))
