"""What the `.tri` sources say a model is, read through tribuild's own front end.

Terms:
- *instance*: the ``InstanceKey`` of a user layer with concrete construction arguments; the
  checker evaluates its ``let`` members (``checked_instance(...).members``).
- *member value*: what a member evaluates to: a ``LayerV`` of a built-in (``ref`` None), a
  ``LayerV`` of a user layer, or a tuple (a `.tri` list) of those.
- *expected state*: ``{state_dict key: shape}`` of a plain PyTorch module with the member
  structure, by the naming rules of ``common.py``.
- *mismatch*: a line naming a module path where a reference differs from the source: class
  name, children names, built-in type or hyper-parameters (kernel, stride, eps, ...).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from torch import nn

from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database
from tribuild.lang import dims
from tribuild.lang.check.unify import Unifier
from tribuild.lang.check.values import InstanceKey, LayerV, normalise
from tribuild.lang.types import TensorT
from tribuild.queries.semantic import checked_instance
from tribuild.queries.syntax import item_index
from tribuild.queries.targets import reached_instances, target_report

from . import common

REPO = Path(__file__).resolve().parents[3]


@cache
def database() -> tuple[Database, tuple[str, ...]]:
    """The zoo loaded into a fresh query database, with its file closure."""
    db = Database()
    return db, load_sources(db, str(REPO), scan(str(REPO), ("models",)))


def instance(entry: str, args: dict) -> InstanceKey:
    """The instance ``entry`` ("models/x.tri:Layer") builds with ``args``; it must check clean."""
    path, layer = entry.split(":")
    report = target_report(
        database()[0], path, layer, tuple(sorted((k, normalise(v)) for k, v in args.items())), None
    )
    if report.problem or report.diagnostics:
        raise AssertionError(f"{entry} {args}: {report.problem or report.diagnostics}")
    return report.root


def members(key: InstanceKey) -> tuple:
    return checked_instance(database()[0], key).members


def reached_layers(key: InstanceKey) -> set[str]:
    """Names of the user layers an instance builds, itself included."""
    return {k.name for k, _ in reached_instances(database()[0], key).instances}


def zoo_layers() -> set[str]:
    """Every layer item in the zoo."""
    db, files = database()
    return {e.name for f in files for e in item_index(db, f) if e.kind == "layer"}


def output_shape(key: InstanceKey, input_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The forward's declared output shape once its input dims are bound to ``input_shape``."""
    inst = checked_instance(database()[0], key)
    formal, out = inst.inputs[0], inst.output
    unifier = Unifier(set().union(*(dims.symbols(d) for d in formal.dims)))
    problem = unifier.tensor(
        formal, TensorT(formal.dtype, tuple(dims.const(n) for n in input_shape))
    )
    assert problem is None, f"input {input_shape} does not fit {formal}: {problem}"
    return tuple(dims.as_int(unifier.apply(d)) for d in out.dims)


def _child(layer: LayerV) -> InstanceKey:
    return InstanceKey(layer.ref.path, layer.ref.item_id, layer.name, layer.args)


def _is_layer(value) -> bool:
    return isinstance(value, LayerV) or (isinstance(value, tuple) and all(map(_is_layer, value)))


def expected_state(key: InstanceKey, prefix: str = "") -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for name, value in members(key):
        out.update(_value_state(value, f"{prefix}{name}."))
    return out


def _value_state(value, prefix: str) -> dict[str, tuple[int, ...]]:
    if isinstance(value, tuple):
        return {
            k: v
            for i, item in enumerate(value)
            for k, v in _value_state(item, f"{prefix}{i}.").items()
        }
    if not isinstance(value, LayerV):
        return {}
    if value.ref is not None:
        return expected_state(_child(value), prefix)
    a = dict(value.args)
    if value.name == "Sequential":
        return _value_state(a["layers"], prefix)
    return {prefix + k: shape for k, shape in _builtin_state(value.name, a).items()}


