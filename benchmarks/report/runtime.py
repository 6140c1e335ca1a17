"""Runtime of the generated modules against hand-written PyTorch, through bench_runtime.

Terms:
- *overhead*: generated time / reference time - 1, per model and level, from
  ``bench_runtime.run_model`` (CPU inference, the reference and the -O0 and -O2 modules
  timed round-robin with the same weights). Negative: the generated module is faster.
Needs torch (the ``runtime`` extra); without it the section is left out.
"""

from __future__ import annotations

import tempfile
from pathlib import Path


def measure(quick: bool, repeats: int, sample_ms: float) -> dict:
    """``{"models": bench_runtime rows, "threads": torch threads, "torch": version}``."""
    import torch

    from benchmarks import bench_runtime

    models = bench_runtime.QUICK if quick else bench_runtime.MODELS
    with tempfile.TemporaryDirectory() as tmp:
        rows = [bench_runtime.run_model(*m, repeats, sample_ms, Path(tmp)) for m in models]
    return {
        "models": rows,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "repeats": repeats,
        "sample_ms": sample_ms,
    }


def worst_overhead(section: dict, level: str) -> float:
    """The largest overhead (%) over the models at ``level``."""
    return max(row["ratio"][f"O{level}"] - 1 for row in section["models"]) * 100
