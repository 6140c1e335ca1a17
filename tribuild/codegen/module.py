"""The generated PyTorch module of one target: every instance it reaches as a class.

Terms:
- *Instance*: what codegen needs of one layer instance: its key, its members (construction
  values) and its optimized graph.
- *class per instance*: each distinct instance becomes one ``nn.Module`` class, specialised
  to its construction arguments (the graph is optimized per instance). It is named as the
  source layer when the target has one instance of it, else ``<Layer>_<k>`` (``k`` counts
  from 1 in breadth-first order from the root); its docstring names the instance
  (``BasicBlock cin=64 width=128 stride=2``). Members keep their source names, so
  state_dict keys read like PyTorch's, except names that clash with ``nn.Module``'s
  (``pyname.member_names``). ``Model`` is the root class; ``build()`` makes one.
- *module names*: classes, fn functions and the module's own globals (``pyname.RESERVED``)
  never share a name (a later one gets a trailing ``_``); locals and parameters avoid them.
- *plain kernels*: every ternary member used unfused somewhere (applied, or reached through
  an applied ``Sequential``/list) is built with the kernel of its plain epilogue.
- *fn functions*: user fns that were not inlined, one module-level function per distinct body.
- *ModuleText*: generated text, one class (``class_text``) or a whole module
  (``module_text``, the join of its classes), with the kernels it uses.
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.codegen.body import body_lines
from tribuild.codegen.fmt import wrap, wrap_text
from tribuild.codegen.kernels import KernelSpec, node_kernels
from tribuild.codegen.members import dtype_lines, init_lines, weight_access, weight_lines
from tribuild.codegen.pyname import RESERVED, docstring, ident, literal, member_names
from tribuild.ir.graph import Graph, Node
from tribuild.lang import InstanceKey, LayerV, TensorT, Value, describe_instance, dims

_FLOAT = TensorT("float32", None)  # the type of the nodes that stand for plain member uses


@record
class Instance:
    key: InstanceKey
    members: tuple[tuple[str, Value], ...]
    graph: Graph


@record
class ModuleText:
    text: str
    kernels: tuple[KernelSpec, ...]


def _unique(base: str, taken: set[str]) -> str:
    name = base
    while name in taken or name in RESERVED:
        name += "_"
    taken.add(name)
    return name


def class_names(keys: list[InstanceKey], taken: set[str]) -> dict[InstanceKey, str]:
    by_name: dict[str, list[InstanceKey]] = {}
    for key in keys:
        by_name.setdefault(key.name, []).append(key)
    out = {}
    for key in keys:
        group = by_name[key.name]
        base = ident(key.name) if len(group) == 1 else f"{key.name}_{group.index(key) + 1}"
        out[key] = _unique(base, taken)
    return out


def _plain_specs(
    value: Value, path: tuple[object, ...], level: str
) -> dict[tuple[object, ...], tuple[KernelSpec, ...]]:
    """Plain-epilogue kernels of every ternary layer inside a member value, by path."""
    if isinstance(value, tuple):
        return {
            p: s
            for i, v in enumerate(value)
            for p, s in _plain_specs(v, path + (i,), level).items()
        }
    if not isinstance(value, LayerV) or value.ref is not None:
        return {}
    if value.name == "Sequential":
        return _plain_specs(dict(value.args)["layers"], path, level)
    specs = node_kernels(Node("apply", (), (("layer", value),), _FLOAT, ""), level)
    return {path: specs} if specs else {}


def _member_kernels(inst: Instance, level: str) -> dict[tuple[object, ...], tuple[KernelSpec, ...]]:
    fused_only = {n.attr("path") for n in inst.graph.nodes if n.op == "ternary"}
    applied = [n.attr("path") for n in inst.graph.nodes if n.op == "apply"]
    fused_only = {p for p in fused_only if not any(p[: len(a)] == a for a in applied)}
    out = {}
    for name, value in inst.members:
        out.update(_plain_specs(value, (name,), level))
    return {p: s for p, s in out.items() if p not in fused_only}


def fn_bodies(g: Graph) -> tuple[tuple[str, Graph], ...]:
    """The fns ``g`` calls that were not inlined, as ``(fn name, body)``: each distinct body
    once, callees before their callers."""
    out: dict[Graph, str] = {}

    def visit(g: Graph) -> None:
        for n in g.nodes:
            if n.op == "fn_call" and n.attr("body") not in out:
                visit(n.attr("body"))
                out[n.attr("body")] = n.attr("fn")

    visit(g)
    return tuple((fn, body) for body, fn in out.items())


def module_names(
    keys: list[InstanceKey], fns: list[tuple[tuple[str, Graph], ...]]
) -> tuple[dict[InstanceKey, str], dict[Graph, str]]:
    """The class of each instance and the function of each fn body (``fns``: each instance's
    ``fn_bodies``, in the order of ``keys``)."""
    taken: set[str] = set()
    names = class_names(keys, taken)
    fn_names: dict[Graph, str] = {}
    for bodies in fns:
        for fn, body in bodies:
            if body not in fn_names:
                fn_names[body] = _unique(ident(fn), taken)
    return names, fn_names


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

    def function(
        self,
        name: str,
        g: Graph,
        indent: str,
        attrs: dict[str, str] | None = None,
        checked: str | None = None,
    ) -> list[str]:
        """The function ``name`` computing ``g``: a method (``self`` first, weights read from
        ``self``) when the class's member ``attrs`` are given; ``checked``: the layer whose
        signature its tensor inputs are checked against first (see ``input_checks``)."""
        weights = weight_access(g, attrs or {})
        params: list[str] = []
        for i in g.params():
            if i not in weights:
                params.append(
                    _unique(ident(g.nodes[i].name), set(params) | set(self.fn_names.values()))
                )
        args = ", ".join((["self"] if attrs is not None else []) + params)
        lines = [f"{indent}def {name}({args}):"]
        data = iter(params)
        inputs = [weights[i] if i in weights else next(data) for i in g.params()]
        if checked is not None:
            for line in input_checks(g, inputs, weights, checked):
                lines += wrap(line, indent + "    ")
        for line in body_lines(g, inputs, self.kernels_of, self.fn_names, attrs or {}):
            lines += wrap(line, indent + "    ")
        return lines


def _shape_test(x: str, t: TensorT, dtype: str | None) -> str | None:
    """A Python condition true when tensor ``x`` does not have ``t``'s rank and fixed dims,
    or (``dtype``: where the dtype it must have is read) its dtype."""
    dtype_test = [f"{x}.dtype != {dtype}"] if dtype is not None else []
    if t.dims is None:
        return dtype_test[0] if dtype_test else None
    rank = len(t.dims)
    fixed = [(i, v) for i, d in enumerate(t.dims) if (v := dims.as_int(d)) is not None]
    first = fixed[0][0] if fixed else rank
    if fixed and [i for i, _ in fixed] == list(range(first, rank)):
        tests = [f"{x}.shape[{first}:] != {literal(tuple(v for _, v in fixed))}"]
    else:
        tests = [f"{x}.dim() != {rank}"] + [f"{x}.shape[{i}] != {v}" for i, v in fixed]
    return " or ".join(tests + dtype_test)


def _checked_dtype(t: object) -> str | None:
    """The dtype an entry's input is checked for: None for trits, which a tensor may hold in
    several dtypes."""
    if not isinstance(t, TensorT) or t.ternary or t.dtype == "trit":
        return None
    return t.dtype


def input_dtypes(g: Graph, weights: dict[int, str]) -> list[str]:
    """The declared dtypes of the inputs an entry's ``forward`` checks the dtype of, in order:
    the class's ``input_dtypes``, which ``model.Module._apply`` follows when the model is moved
    (``.half()``, ``.to(torch.float64)``), so a model moved to a dtype takes inputs of it."""
    return [
        d
        for i in g.params()
        if i not in weights and (d := _checked_dtype(g.nodes[i].type)) is not None
    ]


def input_checks(g: Graph, inputs: list[str], weights: dict[int, str], layer: str) -> list[str]:
    """The statements that check each tensor input of an entry's ``forward`` (its rank, its
    fixed dims and its dtype, as declared in the ``.tri`` signature), once per call: a
    comparison of ``x.shape`` with a tuple and of ``x.dtype`` with ``self.input_dtypes[k]``,
    and on a mismatch ``model.wrong_input``, whose ValueError names the layer, the declared
    type and what came."""
    out = []
    k = 0
    for i, x in zip(g.params(), inputs, strict=True):
        t = g.nodes[i].type
        if i in weights or not isinstance(t, TensorT):
            continue
        dtype = None
        if _checked_dtype(t) is not None:
            dtype, k = f"self.input_dtypes[{k}]", k + 1
        test = _shape_test(x, t, dtype)
        if test is not None:
            args = ", ".join(literal(a) for a in (layer, g.nodes[i].name, str(t)))
            out += [f"if {test}:", f"    model.wrong_input({args}, {x})"]
    return out


def class_text(
    inst: Instance,
    level: str,
    name: str,
    root: bool,
    children: dict[InstanceKey, str],
    fn_names: dict[Graph, str],
) -> ModuleText:
    """The class ``name`` of one instance (``root``: the target's entry, which also gets
    ``ARGS``); ``children`` names the classes its members build, ``fn_names`` the module's fn
    functions. Its kernels in order of first use."""
    em = _Emitter(level, fn_names)
    kernels = {p: em.keys(s) for p, s in _member_kernels(inst, level).items()}
    weights = tuple(inst.graph.nodes[i].name for i in inst.graph.weights())
    attrs = member_names(tuple(member for member, _ in inst.members) + weights)
    doc = docstring(wrap_text(f"{describe_instance(inst.key)} ({inst.key.path}).", 88)).replace(
        "\n", "\n    "
    )
    lines = [f"class {name}(model.Module):", f"    {doc}", ""]
    if root:
        lines += wrap(
            f"ARGS = {{{', '.join(f'{literal(k)}: {literal(v)}' for k, v in inst.key.args)}}}",
            "    ",
        )
        declared = input_dtypes(inst.graph, weight_access(inst.graph, attrs))
        if declared:
            lines += wrap(
                f"input_dtypes = ({''.join(f'torch.{d}, ' for d in declared).rstrip()})",
                "    ",
            )
        lines.append("")
    lines += ["    def __init__(self):", "        super().__init__()"]
    for line in (
        init_lines(inst.members, attrs, kernels, children.__getitem__)
        + weight_lines(inst.graph, attrs)
        + dtype_lines(inst.graph, attrs)
    ):
        lines += wrap(line, "        ")
    checked = inst.key.name if root else None
    lines += [""] + em.function("forward", inst.graph, "    ", attrs, checked)
    return ModuleText("\n".join(lines), tuple(em.specs.values()))


def module_text(
    target: str,
    entry: str,
    root: InstanceKey,
    root_name: str,
    classes: list[ModuleText],
    fn_names: dict[Graph, str],
    level: str,
) -> ModuleText:
    """The module of a target: its fn functions, then ``classes`` (each instance's
    ``class_text``, the root's last), ``Model`` and ``build()``, under a header importing
    what the body uses and loading its kernels."""
    em = _Emitter(level, fn_names)
    chunks = ["\n".join(em.function(fname, g, "")) for g, fname in fn_names.items()]
    chunks += [c.text for c in classes]
    chunks += [f"Model = {root_name}", "def build() -> Model:\n    return Model()"]
    body = "\n\n\n".join(chunks) + "\n"
    specs = dict(em.specs)
    for c in classes:
        for spec in c.kernels:
            specs.setdefault(spec.key, spec)
    head = _header(target, entry, root, level, body, sorted(specs))
    return ModuleText(head + body, tuple(specs[k] for k in sorted(specs)))


def _header(
    target: str, entry: str, root: InstanceKey, level: str, body: str, keys: list[str]
) -> str:
    about = (
        f"Generated by tribuild from {entry} at -O{level}; do not edit. Entry layer: "
        f"{describe_instance(root)}. `build()` makes the model, initialized as PyTorch "
        "initializes its layers and trainable (`freeze()` keeps only the packed ternary "
        "weights); `Model.from_float(state_dict)` ternarizes and loads float weights, those of "
        "`Model.float_module()`, its float twin."
    )
    doc = docstring(f"Target {target}.\n\n{wrap_text(about)}\n") + "\n"
    imports = ["import torch"]
    imports += ["import torch.nn.functional as F"] if "F." in body else []
    imports += ["from torch import nn", ""]
    runtime = [m for m in ("decoding", "launch", "model") if f"{m}." in body] + (
        ["nn as ternary"] if "ternary." in body else []
    )
    imports.append(f"from tribuild.runtime import {', '.join(runtime)}")
    text = doc + "\n".join(imports) + "\n"
    if keys:
        text += (
            "\n"
            + "\n".join(wrap(f"K = model.load_kernels(__file__, {literal(tuple(keys))})", ""))
            + "\n"
        )
    return text + "\n\n"
