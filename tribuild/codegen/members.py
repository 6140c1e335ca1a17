"""Members of a generated class: how each construction-time member becomes Python in
``__init__``.

Terms:
- *module member*: a member whose value is a layer (built-in or user instance), or a list of
  them (``model.ModuleList``, an ``nn.ModuleList`` whose ``[i]`` is one dict lookup: ``forward``
  indexes it); ``Sequential`` becomes ``nn.Sequential``. Other members (ints,
  lists of ints...) are construction-time constants: the IR already folded them into
  `forward`, so they are not emitted.
- Built-in layers map to PyTorch modules with PyTorch's parameter names, ternary ones to
  ``tribuild.runtime.nn`` (imported as ``ternary``); arguments equal to the constructor's
  default are left out; a pooling ``stride`` left out in the source is the kernel size.
- *kernel argument*: a ternary member applied on its own (not fused) is built with the
  ``run`` of its kernel file, ``kernel=K.<key>``; ``kernels`` maps member paths to keys.
- *weights* of a functional entry (``param`` nodes with ``weight``): a trit tensor is a packed
  buffer (``model.Module.register_trits``, read as float codes with ``self.trits(name)``), a
  float tensor an ``nn.Parameter`` of zeros; both named as the `.tri` parameter.
"""

from __future__ import annotations

from collections.abc import Callable

from tribuild.codegen.pyname import attr, literal, member
from tribuild.ir.graph import Graph, MemberPath, sequential_layers
from tribuild.lang import InstanceKey, LayerV, TensorT, Value, dims

ClassOf = Callable[[InstanceKey], str]
Kernels = dict[tuple[object, ...], tuple[str, ...]]
"""The kernel keys of each ternary member applied on its own, by member path."""


def _kernel_kw(path: MemberPath, kernels: Kernels, name: str = "kernel") -> str:
    keys = kernels.get(path)
    if not keys:
        return ""
    if len(keys) == 1:
        return f", {name}=K.{keys[0]}"
    return f", {name}=(" + ", ".join("None" if k is None else f"K.{k}" for k in keys) + ")"


def _scale(a: dict[str, Value]) -> str:
    return "" if a["scale"] == "tensor" else f", scale={literal(a['scale'])}"


def _float(a: dict[str, Value], name: str) -> float:
    """A number argument (``eps``, ``p``) as a float."""
    value = a[name]
    assert isinstance(value, (int, float)), (name, value)
    return float(value)


def _pool(torch_name: str, a: dict[str, Value]) -> str:
    stride = a["stride"] if a["stride"] is not None else a["kernel"]
    return f"nn.{torch_name}({a['kernel']}, stride={stride}, padding={a['padding']})"


def builtin(layer: LayerV, path: MemberPath, kernels: Kernels, class_of: ClassOf) -> str:
    a = dict(layer.args)
    match layer.name:
        case "TernaryLinear":
            bias = ", bias=True" if a["bias"] else ""
            return (
                f"ternary.TernaryLinear({a['in_features']}, {a['out_features']}{bias}{_scale(a)}"
                f"{_kernel_kw(path, kernels)})"
            )
        case "Linear":
            bias = "" if a["bias"] else ", bias=False"
            return f"nn.Linear({a['in_features']}, {a['out_features']}{bias})"
        case "TernaryConv2d" | "Conv2d":
            ternary = layer.name == "TernaryConv2d"
            head = "ternary.TernaryConv2d" if ternary else "nn.Conv2d"
            options = "".join(
                f", {k}={a[k]}"
                for k, default in (("stride", 1), ("padding", 0), ("groups", 1))
                if a[k] != default
            )
            options += f", bias={a['bias']}" if a["bias"] != (not ternary) else ""
            tail = _scale(a) + _kernel_kw(path, kernels) if ternary else ""
            return f"{head}({a['in_channels']}, {a['out_channels']}, {a['kernel']}{options}{tail})"
        case "BatchNorm2d" | "LayerNorm":
            return f"nn.{layer.name}({a['features']}, eps={literal(_float(a, 'eps'))})"
        case "RMSNorm":  # nn.RMSNorm, one native call a row on the CPU
            return f"decoding.RMSNorm({a['features']}, eps={literal(_float(a, 'eps'))})"
        case "Embedding":
            return f"decoding.Embedding({a['vocab']}, {a['dim']})"
        case "Dropout":
            return f"nn.Dropout({literal(_float(a, 'p'))})"
        case "MaxPool2d" | "AvgPool2d":
            return _pool(layer.name, a)
        case "Sequential":
            inner = ", ".join(
                construct(v, path + (i,), kernels, class_of) or "nn.Identity()"
                for i, v in enumerate(sequential_layers(layer))
            )
            return f"nn.Sequential({inner})"
        case "MultiHeadAttention":
            kw = _kernel_kw(path, kernels, "kernels")
            return f"ternary.MultiHeadAttention({a['d']}, {a['heads']}{kw})"
        case "ReLU" | "ReLU6" | "GELU" | "SiLU" | "Sigmoid" | "Tanh" | "Identity":
            return f"nn.{layer.name}()"
    raise ValueError(f"no PyTorch module for built-in layer {layer.name}")


