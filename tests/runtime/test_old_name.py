"""The runtime's old name, ``tribuild.gpu``: user code that imports it and layers saved whole
under it before the rename (the fixtures were written by the tree before it) still load, as the
very classes of ``tribuild.runtime``, with a DeprecationWarning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tribuild.runtime import nn as ternary_nn  # noqa: E402

FIXTURES = Path(__file__).parents[1] / "fixtures" / "old_runtime_name"
REPO = Path(__file__).parents[2]


@pytest.mark.parametrize("name", ["ternary_linear.pt", "ternary_linear_frozen.pt"])
def test_a_layer_saved_under_the_old_name_loads_as_the_new_class(name, monkeypatch):
    monkeypatch.delitem(sys.modules, "tribuild.gpu.nn", raising=False)  # warns at first import
    assert b"tribuild.gpu.nn" in (FIXTURES / name).read_bytes()  # really written by the old tree
    with pytest.warns(DeprecationWarning, match=r"tribuild\.gpu\.nn is now tribuild\.runtime\.nn"):
        saved = torch.load(FIXTURES / name, weights_only=False)
    layer = saved["layer"]
    assert type(layer) is ternary_nn.TernaryLinear
    with torch.no_grad():
        assert torch.equal(layer(saved["x"]), saved["y"])


OLD_IMPORTS = """
import warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import tribuild.gpu.nn, tribuild.gpu.kernels.common
    from tribuild.gpu import pack_ternary
for warning in caught:
    print(warning.category.__name__, warning.message)
import tribuild.runtime.nn, tribuild.runtime.kernels.triton.common
from tribuild.runtime import pack_ternary as new
print(tribuild.gpu.nn is tribuild.runtime.nn, pack_ternary is new,
      tribuild.gpu.kernels.common is tribuild.runtime.kernels.triton.common,
      tribuild.runtime.nn.__spec__.name)
"""


def test_old_imports_warn_and_give_the_same_modules():
    out = subprocess.run(
        [sys.executable, "-c", OLD_IMPORTS], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines() == [
        "DeprecationWarning tribuild.gpu is now tribuild.runtime: import it by its new name",
        "DeprecationWarning tribuild.gpu.nn is now tribuild.runtime.nn: import it by its new name",
        "DeprecationWarning tribuild.gpu.kernels is now tribuild.runtime.kernels.triton: "
        "import it by its new name",
        "DeprecationWarning tribuild.gpu.kernels.common is now "
        "tribuild.runtime.kernels.triton.common: import it by its new name",
        "True True True tribuild.runtime.nn",
    ]


KERNELS = FIXTURES / "kernels"  # kernel files as the tree wrote them before ``TUNED``: ``LEVEL``
SNAPSHOTS = REPO / "tests" / "fixtures" / "snapshots"
OLD_KERNELS = {  # fixture -> the snapshot of the same spec written now
    "linear_176x64_4363b8bdd8": "bitnet_block-O3",  # zero-skip, quantized, -O3
    "linear_128x256_3136a6cf2e": "mnist_mlp-O0",
    "conv2d_16x6_k5s1p0_c458f1318b": "lenet5-O2",
    "act_quant_k64_3dacf9e644": "bitnet_lm-O2",
}


def _kernel_run(source: Path, folder: Path):
    from tribuild.runtime.kernel_files import load_kernel_file

    folder.mkdir()
    path = folder / source.name.removesuffix(".txt")
    path.write_text(source.read_text())
    return load_kernel_file(str(path))


@pytest.mark.parametrize("key", sorted(OLD_KERNELS))
def test_a_kernel_file_written_with_level_runs_as_the_new_one(key, tmp_path):
    """A kernel file in a user's build folder from before ``TUNED`` (``LEVEL = ...``,
    ``opt_level=LEVEL``) still imports and computes what today's file of the same spec does."""
    from tribuild.runtime.packing import pack_ternary

    old = KERNELS / f"{key}.py.txt"
    assert "opt_level=LEVEL" in old.read_text()  # really the old form
    new = SNAPSHOTS / OLD_KERNELS[key] / "kernels" / f"{key}.py.txt"
    assert "tuned=TUNED" in new.read_text() and "LEVEL" not in new.read_text()
    run_old, run_new = _kernel_run(old, tmp_path / "old"), _kernel_run(new, tmp_path / "new")
    g = torch.Generator().manual_seed(0)
    if key.startswith("act_quant"):
        args: tuple = (torch.randn(3, 64, generator=g),)
    elif key.startswith("conv2d"):
        weight = torch.randn(16, 6, 5, 5, generator=g)
        weight[3] = 0  # a channel the zero-skip plan leaves out
        args = (torch.randn(2, 6, 9, 9, generator=g), *pack_ternary(weight), torch.randn(16))
    else:
        n, k = (int(d) for d in key.split("_")[1].split("x"))
        args = (torch.randn(5, k, generator=g), *pack_ternary(torch.randn(n, k, generator=g)))
    with torch.no_grad():
        torch.testing.assert_close(run_old(*args), run_new(*args), rtol=0, atol=0)


def test_the_old_opt_level_argument_still_picks_the_tuned_configs(tmp_path, monkeypatch):
    """``opt_level=3``, as old -O3 kernel files pass it off the interpreter, tries the tuned
    configs (several: the choice is timed and written to the tuning cache), ``opt_level=2``
    the one default config (nothing to choose, nothing written), as ``tuned`` does."""
    from tribuild.runtime import launch, prepared, skip
    from tribuild.runtime.packing import pack_ternary

    packed, scale = pack_ternary(torch.randn(6, 12))
    x = torch.randn(2, 12)
    image, (cpacked, cscale) = torch.randn(1, 2, 5, 5), pack_ternary(torch.randn(4, 2, 3, 3))
    calls = {
        "linear": lambda **kw: launch.ternary_linear(x, packed, scale, **kw),
        "skip.linear": lambda **kw: skip.linear(x, packed, scale, **kw),
        "conv2d": lambda **kw: launch.ternary_conv2d(image, cpacked, cscale, kernel_size=3, **kw),
        "skip.conv2d": lambda **kw: skip.conv2d(image, cpacked, cscale, kernel_size=3, **kw),
        "quantize": lambda **kw: launch.quantize_activations(x, **kw),
    }
    with launch.force_backend("triton"):
        for name, call in calls.items():
            for i, (kwargs, tunes) in enumerate(
                [({"opt_level": 2}, False), ({"tuned": False}, False),
                 ({"opt_level": 3}, True), ({"tuned": True}, True)]
            ):  # fmt: skip
                cache = tmp_path / f"{name}-{i}.json"
                monkeypatch.setenv("TRIBUILD_AUTOTUNE_CACHE", str(cache))
                prepared._prepared_launches.clear()  # each asks the autotuner afresh
                call(**kwargs)
                assert cache.exists() is tunes, (name, kwargs)
