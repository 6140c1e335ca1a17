"""tribuild's runtime for generated modules: the one package that imports torch (and, lazily,
triton). Generated code calls ``pack_ternary`` once per weight and, per forward,
``ternary_linear`` / ``ternary_conv2d`` / ``quantize_activations``; see ``launch``.

The names below are imported at their first use (PEP 562), so that importing a module of
the package that needs no torch, ``kernels.cpu.build`` (which ``tribuild build`` runs to
compile the CPU kernels ahead of time), imports no torch either (invariant 3).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.runtime.launch import quantize_activations, ternary_conv2d, ternary_linear
    from tribuild.runtime.packing import pack_ternary
    from tribuild.runtime.ternarize import ternarize_ste

# each name -> the module that defines it
_HOMES = {
    "pack_ternary": "packing",
    "quantize_activations": "launch",
    "ternarize_ste": "ternarize",
    "ternary_conv2d": "launch",
    "ternary_linear": "launch",
}

__all__ = [
    "pack_ternary",
    "quantize_activations",
    "ternarize_ste",
    "ternary_conv2d",
    "ternary_linear",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:  # a submodule, as ``import tribuild.runtime`` used to bring them
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as missing:
            if missing.name != f"{__name__}.{name}":
                raise  # a module it imports is missing, not this one
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # asked once: later lookups find it as a plain global
    return value
