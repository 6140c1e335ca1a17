"""``tribuild build`` makes the CPU kernels ready ahead of time (``driver.cpu_kernels``): the
library exists once the build is done, and a fresh process of the generated code loads it
without compiling; the build itself imports no torch; a compiler that fails is an error
naming the targets, its first error line and the fallback, and fails the build but none of
its targets; no compiler is one warning. Real compilers (a shell script standing in for a
broken one) and real processes; each test has its own kernel cache."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.driver.test_noop import _probe
from tests.runtime.test_cpu_kernels_build import CHILD
from tests.schemas import validate
from tribuild.driver import cpu_kernels
from tribuild.runtime.kernels.cpu import build as kernels

ROOT = Path(__file__).resolve().parents[2]
COMPILER = kernels.find_compiler()
needs_compiler = pytest.mark.skipif(COMPILER is None, reason="no C++ compiler")

# CHILD: a fresh process of the generated code says which backend a CPU call takes and whether
# its library was compiled or loaded (the runtime's own build test's probe).

# A build in a fresh process, and which of torch and triton it imported.
PROBE = """
import json, sys
from tribuild.cli import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(m for m in ("torch", "triton") if m in sys.modules)]))
"""


@pytest.fixture
def kernel_cache(tmp_path, monkeypatch) -> Path:
    """A kernel cache of the test's own, for this process and the ones it starts."""
    folder = tmp_path / "kernel-cache"
    monkeypatch.setenv(kernels.CACHE_VARIABLE, str(folder))
    for name in ("CXX", kernels.ISA_VARIABLE, cpu_kernels.SWITCH_VARIABLE, "TRITON_INTERPRET"):
        monkeypatch.delenv(name, raising=False)
    return folder


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def edit(mini: Path) -> None:
    """An edit that sends the next build the full way (not the no-op path)."""
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text() + "\n")


