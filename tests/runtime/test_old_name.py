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