def _builtin_state(name: str, a: dict) -> dict[str, tuple[int, ...]]:
    if name in ("Linear", "TernaryLinear"):
        weight = {"weight": (a["out_features"], a["in_features"])}
        return weight | ({"bias": (a["out_features"],)} if a["bias"] else {})
    if name in ("Conv2d", "TernaryConv2d"):
        k = a["kernel"]
        weight = {"weight": (a["out_channels"], a["in_channels"] // a["groups"], k, k)}
        return weight | ({"bias": (a["out_channels"],)} if a["bias"] else {})
    if name == "BatchNorm2d":
        c = (a["features"],)
        return {
            "weight": c,
            "bias": c,
            "running_mean": c,
            "running_var": c,
            "num_batches_tracked": (),
        }
    if name == "LayerNorm":
        return {"weight": (a["features"],), "bias": (a["features"],)}
    if name == "RMSNorm":
        return {"weight": (a["features"],)}
    if name == "Embedding":
        return {"weight": (a["vocab"], a["dim"])}
    if name == "MultiHeadAttention":
        d = a["d"]
        return {
            "in_proj_weight": (3 * d, d),
            "in_proj_bias": (3 * d,),
            "out_proj.weight": (d, d),
            "out_proj.bias": (d,),
        }
    return {}


def mismatches(module: nn.Module, key: InstanceKey, path: str = "") -> list[str]:
    """Where ``module`` differs from the instance ``key`` (an empty list when it mirrors it)."""
    here = path or key.name
    out = (
        []
        if type(module).__name__ == key.name
        else [f"{here}: class {type(module).__name__}, expected {key.name}"]
    )
    expected = [(n, v) for n, v in members(key) if _is_layer(v)]
    children = dict(module.named_children())
    if set(children) != {n for n, _ in expected}:
        out.append(
            f"{here}: children {sorted(children)}, expected {sorted(n for n, _ in expected)}"
        )
    for name, value in expected:
        if name in children:
            out += _compare(children[name], value, f"{here}.{name}")
    return out


def _compare(module: nn.Module, value, path: str) -> list[str]:
    if isinstance(value, tuple):
        if type(module) is not nn.ModuleList or len(module) != len(value):
            return [f"{path}: {type(module).__name__}, expected a ModuleList of {len(value)}"]
        return [m for i, v in enumerate(value) for m in _compare(module[i], v, f"{path}[{i}]")]
    if value.ref is not None:
        return mismatches(module, _child(value), path)
    a = dict(value.args)
    if value.name == "Sequential":
        if type(module) is not nn.Sequential or len(module) != len(a["layers"]):
            return [f"{path}: {type(module).__name__}, expected a Sequential of {len(a['layers'])}"]
        return [
            m for i, v in enumerate(a["layers"]) for m in _compare(module[i], v, f"{path}[{i}]")
        ]
    cls, attrs = _builtin_module(value.name, a)
    if type(module) is not cls:
        return [f"{path}: {type(module).__name__}, expected {cls.__name__}"]
    found = {k: getattr(module, k) for k in attrs}
    return [] if found == attrs else [f"{path}: {found}, expected {attrs}"]


def _linear_attrs(a: dict) -> dict:
    return {"in_features": a["in_features"], "out_features": a["out_features"]}


def _conv_attrs(a: dict) -> dict:
    return {
        "in_channels": a["in_channels"],
        "out_channels": a["out_channels"],
        "groups": a["groups"],
        "kernel_size": (a["kernel"],) * 2,
        "stride": (a["stride"],) * 2,
        "padding": (a["padding"],) * 2,
    }


def _pool_attrs(a: dict) -> dict:
    return {
        "kernel_size": a["kernel"],
        "stride": a["kernel"] if a["stride"] is None else a["stride"],
        "padding": a["padding"],
    }


# built-in -> the attributes of its PyTorch module that its arguments fix
_ATTRS = {
    "Linear": _linear_attrs,
    "TernaryLinear": _linear_attrs,
    "Conv2d": _conv_attrs,
    "TernaryConv2d": _conv_attrs,
    "MaxPool2d": _pool_attrs,
    "AvgPool2d": _pool_attrs,
    "BatchNorm2d": lambda a: {"num_features": a["features"], "eps": a["eps"]},
    "LayerNorm": lambda a: {"normalized_shape": (a["features"],), "eps": a["eps"]},
    "RMSNorm": lambda a: {"eps": a["eps"]},
    "Dropout": lambda a: {"p": a["p"]},
    "Embedding": lambda a: {"num_embeddings": a["vocab"], "embedding_dim": a["dim"]},
    "MultiHeadAttention": lambda a: {"heads": a["heads"]},
}
# built-ins whose module is one of common.py's classes (the others are torch.nn's namesakes)
_CLASSES = {
    "TernaryLinear": common.TernaryLinear,
    "TernaryConv2d": common.TernaryConv2d,
    "RMSNorm": common.RMSNorm,
    "MultiHeadAttention": common.MultiHeadAttention,
}


def _builtin_module(name: str, a: dict) -> tuple[type, dict]:
    """The PyTorch class a built-in maps to, and the attributes its arguments fix."""
    attrs = _ATTRS.get(name, lambda a: {})(a)
    if "scale" in a:
        attrs["scale"] = a["scale"]
    return _CLASSES.get(name) or getattr(nn, name), attrs
