"""Code generation as queries: a target's module source, kernel sources, and the build.

Terms:
- *instance_fns(key, level)*: the fn bodies an instance's optimized graph calls
  (``module.fn_bodies``): what naming a module needs of each graph, and equal after most
  body edits, so the names of a module are not recomputed from graphs.
- *ClassContext*: what one instance's class depends on beyond the instance: its class name,
  whether it is the target's root, the class names of the instances its members build (in
  the order of ``children``: its distinct ``instance_children``) and the module's fn
  functions. Targets that reach an instance under the same names share its class.
- *class_source(key, level, context)*: one instance's class text and kernels, or, when the
  instance has no graph (a construct codegen cannot express, or its own errors), why not.
  Editing one layer's body regenerates the classes of its instances only.
- *module_source(...)*: the generated module of one target at one level: the join of the
  classes of every instance it reaches; ``ModuleSource`` also lists the kernels it uses.
  Front-end errors, or a construct codegen cannot express, give no text.
- *kernel_source(spec)*: the text of one kernel file; the spec is its key, so a kernel used
  by several layers or targets is generated once.
- *target_build(...)*: the contract with the build driver: every file of a target
  (``<name>.py`` and ``kernels/<key>.py``), or the diagnostics / problem that stop it.
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.codegen.kernels import KernelSpec
from tribuild.codegen.kernels import kernel_source as render_kernel
from tribuild.codegen.module import (
    Instance,
    ModuleText,
    class_text,
    fn_bodies,
    module_names,
    module_text,
)
from tribuild.diagnostics import Diagnostic
from tribuild.engine import derived
from tribuild.ir.graph import Graph
from tribuild.lang import InstanceKey
from tribuild.queries.lower import optimized_ir
from tribuild.queries.semantic import checked_instance, instance_children
from tribuild.queries.targets import reached_instances, target_report


@record
class GeneratedFile:
    relpath: str
    text: str


@record
class TargetBuild:
    files: tuple[GeneratedFile, ...]
    diagnostics: tuple[Diagnostic, ...]
    problem: str | None


@record
class ModuleSource:
    text: str | None
    kernels: tuple[KernelSpec, ...]
    diagnostics: tuple[Diagnostic, ...]
    problem: str | None


def _errors(diags: tuple[Diagnostic, ...]) -> bool:
    return any(d.severity == "error" for d in diags)


@record
class ClassContext:
    name: str
    root: bool
    children: tuple[str, ...]
    fns: tuple[tuple[Graph, str], ...]


@record
class ClassSource:
    text: str | None
    kernels: tuple[KernelSpec, ...]
    diagnostics: tuple[
        Diagnostic, ...
    ]  # why there is no text: the lowering's, the instance's errors


def children(db, key: InstanceKey) -> tuple[InstanceKey, ...]:
    """The distinct instances the members of ``key`` build, in member order."""
    return tuple(dict.fromkeys(child for _, child in instance_children(db, key)))


@derived
def instance_fns(db, key: InstanceKey, opt_level: str) -> tuple[tuple[str, Graph], ...]:
    graph = optimized_ir(db, key, opt_level).graph
    return () if graph is None else fn_bodies(graph)


@derived
def class_source(db, key: InstanceKey, opt_level: str, context: ClassContext) -> ClassSource:
    lowered = optimized_ir(db, key, opt_level)
    checked = checked_instance(db, key)
    if lowered.graph is None:  # E0601, or the instance's own errors
        errors = tuple(d for d in checked.diagnostics if d.severity == "error")
        return ClassSource(None, (), lowered.diagnostics + errors)
    out = class_text(
        Instance(key, checked.members, lowered.graph),
        opt_level,
        context.name,
        context.root,
        dict(zip(children(db, key), context.children, strict=True)),
        dict(context.fns),
    )
    return ClassSource(out.text, out.kernels, ())


@derived
def module_source(
    db,
    name: str,
    entry_path: str,
    layer: str,
    args: tuple,
    input_shape: tuple | None,
    opt_level: str,
) -> ModuleSource:
    report = target_report(db, entry_path, layer, args, input_shape)
    if report.root is None or _errors(report.diagnostics):
        return ModuleSource(None, (), report.diagnostics, report.problem)
    keys = [key for key, _ in reached_instances(db, report.root).instances]
    names, fn_names = module_names(keys, [instance_fns(db, key, opt_level) for key in keys])
    fns = tuple(fn_names.items())
    classes = []
    for key in keys:
        context = ClassContext(
            names[key], key == report.root, tuple(names[c] for c in children(db, key)), fns
        )
        piece = class_source(db, key, opt_level, context)
        if piece.text is None:
            own = tuple(d for d in piece.diagnostics if d not in report.diagnostics)
            return ModuleSource(None, (), report.diagnostics + own, None)
        classes.append(ModuleText(piece.text, piece.kernels))
    out = module_text(
        name,
        f"{entry_path}:{layer}",
        report.root,
        names[report.root],
        classes[::-1],
        fn_names,
        opt_level,
    )
    return ModuleSource(out.text, out.kernels, report.diagnostics, None)


@derived
def kernel_source(db, spec: KernelSpec) -> str:
    return render_kernel(spec)


@derived
def target_build(
    db,
    name: str,
    entry_path: str,
    layer: str,
    args: tuple,
    input_shape: tuple | None,
    opt_level: str,
) -> TargetBuild:
    module = module_source(db, name, entry_path, layer, args, input_shape, opt_level)
    if module.text is None:
        return TargetBuild((), module.diagnostics, module.problem)
    files = [GeneratedFile(f"{name}.py", module.text)]
    files += [
        GeneratedFile(f"kernels/{spec.key}.py", kernel_source(db, spec)) for spec in module.kernels
    ]
    return TargetBuild(tuple(files), module.diagnostics, None)
