"""examples/train_digits.py, shortened: a ternary CNN written in .tri, trained from scratch
with quantization-aware training on scikit-learn's digits for two epochs, frozen, saved and
reloaded. Chance is 10%; two epochs reached 96% when written (the full run's figures are
in benchmarks/results/train_digits.md)."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from tests.codegen.harness import REPO  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402


def test_a_short_run_learns_the_digits(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "train_digits", REPO / "examples" / "train_digits.py"
    )
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    tri = tmp_path / "digits.tri"  # compiled into tmp_path's cache, not the repository's
    shutil.copy(example.TRI, tri)
    with force_backend("torch"):
        result = example.main(
            ["--epochs", "2", "--width", "16", "--tri", str(tri), "--out", str(tmp_path / "out")]
        )
    assert result["test_images"] == 360
    assert result["test_accuracy"] > 0.8  # chance: 0.1
    assert result["test_accuracy"] == result["qat_accuracy"]  # frozen and reloaded: the same
    assert (tmp_path / "out" / "digits.pt").stat().st_size < 20_000
