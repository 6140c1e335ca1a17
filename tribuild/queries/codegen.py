"""Code generation as queries: a target's module source, kernel sources, and the build.

Terms:
- *module_source(...)*: the generated module of one target at one level, from the
  optimized graphs of every instance it reaches; ``ModuleSource`` also lists the kernels it
  uses. Front-end errors, or a construct codegen cannot express, give no text.
- *kernel_source(spec)*: the text of one kernel file; the spec is its key, so a kernel used
  by several layers or targets is generated once.
- *target_build(...)*: the contract with the build driver: every file of a target
  (``<name>.py`` and ``kernels/<key>.py``), or the diagnostics / problem that stop it.
"""
from __future__ import annotations


from tribuild.codegen.kernels import KernelSpec, kernel_source as render_kernel
from tribuild.codegen.module import Instance, module_text
from tribuild.diagnostics import Diagnostic
from tribuild.engine import derived
from tribuild.queries.lower import optimized_ir
from tribuild.queries.semantic import checked_instance
from tribuild.queries.targets import reached_instances, target_report
from tribuild.record import record


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


@derived
def module_source(db, name: str, entry_path: str, layer: str, args: tuple, input_shape: tuple | None,
                  opt_level: str) -> ModuleSource:
    report = target_report(db, entry_path, layer, args, input_shape)
    if report.root is None or _errors(report.diagnostics):
        return ModuleSource(None, (), report.diagnostics, report.problem)
    instances = []
    for key, _ in reached_instances(db, report.root).instances:
        lowered = optimized_ir(db, key, opt_level)
        checked = checked_instance(db, key)
        if lowered.graph is None:   # E0601, or the instance's own errors
            own = tuple(d for d in checked.diagnostics if d.severity == "error" and d not in report.diagnostics)
            return ModuleSource(None, (), report.diagnostics + lowered.diagnostics + own, None)
        instances.append(Instance(key, checked.members, lowered.graph))
    out = module_text(name, f"{entry_path}:{layer}", report.root, instances, opt_level)
    return ModuleSource(out.text, out.kernels, report.diagnostics, None)


@derived
def kernel_source(db, spec: KernelSpec) -> str:
    return render_kernel(spec)


@derived
def target_build(db, name: str, entry_path: str, layer: str, args: tuple, input_shape: tuple | None,
                 opt_level: str) -> TargetBuild:
    module = module_source(db, name, entry_path, layer, args, input_shape, opt_level)
    if module.text is None:
        return TargetBuild((), module.diagnostics, module.problem)
    files = [GeneratedFile(f"{name}.py", module.text)]
    files += [GeneratedFile(f"kernels/{spec.key}.py", kernel_source(db, spec)) for spec in module.kernels]
    return TargetBuild(tuple(files), module.diagnostics, None)
