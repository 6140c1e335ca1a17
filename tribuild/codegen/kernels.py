"""Kernel files: one small Python module per distinct ternary computation.

Terms:
- *KernelSpec*: what a kernel computes, and its key: the *family* (``linear``: GEMM, or GEMV
  for a few rows; ``conv2d``: implicit GEMM; ``depthwise``; ``act_quant``: per-token int8
  activation quantization), the *shape* (the weight's: features, channels, window), the
  *dtype* of the activations, the *epilogue* (``channel_scale``, ``bias``, ``act``,
  ``residual``) and *options* (``tuned``: -O3 autotune configs; ``zero_skip``: skip what the
  packed codes make zero, ``tribuild.runtime.skip``; ``quantize``: a linear layer that quantizes
  its input first, BitLinear fused at -O3). Two layers with equal specs
  share one file, across targets too.
- *key*: ``<family>_<short shape>_<hash>``, the hash (10 hex digits of SHA-256) over the whole
  spec; the file is ``kernels/<key>.py``.
- *kernel file*: a docstring saying what it computes, the spec as constants, ``TUNED``
  (whether the launcher tries the tuned configs), and ``run(...)``, which calls the generic
  Triton kernel of ``tribuild.runtime.kernels.triton`` through ``tribuild.runtime.launch``
  with the constants filled in (on the CPU the launcher runs the same arithmetic in
  PyTorch). ``TUNED`` is true at -O3, except under the Triton interpreter, which runs the
  one default config. Files written before ``TUNED`` had its name hold ``LEVEL`` and pass
  ``opt_level=LEVEL``, which the launchers still take.
"""

from __future__ import annotations

import functools

from tribuild.base.hashing import sha256
from tribuild.base.record import record
from tribuild.codegen.fmt import wrap_text
from tribuild.codegen.pyname import literal
from tribuild.ir.graph import Node
from tribuild.lang import Value, dims


@record
class KernelSpec:
    family: str
    shape: tuple[tuple[str, int], ...]
    dtype: str
    epilogue: tuple[tuple[str, object], ...] = ()
    options: tuple[tuple[str, object], ...] = ()

    @property
    def key(self) -> str:
        return _key(self)


@functools.lru_cache(maxsize=4096)
def _key(spec: KernelSpec) -> str:
    """``spec.key``, remembered: a spec's key is read wherever its kernel is used."""
    digest = sha256(
        repr((spec.family, spec.shape, spec.dtype, spec.epilogue, spec.options)).encode()
    ).hexdigest()[:10]
    return f"{spec.family}_{_short(spec)}_{digest}"


def _short(spec: KernelSpec) -> str:
    s = dict(spec.shape)
    if spec.family == "linear":
        return f"{s['out_features']}x{s['in_features']}"
    if spec.family == "act_quant":
        return f"k{s['features']}"
    return f"{s['out_channels']}x{s['in_channels']}_k{s['kernel']}s{s['stride']}p{s['padding']}"


def epilogue(
    act: str = "none", bias: bool = False, channel_scale: bool = False, residual: bool = False
) -> tuple[tuple[str, object], ...]:
    return (("act", act), ("bias", bias), ("channel_scale", channel_scale), ("residual", residual))


def _options(
    tuned: bool, zero_skip: bool, quantize: bool = False
) -> tuple[tuple[str, object], ...]:
    return (
        (("tuned", tuned),)
        + ((("zero_skip", True),) if zero_skip else ())
        + ((("quantize", True),) if quantize else ())
    )


def _shape(layer_args: dict[str, Value], *names: str) -> tuple[tuple[str, int], ...]:
    """``(name, value)`` of a layer's int arguments ``names``."""
    shape = []
    for name in names:
        value = layer_args[name]
        assert isinstance(value, int), (name, value)
        shape.append((name, value))
    return tuple(shape)


def linear_spec(
    layer_args: dict[str, Value],
    dtype: str,
    epi: tuple[tuple[str, object], ...],
    tuned: bool,
    zero_skip: bool = False,
    quantize: bool = False,
) -> KernelSpec:
    shape = _shape(layer_args, "in_features", "out_features")
    return KernelSpec("linear", shape, dtype, epi, _options(tuned, zero_skip, quantize))


def conv_spec(
    layer_args: dict[str, Value],
    dtype: str,
    epi: tuple[tuple[str, object], ...],
    tuned: bool,
    zero_skip: bool = False,
) -> KernelSpec:
    shape = _shape(
        layer_args, "in_channels", "out_channels", "kernel", "stride", "padding", "groups"
    )
    s = dict(shape)
    family = "depthwise" if s["groups"] == s["in_channels"] > 1 else "conv2d"
    return KernelSpec(family, shape, dtype, epi, _options(tuned, zero_skip))


def act_quant_spec(features: int, dtype: str, tuned: bool) -> KernelSpec:
    return KernelSpec("act_quant", (("features", features),), dtype, (), (("tuned", tuned),))


