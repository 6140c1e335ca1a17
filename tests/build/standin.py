"""A stand-in for ``tribuild.queries.codegen.target_build`` (the codegen contract of
interfaces.md), used until the real code generator lands: the module lists every instance
the target reaches, and each distinct instance below the root gets a "kernel" file keyed by a hash
of what it is, so identical layers across targets share one file, as real kernels do.

``install()`` points the driver at it (in this process)."""
from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass

from tribuild.build.depfile import import_closure
from tribuild.diagnostics import Diagnostic
from tribuild.engine import derived
from tribuild.lang.values import describe_instance
from tribuild.queries.registry import register_values
from tribuild.queries.report import file_diagnostics
from tribuild.queries.targets import reached_instances, target_report


@dataclass(frozen=True, slots=True)
class GeneratedFile:
    relpath: str
    text: str


@dataclass(frozen=True, slots=True)
class TargetBuild:
    files: tuple[GeneratedFile, ...]
    diagnostics: tuple[Diagnostic, ...]
    problem: str | None


@derived
def target_build(db, name, entry_path, layer, args, input_shape, opt_level) -> TargetBuild:
    report = target_report(db, entry_path, layer, args, input_shape)
    if report.problem is not None:
        return TargetBuild((), (), report.problem)
    diagnostics = tuple(d for path in import_closure(db, entry_path)
                        for d in file_diagnostics(db, path)) + report.diagnostics
    if any(d.severity == "error" for d in diagnostics):
        return TargetBuild((), diagnostics, None)
    lines = [f"# {name}: {layer} at -O{opt_level}"]
    kernels = {}
    for key, chain in reached_instances(db, report.root):
        text = describe_instance(key)
        lines.append(f"# {'.'.join(m for m, _ in chain) or '<root>'}: {text}")
        if chain:
            digest = hashlib.blake2b(f"{text}|{opt_level}".encode(), digest_size=6).hexdigest()
            kernels[f"kernels/k_{digest}.py"] = f"# kernel for {text} at -O{opt_level}\n"
    lines += [f"from .kernels import k_{k[10:-3]}" for k in sorted(kernels)]
    module = GeneratedFile(f"{name}.py", "\n".join(lines) + "\n")
    files = (module,) + tuple(GeneratedFile(k, t) for k, t in sorted(kernels.items()))
    return TargetBuild(files, diagnostics, None)


register_values((sys.modules[__name__],))


def install(monkeypatch=None) -> None:
    from tribuild.build import driver
    if monkeypatch is None:
        driver.target_build_query = lambda: target_build
    else:
        monkeypatch.setattr(driver, "target_build_query", lambda: target_build)