def construct(value: Value, path: MemberPath, kernels: Kernels, class_of: ClassOf) -> str | None:
    """Python that builds the member at ``path``, or None when it is not a module."""
    if isinstance(value, LayerV) and value.ref is not None:
        return (
            f"{class_of(InstanceKey(value.ref.path, value.ref.item_id, value.name, value.args))}()"
        )
    if isinstance(value, LayerV):
        return builtin(value, path, kernels, class_of)
    if isinstance(value, tuple) and value:
        items = [construct(v, path + (i,), kernels, class_of) for i, v in enumerate(value)]
        codes = [i for i in items if i is not None]
        if len(codes) == len(items):
            return "model.ModuleList([" + ", ".join(codes) + "])"
    return None


def init_lines(
    members: tuple[tuple[str, Value], ...],
    attrs: dict[str, str],
    kernels: Kernels,
    class_of: ClassOf,
) -> list[str]:
    """The statements of ``__init__`` after ``super().__init__()``; ``attrs`` is each
    member's attribute name (``pyname.member_names``)."""
    out = []
    for name, value in members:
        code = construct(value, (name,), kernels, class_of)
        if code is None:
            continue
        target = attr("self", attrs[name])
        out.append(
            f"{target} = {code}"
            if target.startswith("self.")
            else f"setattr(self, {literal(attrs[name])}, {code})"
        )
    return out


HALF = ("float16", "bfloat16")  # the float dtypes a layer's parameters are cast to


def dtype_lines(g: Graph, attrs: dict[str, str]) -> list[str]:
    """The statements of ``__init__`` that put the parameters of each built-in layer into
    the dtype it is applied to in ``forward``: a declared ``Tensor<float16, ...>`` is a
    contract, and PyTorch's layers are made in float32. A user layer's class does this for
    its own members (its instance's graph says what dtype reaches them); a layer applied to
    several dtypes takes the first."""
    out: dict[str, str] = {}
    for n in g.nodes:
        if n.op not in ("apply", "ternary") or not n.inputs:
            continue
        layer = n.attr("layer")
        if isinstance(layer, LayerV) and layer.ref is not None:
            continue
        t = g.nodes[n.inputs[0]].type
        if isinstance(t, TensorT) and t.dtype in HALF:
            out.setdefault(member(n.attr("path"), attrs), t.dtype)
    return [f"{target}.to(torch.{dtype})" for target, dtype in out.items()]


def weight_lines(g: Graph, attrs: dict[str, str]) -> list[str]:
    """The statements of ``__init__`` that create a functional entry's weights."""
    out = []
    for i in g.weights():
        n, t = g.nodes[i], g.nodes[i].tensor_type
        assert t.dims is not None  # lowering gives every weight a fixed shape
        shape = tuple(dims.as_int(d) for d in t.dims)
        if t.ternary:
            out.append(f"self.register_trits({literal(attrs[n.name])}, {literal(shape)})")
            continue
        dtype = "" if t.dtype == "float32" else f", dtype=torch.{t.dtype}"
        value = f"nn.Parameter(torch.zeros({literal(shape)}{dtype}))"
        target = attr("self", attrs[n.name])
        out.append(
            f"{target} = {value}"
            if target.startswith("self.")
            else f"setattr(self, {literal(attrs[n.name])}, {value})"
        )
    return out


def weight_access(g: Graph, attrs: dict[str, str]) -> dict[int, str]:
    """How ``forward`` reads each weight param: the Python expression by node id."""
    return {
        i: f"self.trits({literal(attrs[g.nodes[i].name])})"
        if g.nodes[i].tensor_type.ternary
        else attr("self", attrs[g.nodes[i].name])
        for i in g.weights()
    }
