"""tribuild: an incremental, query-based compiler for ternary neural networks.

The Python API (imports nothing heavy until called):
- ``compile_model(path, layer, opt_level=2, **args)``: the generated ``nn.Module`` class of
  one layer; ``Model.from_float(state_dict)`` gives an instance with ternarized weights.
- ``build(project_dir=".", jobs=None, timing=False, targets=(), opt_level=None,
  trace_memory=False)``: what `tribuild build` does, returning the result (outputs,
  diagnostics, timing report).
- ``summary(model)``: print a table of a generated module's layers (``print_it=False``:
  return it as text): weight shapes, ternary and float parameter counts, packed bytes.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing tribuild stays free of torch
    from typing import Any

    from torch import nn

    from tribuild.driver.build import BuildResult
    from tribuild.runtime.model import Module


def compile_model(path: str, layer: str, opt_level: int | str = 2, **args: Any) -> type[Module]:
    """The generated ``nn.Module`` class of ``layer`` in the ``.tri`` file ``path``, built at
    ``opt_level`` (0-3 or "s") with construction arguments ``args`` (the layer's defaults
    for the others). Compiled once into the project's cache; a later call with nothing
    changed imports the cached module without loading the compiler. ``BuildError`` (its text
    the rendered diagnostics) when the program has errors.

    The class: ``Model()`` is a trainable, PyTorch-initialized model (``freeze()`` packs it);
    ``Model.from_float(state_dict)`` a frozen one from float weights; ``Model.float_module()``
    its plain float twin (README, "Training")."""
    from tribuild.driver.api import compile_model as run

    return run(path, layer, opt_level, **args)


def build(
    project_dir: str = ".",
    jobs: int | None = None,
    timing: bool = False,
    targets: tuple[str, ...] = (),
    opt_level: str | None = None,
    trace_memory: bool = False,
) -> BuildResult:
    """Build the project in ``project_dir`` as ``tribuild build`` does and return the result
    (``.outputs``, ``.diagnostics``, ``.failed``, ``.timing``): ``jobs`` worker processes (0
    for one per CPU), only ``targets`` when given, ``opt_level`` overriding Tribuild.toml's,
    ``timing`` for the per-stage report (``trace_memory`` adds Python's allocations).
    ``ConfigError`` for mistakes in Tribuild.toml, ``ValueError`` for bad arguments."""
    from tribuild.driver.api import build as run

    return run(project_dir, jobs, timing, targets, opt_level, trace_memory)


def summary(model: nn.Module, print_it: bool = True) -> str | None:
    """Print a table of ``model``'s layers (a generated module, its float twin, or any
    ``nn.Module``): weight shapes, ternary and float parameter counts, packed bytes
    (``tribuild.runtime.summary``); ``print_it=False`` returns it as text instead."""
    from tribuild.runtime.summary import summary as run

    return run(model, print_it)
