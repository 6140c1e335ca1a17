"""The seed's claimed figures and this report's goals.

Terms:
- *seed*: the figures earlier "Triton DSL" documents claim for compiling ternary models with a
  cold cache; quoted as given (seconds unless named otherwise), never measured here.
- *ratio*: seed figure / our figure for times and memory (> 1: we are faster or smaller).
- *nominal depth*: the layer count a model's name or paper quotes (ResNet-152: 152); the
  x axis of "compile time vs layers". Models without one are left off that plot.
- *goal*: a bound this report checks one measured figure against (``GOALS``: name -> (bound,
  unit, how it is judged)); each is reported met or not.
"""

from __future__ import annotations

COLD_SECONDS = {
    "mnist_mlp": 0.32,
    "vgg16": 1.42,
    "resnet18": 1.87,
    "mobilenet_v2": 2.29,
    "efficientnet_b0": 2.75,
    "resnet34": 3.37,
    "resnet50": 4.23,
    "resnet101": 6.18,
    "resnet152": 9.34,
    "densenet201": 11.67,
}
PEAK_MB = {"resnet152": 487.0}
MS_PER_LINE = 2.6
NOOP_RESNET18_S = 0.012  # "156x" faster than its cold compile
ADD_LAYER_RESNET18_S = 0.24
O0_COMPILE_SPEEDUP = 2.26  # -O2 time / -O0 time
JOBS8_SPEEDUP = {"resnet18": 2.05, "resnet152": 3.23}
SEED_TARGETS = "ResNet-18 < 1 s, peak < 500 MB, runtime overhead < 5% vs hand-written PyTorch"

NOMINAL_DEPTH = {
    "mnist_mlp": 3,
    "lenet5": 5,
    "vgg16": 16,
    "resnet18": 18,
    "resnet34": 34,
    "resnet50": 50,
    "resnet101": 101,
    "resnet152": 152,
    "mobilenet_v2": 53,
    "efficientnet_b0": 82,
    "densenet121": 121,
    "densenet201": 201,
}

GOALS = {
    "cold ResNet-18, in-process": (0.1, "s", "median wall time of the cold compile"),
    "cold ResNet-152, in-process": (0.5, "s", "median wall time of the cold compile"),
    "time per source line": (0.15, "ms", "median wall time per line of the 50k-line project"),
    "peak memory, ResNet-152": (
        100.0,
        "MB",
        "peak RSS (VmHWM) of a fresh `tribuild build -j 1` process",
    ),
    "no-change rebuild, every zoo model": (1.0, "ms", "the slowest model's median, in-process"),
    "one-body edit, every zoo model": (5.0, "ms", "the slowest model's median, in-process"),
    "runtime overhead": (2.0, "%", "the worst generated/reference ratio over the models, -O2"),
}


def ratio(seed: float | None, ours: float | None) -> float | None:
    """seed / ours, or None when either is missing."""
    return seed / ours if seed is not None and ours else None