@needs_compiler
def test_the_build_compiles_the_library_and_a_fresh_process_loads_it(mini, kernel_cache):
    assert COMPILER is not None
    run = subprocess.run(
        [sys.executable, "-c", PROBE, "build"],
        cwd=mini,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    code, heavy = json.loads(run.stdout.splitlines()[-1])
    assert (code, heavy) == (0, []), run.stderr  # invariant 3: the compiler ran, no torch
    isa = kernels.machine_isa()
    assert f"cpu kernels ({isa}, " in run.stderr  # the step, in the progress lines
    library = kernels.library_path(COMPILER, isa)
    assert [p.name for p in kernel_cache.iterdir()] == [library.name]  # nothing half-written
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["cpu", library.name, "loaded"]


def test_a_failing_compiler_is_an_error_that_fails_the_build_not_its_targets(
    mini, kernel_cache, cli, monkeypatch, tmp_path
):
    log = tmp_path / "compiled.log"
    broken = script(
        tmp_path / "broken-c++",
        'if [ "$1" = --version ]; then echo "broken c++ 1.0"; exit 0; fi\n'
        f'echo "$@" >> {log}\n'
        'echo "In file included from ternary.cpp:1:" >&2\n'
        'echo "ternary.cpp:12:3: error: this compiler is broken on purpose" >&2\n'
        "exit 1\n",
    )
    monkeypatch.setenv("CXX", str(broken))
    code, _, err = cli(["build", "-q"], mini)
    assert code == 1, err
    assert (
        "error: the CPU kernels failed to compile for the ternary layers of targets "
        "`net`, `wide`, `mlp` and 1 more: ternary.cpp:12:3: error: this compiler is broken "
        "on purpose" in err
    )
    assert "their ternary layers run on the torch path" in err
    assert "build failed: 4 targets built, the CPU kernels did not compile" in err
    assert (mini / "out" / "mlp.py").is_file()  # every target's outputs are written
    assert list(kernel_cache.iterdir()) == []  # nothing half-written is left
    assert len(log.read_text().splitlines()) == 1
    # no manifest was written: the next build is not a no-op, and says it again, from the
    # stamp, without running the compiler again while nothing it depends on changed
    code, _, again = cli(["build", "-q"], mini)
    assert code == 1 and "no work to do" not in again
    assert "this compiler is broken on purpose" in again
    assert len(log.read_text().splitlines()) == 1
    # the JSON document says so too, within its schema
    code, out, _ = cli(["build", "-q", "--format", "json"], mini)
    document = json.loads(out)
    validate("build", document)
    assert code == 1 and document["ok"] is False
    assert document["cpu_kernels"]["state"] == "failed"
    assert (
        document["cpu_kernels"]["error"]
        == "ternary.cpp:12:3: error: this compiler is broken on purpose"
    )
    assert all(t["ok"] for t in document["targets"])
    # off: the build does without them, and succeeds
    monkeypatch.setenv(cpu_kernels.SWITCH_VARIABLE, "off")
    code, _, err = cli(["build", "-q"], mini)
    assert (code, err) == (0, "")


def test_a_failing_compiler_leaves_the_runtime_on_the_torch_path(mini, kernel_cache, tmp_path):
    """What the build's error promises: a process of the generated code, with the same
    compiler, says so once and runs the torch path."""
    broken = script(
        tmp_path / "broken-c++",
        'if [ "$1" = --version ]; then echo "broken c++ 1.0"; exit 0; fi\n'
        'echo "ternary.cpp:12:3: error: broken on purpose" >&2\nexit 1\n',
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CXX": str(broken)}
    child = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["torch", "None", "loaded"]
    assert child.stderr.count("broken on purpose") == 1 and "torch path" in child.stderr


def test_without_a_compiler_one_warning_and_the_build_goes_on(
    mini, kernel_cache, cli, monkeypatch, tmp_path
):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    code, _, err = cli(["build", "-q"], mini)
    assert code == 0, err
    assert err.count("warning: no C++ compiler found") == 1
    assert "run on the torch path on the CPU" in err
    assert not kernel_cache.exists()
    edit(mini)  # a build the full way, nothing about the compiler changed: said once
    code, _, err = cli(["build", "-q"], mini)
    assert (code, err) == (0, "")
    code, _, err = cli(["build"], mini)
    assert (code, err) == (0, "tribuild: no work to do\n")


def test_a_stamp_is_not_trusted_once_the_library_is_gone(
    mini, kernel_cache, cli, tmp_path, monkeypatch
):
    """The stamp spares the next build the compiler's ``--version``; it vouches for a library
    that is still there only. (A stand-in compiler writes its output: what is tested is
    when it runs.)"""
    log = tmp_path / "compiled.log"
    stand_in = script(
        tmp_path / "stand-in-c++",
        'if [ "$1" = --version ]; then echo "stand-in c++ 1.0"; exit 0; fi\n'
        f'echo "$@" >> {log}\n'
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && echo library > "$2"; shift; done\n',
    )
    monkeypatch.setenv("CXX", str(stand_in))
    code, _, err = cli(["build", "-q"], mini)
    assert (code, err) == (0, "")
    stamp = json.loads((mini / ".tribuild-cache" / cpu_kernels.STAMP).read_text())
    (library,) = kernel_cache.glob("*.so")
    assert (stamp["state"], stamp["library"]) == ("ready", str(library))
    assert len(log.read_text().splitlines()) == 1
    edit(mini)
    code, _, err = cli(["build", "-q"], mini)
    assert (code, err) == (0, "") and len(log.read_text().splitlines()) == 1
    library.unlink()
    edit(mini)
    code, _, err = cli(["build"], mini)
    assert code == 0, err
    assert "[1/1] cpu kernels" in err and library.is_file()
    assert len(log.read_text().splitlines()) == 2


def test_a_rebuild_after_an_edit_checks_the_stamp_and_imports_nothing_slow(
    mini, kernel_cache, cli, tmp_path, monkeypatch
):
    """The one-edit path's budget (``test_noop``'s same test, with the step on): while the
    stamp holds, the step imports neither the kernels' build module (pathlib, typing,
    tempfile) nor torch, and runs no compiler."""
    log = tmp_path / "compiled.log"
    stand_in = script(
        tmp_path / "stand-in-c++",
        f'echo "$@" >> {log}\n'
        'if [ "$1" = --version ]; then echo "stand-in c++ 1.0"; exit 0; fi\n'
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && echo library > "$2"; shift; done\n',
    )
    monkeypatch.setenv("CXX", str(stand_in))
    assert cli(["build", "-q"], mini)[:2] == (0, "")
    assert len(log.read_text().splitlines()) == 2  # --version, then the compilation
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("relu(", "relu6(", 1))
    code, heavy, slow, err = _probe(mini, "build", "-q")
    assert code == 0 and "tribuild.engine" in heavy and "torch" not in heavy, err
    assert slow == []
    assert len(log.read_text().splitlines()) == 2  # not even --version
