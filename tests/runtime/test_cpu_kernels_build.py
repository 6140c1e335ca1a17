"""The CPU kernels as build artifacts (``tribuild.runtime.kernels.cpu.build``) and the runtime's
fallbacks: a second process loads the library the first compiled (nothing compiled again); a
library in the cache that was built for another ISA is refused; no compiler, or a source that
does not compile, is said once (the layer, the compiler's first error, the fallback) and the
CPU runs the torch path. Real compilers and real processes; each test has its own cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

from tribuild.runtime import backends, launch, native  # noqa: E402
from tribuild.runtime.kernels.cpu import build  # noqa: E402

COMPILER = build.find_compiler()
needs_compiler = pytest.mark.skipif(COMPILER is None, reason="no C++ compiler")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# In a fresh process: choose the backend for a CPU tensor (auto mode, no interpreter), and say
# which it is and whether the library was compiled by this process (its file is newer).
CHILD = """
import os, sys, time
os.environ.pop("TRITON_INTERPRET", None)
import torch
from tribuild.runtime import launch, native
from tribuild.runtime.kernels.cpu import build
before = {p.name: p.stat().st_mtime_ns for p in build.cache_dir().glob("*.so")}
backend = launch.backend_for(torch.zeros(1))
lib = native.library()
after = {p.name: p.stat().st_mtime_ns for p in build.cache_dir().glob("*.so")}
print(backend, lib.path.name if lib else None, "compiled" if after != before else "loaded")
"""


def child(cache, **env) -> list[str]:
    variables = {**os.environ, build.CACHE_VARIABLE: str(cache), "PYTHONPATH": ROOT, **env}
    variables.pop("TRITON_INTERPRET", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=variables, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@needs_compiler
def test_a_second_process_loads_what_the_first_compiled(tmp_path):
    first = child(tmp_path)
    assert first[0] == "cpu" and first[2] == "compiled"
    assert first[1].startswith(f"ternary-{build.machine_isa()}-")
    second = child(tmp_path)
    assert second == ["cpu", first[1], "loaded"]
    assert [p.name for p in tmp_path.iterdir()] == [first[1]]  # no temporary left behind


@needs_compiler
def test_a_library_of_another_isa_is_never_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv(build.CACHE_VARIABLE, str(tmp_path))
    portable = build.compile_library(COMPILER, "portable")
    isa = build.machine_isa()
    if isa == "portable":
        pytest.skip("this CPU runs the portable build only")
    # the portable build where the machine's ISA build belongs (a stale or foreign cache)
    shutil.copy(portable, build.library_path(COMPILER, isa))
    with pytest.raises(OSError, match=f"built for portable, not {isa}"):
        build.build_and_load(isa)
    assert child(tmp_path)[0] == "torch"  # refused, said, and the torch path runs


def test_without_a_compiler_the_torch_path_runs_after_one_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(backends, "_cpu_backend", None)
    native.reset()
    try:
        with pytest.warns(RuntimeWarning, match="no C\\+\\+ compiler found"):
            assert launch.backend_for(torch.zeros(1)) == "torch"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once
            assert native.library() is None
            assert launch.backend_for(torch.zeros(1)) == "torch"
    finally:
        native.reset()


@needs_compiler
def test_a_source_that_does_not_compile_names_the_layer_and_the_error(monkeypatch, tmp_path):
    broken = tmp_path / "ternary.cpp"
    broken.write_text('extern "C" int tb_isa() { return undeclared_name; }\n')
    monkeypatch.setattr(build, "SOURCES", (broken, *build.SOURCES[1:]))
    monkeypatch.setenv(build.CACHE_VARIABLE, str(tmp_path / "cache"))
    native.reset()
    try:
        with pytest.warns(RuntimeWarning) as seen:
            assert native.library("layer q_proj (2560 -> 2560)") is None
        (message,) = [str(w.message) for w in seen]
        assert "failed to compile for layer q_proj (2560 -> 2560)" in message
        assert "undeclared_name" in message and "error" in message
        assert "torch path" in message
        assert not list((tmp_path / "cache").glob("*.so"))  # nothing half-written is left
    finally:
        native.reset()