def _describe(spec: KernelSpec) -> str:
    s, e = dict(spec.shape), dict(spec.epilogue)
    if spec.family == "act_quant":
        return (
            f"Per-token int8 absmax quantization of {spec.dtype} activations with {s['features']} "
            "features (tribuild.runtime.kernels.triton.act_quant)."
        )
    if spec.family == "linear":
        what = (
            f"Ternary linear layer, {s['in_features']} -> {s['out_features']} features: "
            "GEMV for up to launch.GEMV_MAX_ROWS rows, GEMM otherwise, on 16-row tiles up to "
            "launch.SMALL_GEMM_MAX_ROWS (tribuild.runtime.kernels.triton.ternary_gemv, "
            "ternary_gemm)."
        )
    else:
        how = (
            ("depthwise convolution", "ternary_depthwise")
            if spec.family == "depthwise"
            else ("convolution as an implicit GEMM", "ternary_conv2d")
        )
        what = (
            f"Ternary {s['kernel']}x{s['kernel']} {how[0]}, "
            f"{s['in_channels']} -> {s['out_channels']} channels, stride {s['stride']}, padding "
            f"{s['padding']}, groups {s['groups']} "
            f"(tribuild.runtime.kernels.triton.{how[1]})."
        )
    parts = ["per-channel scale" if e.get("channel_scale") else "per-tensor scale"]
    parts += ["bias"] if e.get("bias") else []
    parts += [f"{e['act']} activation"] if e.get("act", "none") != "none" else []
    parts += ["residual add"] if e.get("residual") else []
    return f"{what}\n{spec.dtype} activations, float32 accumulation; epilogue: {', '.join(parts)}."


def kernel_source(spec: KernelSpec) -> str:
    """The text of ``kernels/<spec.key>.py``."""
    doc = "\n".join(wrap_text(p) for p in _describe(spec).split("\n"))
    tuned = dict(spec.options).get("tuned", False)
    tuned_value = "not autotune.interpreted()" if tuned else "False"
    consts = "".join(f"{name.upper()} = {literal(value)}\n" for name, value in spec.shape)
    consts += "".join(f"{name.upper()} = {literal(value)}\n" for name, value in spec.epilogue)
    skip = dict(spec.options).get("zero_skip", False)
    if skip:
        doc += "\nZero-skip: " + wrap_text(
            "output channels whose codes are all zero and K blocks that are zero in "
            "every channel are left out (tribuild.runtime.skip)."
        )
    quantize = dict(spec.options).get("quantize", False)
    if quantize:
        doc += "\n" + wrap_text(
            "Input quantization: x goes through the per-token int8 absmax quantization "
            "first (BitLinear), in the decode kernel's prologue where that kernel runs "
            "(tribuild.runtime.kernels.triton.ternary_decode), else by act_quant."
        )
    imports = ", ".join((["autotune"] if tuned else []) + ["skip" if skip else "launch"])
    head = f'"""Kernel {spec.key}, generated by tribuild.\n\n{doc}\n"""\n'
    head += f"from tribuild.runtime import {imports}\n\n"
    head += f"{consts}TUNED = {tuned_value}\n"
    body = _BODIES[spec.family]
    if quantize:
        body = body.replace("tuned=TUNED)", "tuned=TUNED, quantize=True)")
    if skip:
        body = body.replace("launch.ternary_linear(", "skip.linear(").replace(
            "launch.ternary_conv2d(", "skip.conv2d("
        )
    return head + body


_BODIES = {
    "linear": '''

def run(x, packed, scale, bias=None, residual=None):
    return launch.ternary_linear(x, packed, scale, bias, ACT, residual, tuned=TUNED)
''',
    "conv2d": '''

def run(x, packed, scale, bias=None, residual=None):
    return launch.ternary_conv2d(
        x, packed, scale, bias, kernel_size=KERNEL, stride=STRIDE, padding=PADDING,
        groups=GROUPS, act=ACT, residual=residual, tuned=TUNED)
''',
    "act_quant": '''

def run(x):
    return launch.quantize_activations(x, tuned=TUNED)
''',
}
_BODIES["depthwise"] = _BODIES["conv2d"]


def node_kernels(n: Node, level: str) -> tuple[KernelSpec, ...]:
    """The kernels an IR node runs: a ternary layer applied or fused, attention's two
    projections, an activation quantization of a known width; () for everything else."""
    tuned = level == "3"
    dtype = n.type.dtype
    if n.op == "call" and n.attr("fn") == "quantize_activations":
        shape = n.tensor_type.dims
        k = dims.as_int(shape[-1]) if shape else None
        return (act_quant_spec(k, dtype, tuned),) if k is not None else ()
    if n.op not in ("apply", "ternary"):
        return ()
    layer = n.attr("layer")
    a = dict(layer.args)
    if layer.name == "MultiHeadAttention":
        d = a["d"]
        return (
            linear_spec(
                {"in_features": d, "out_features": 3 * d}, dtype, epilogue(bias=True), tuned
            ),
            linear_spec({"in_features": d, "out_features": d}, dtype, epilogue(bias=True), tuned),
        )
    if layer.name not in ("TernaryLinear", "TernaryConv2d"):
        return ()
    folded = n.op == "ternary" and n.attr("bn") is not None
    epi = epilogue(
        n.attr("act", "none"),
        a["bias"] or folded,
        a["scale"] == "channel" or folded,
        bool(n.attr("residual", False)),
    )
    skip = bool(n.attr("zero_skip", False))
    if layer.name == "TernaryLinear":
        return (linear_spec(a, dtype, epi, tuned, skip, bool(n.attr("quantize", False))),)
    return (conv_spec(a, dtype, epi, tuned, skip),)
