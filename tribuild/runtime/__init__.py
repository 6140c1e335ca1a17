"""tribuild's runtime for generated modules: the one package that imports torch (and, lazily,
triton). Generated code calls ``pack_ternary`` once per weight and, per forward,
``ternary_linear`` / ``ternary_conv2d`` / ``quantize_activations``; see ``launch``.
"""

from tribuild.runtime.launch import quantize_activations, ternary_conv2d, ternary_linear
from tribuild.runtime.packing import pack_ternary
from tribuild.runtime.ternarize import ternarize_ste

__all__ = [
    "pack_ternary",
    "quantize_activations",
    "ternarize_ste",
    "ternary_conv2d",
    "ternary_linear",
]
