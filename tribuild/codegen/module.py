"""The generated PyTorch module of one target: every instance it reaches as a class.

Terms:
- *Instance*: what codegen needs of one layer instance: its key, its members (construction
  values) and its optimized graph.
- *class per instance*: each distinct instance becomes one ``nn.Module`` class, specialised
  to its construction arguments (the graph is optimized per instance). It is named as the
  source layer when the target has one instance of it, else ``<Layer>_<k>`` (``k`` counts
  from 1 in breadth-first order from the root); its docstring names the instance
  (``BasicBlock cin=64 width=128 stride=2``). Members keep their source names, so
  state_dict keys read like PyTorch's. ``Model`` is the root class; ``build()`` makes one.
- *plain kernels*: every ternary member used unfused somewhere (applied, or reached through
  an applied ``Sequential``/list) is built with the kernel of its plain epilogue.
- *fn functions*: user fns that were not inlined, one module-level function per distinct body.
"""
from __future__ import annotations

from dataclasses import dataclass

from tribuild.codegen.body import body_lines
from tribuild.codegen.fmt import wrap, wrap_text
from tribuild.codegen.kernels import KernelSpec, node_kernels
from tribuild.codegen.members import init_lines
from tribuild.codegen.pyname import ident, literal
from tribuild.ir.graph import Graph, Node
from tribuild.lang.types import TensorT
from tribuild.lang.values import InstanceKey, LayerV, Value, describe_instance

_FLOAT = TensorT("float32", None)  # the type of the nodes that stand for plain member uses


@dataclass(frozen=True, slots=True)
class Instance:
    key: InstanceKey
    members: tuple[tuple[str, Value], ...]
    graph: Graph


@dataclass(frozen=True, slots=True)
class ModuleText:
    text: str
    kernels: tuple[KernelSpec, ...]


def class_names(keys: list[InstanceKey]) -> dict[InstanceKey, str]:
    by_name: dict[str, list[InstanceKey]] = {}
    for key in keys:
        by_name.setdefault(key.name, []).append(key)
    out, taken = {}, set()
    for key in keys:
        group = by_name[key.name]
        base = ident(key.name) if len(group) == 1 else f"{key.name}_{group.index(key) + 1}"
        name = base
        while name in taken:
            name += "_"
        out[key] = name
        taken.add(name)
    return out


def _plain_specs(value: Value, path: tuple, level: str) -> dict[tuple, tuple[KernelSpec, ...]]:
    """Plain-epilogue kernels of every ternary layer inside a member value, by path."""
    if isinstance(value, tuple):
        return {p: s for i, v in enumerate(value) for p, s in _plain_specs(v, path + (i,), level).items()}
    if not isinstance(value, LayerV) or value.ref is not None:
        return {}
    if value.name == "Sequential":
        return _plain_specs(dict(value.args)["layers"], path, level)
    fake = Node("apply", (), (("layer", value),), _FLOAT, "")
    return {path: node_kernels(fake, level)} if node_kernels(fake, level) else {}


def _member_kernels(inst: Instance, level: str) -> dict[tuple, tuple[KernelSpec, ...]]:
    fused_only = {n.attr("path") for n in inst.graph.nodes if n.op == "ternary"}
    applied = [n.attr("path") for n in inst.graph.nodes if n.op == "apply"]
    fused_only = {p for p in fused_only if not any(p[:len(a)] == a for a in applied)}
    out = {}
    for name, value in inst.members:
        out.update(_plain_specs(value, (name,), level))
    return {p: s for p, s in out.items() if p not in fused_only}


def _fn_names(instances: list[Instance]) -> dict[Graph, str]:
    out: dict[Graph, str] = {}
    taken: set[str] = set()

    def visit(g: Graph) -> None:
        for n in g.nodes:
            if n.op == "fn_call" and n.attr("body") not in out:
                visit(n.attr("body"))
                name = ident(n.attr("fn"))
                while name in taken:
                    name += "_"
                out[n.attr("body")] = name
                taken.add(name)

    for inst in instances:
        visit(inst.graph)
    return out


class _Emitter:
    def __init__(self, level: str, fn_names: dict[Graph, str]):
        self.level = level
        self.fn_names = fn_names
        self.specs: dict[str, KernelSpec] = {}

    def keys(self, specs: tuple[KernelSpec, ...]) -> tuple[str, ...]:
        for s in specs:
            self.specs[s.key] = s
        return tuple(s.key for s in specs)

    def kernels_of(self, n: Node) -> tuple[str, ...]:
        return self.keys(node_kernels(n, self.level))

    def function(self, header: str, g: Graph, params: list[str], indent: str) -> list[str]:
        lines = [indent + header]
        for line in body_lines(g, params, self.kernels_of, self.fn_names):
            lines += wrap(line, indent + "    ")
        return lines


def _params(g: Graph) -> list[str]:
    return [ident(g.nodes[i].name) for i in g.params()]


def module_text(target: str, entry: str, root: InstanceKey, instances: list[Instance], level: str) -> ModuleText:
    names = class_names([i.key for i in instances])
    fn_names = _fn_names(instances)
    em = _Emitter(level, fn_names)
    chunks: list[list[str]] = []
    for g, fname in fn_names.items():
        params = _params(g)
        chunks.append(em.function(f"def {fname}({', '.join(params)}):", g, params, ""))
    for inst in reversed(instances):
        kernels = {p: em.keys(s) for p, s in _member_kernels(inst, level).items()}
        doc = wrap_text(f"{describe_instance(inst.key)} ({inst.key.path}).", 88).replace("\n", "\n    ")
        lines = [f"class {names[inst.key]}(model.Module):", f'    """{doc}"""', ""]
        if inst.key == root:
            lines += wrap(f"ARGS = {{{', '.join(f'{literal(k)}: {literal(v)}' for k, v in root.args)}}}", "    ")
            lines.append("")
        lines += ["    def __init__(self):", "        super().__init__()"]
        for line in init_lines(inst.members, kernels, lambda k: names[k]):
            lines += wrap(line, "        ")
        params = _params(inst.graph)
        lines += [""] + em.function(f"def forward(self, {', '.join(params)}):", inst.graph, params, "    ")
        chunks.append(lines)
    chunks.append([f"Model = {names[root]}"])
    chunks.append(["def build() -> Model:", "    return Model()"])
    body = "\n\n\n".join("\n".join(c) for c in chunks) + "\n"
    head = _header(target, entry, root, level, body, sorted(em.specs))
    return ModuleText(head + body, tuple(em.specs[k] for k in sorted(em.specs)))


def _header(target: str, entry: str, root: InstanceKey, level: str, body: str, keys: list[str]) -> str:
    about = (f"Generated by tribuild from {entry} at -O{level}; do not edit. Entry layer: "
             f"{describe_instance(root)}. `build()` makes the model with packed ternary weights; "
             "`Model.from_float(state_dict)` ternarizes and loads float weights.")
    doc = f'"""Target {target}.\n\n{wrap_text(about)}\n"""\n'
    imports = ["import torch"]
    imports += ["import torch.nn.functional as F"] if "F." in body else []
    imports += ["from torch import nn", ""]
    gpu = [m for m in ("launch", "model") if f"{m}." in body] + (["nn as ternary"] if "ternary." in body else [])
    imports.append(f"from tribuild.gpu import {', '.join(gpu)}")
    text = doc + "\n".join(imports) + "\n"
    if keys:
        text += "\n" + "\n".join(wrap(f"K = model.load_kernels(__file__, {literal(tuple(keys))})", "")) + "\n"
    return text + "\n\n"
