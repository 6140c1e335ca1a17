"""The CPU kernels' library through the remote cache, against a real redis-server: a build
that compiled it sends it, a build elsewhere that lacks it takes it instead of compiling,
and a library of another compiler, or an entry moved under another library's name, is never
taken. A wrapper around the system compiler counts its compilations and names its identity
(``--version``: the key of the library); the tests of which library is taken use one that
only writes a file naming its identity."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.driver.conftest import HERE
from tests.driver.remote.conftest import REPO
from tests.driver.test_cpu_kernels_aot import CHILD
from tribuild.driver import cpu_kernels
from tribuild.remote import entries
from tribuild.runtime.kernels.cpu import build as kernels

COMPILER = kernels.find_compiler()
pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C++ compiler")


def wrapper(folder: Path, identity: str, real: bool = True) -> tuple[Path, Path]:
    """A compiler that is the system's under another identity (not ``real``: one that writes
    a file naming its identity, for the tests of which library is taken), and the log of its
    runs."""
    assert COMPILER is not None
    folder.mkdir()
    log = folder / "compiled.log"
    path = folder / "c++"
    compile_ = (
        f'exec {COMPILER.path} "$@"\n'
        if real
        else f'while [ $# -gt 0 ]; do [ "$1" = -o ] && echo "{identity}" > "$2"; shift; done\n'
    )
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then echo "{identity}"; exit 0; fi\n'
        f'echo "$@" >> {log}\n' + compile_
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, log


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """``machine(name, identity)``: a clone of the mini project with a kernel cache and a
    compiler of its own, as on another machine sharing the remote; returns (project folder,
    its kernel cache, its compiler's log)."""
    for name in (kernels.ISA_VARIABLE, cpu_kernels.SWITCH_VARIABLE):
        monkeypatch.delenv(name, raising=False)

    def make(name: str, identity: str, real: bool = True) -> tuple[Path, Path, Path]:
        root = tmp_path / name
        project = Path(shutil.copytree(HERE / "fixtures" / "mini", root / "mini"))
        compiler, log = wrapper(root / "compiler", identity, real)
        monkeypatch.setenv("CXX", str(compiler))
        monkeypatch.setenv(kernels.CACHE_VARIABLE, str(root / "kernel-cache"))
        return project, root / "kernel-cache", log

    return make


def library_name(identity_compiler: Path) -> str:
    found = kernels.find_compiler()
    assert found is not None and found.path == str(identity_compiler)
    return kernels.library_path(found, kernels.machine_isa()).name


def test_a_build_elsewhere_takes_the_library_instead_of_compiling(remote_env, machine, cli):
    first, first_cache, first_log = machine("first", "wrapped c++ 1")
    code, _, err = cli(["build", "-q"], first)
    assert (code, err) == (0, "")
    (built,) = first_cache.glob("*.so")
    assert runs(first_log) == 1
    key = entries.cpu_kernel_key("tribuild:", built.name)
    assert remote_env.client().exists(key)

    second, second_cache, second_log = machine("second", "wrapped c++ 1")
    code, _, err = cli(["build", "-q"], second)
    assert (code, err) == (0, "")
    assert runs(second_log) == 0  # taken, not compiled
    (taken,) = second_cache.glob("*.so")
    assert taken.name == built.name and taken.read_bytes() == built.read_bytes()
    assert taken.stat().st_mode & stat.S_IXUSR
    # and a process of the generated code there loads it: nothing compiled
    child = subprocess.run(
        [sys.executable, "-c", CHILD],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["cpu", taken.name, "loaded"]
    assert runs(second_log) == 0


def test_a_library_of_another_compiler_or_under_another_name_is_never_taken(
    remote_env, machine, cli
):
    first, first_cache, _ = machine("first", "stand-in c++ 1", real=False)
    assert cli(["build", "-q"], first)[0] == 0
    (built,) = first_cache.glob("*.so")
    # another compiler: its library has another key, which the remote does not hold
    other, other_cache, other_log = machine("other", "stand-in c++ 2", real=False)
    theirs = library_name(Path(kernels.find_compiler().path))
    assert theirs != built.name
    assert not remote_env.client().exists(entries.cpu_kernel_key("tribuild:", theirs))
    # the first library's entry copied under the other's name: its digest covers its key
    client = remote_env.client()
    moved = client.get(entries.cpu_kernel_key("tribuild:", built.name))
    client.set(entries.cpu_kernel_key("tribuild:", theirs), moved)
    code, _, err = cli(["build", "-q"], other)
    assert code == 0
    assert f"refused the CPU kernels `{theirs}`: its digest does not match its bytes" in err
    assert runs(other_log) == 1  # compiled here
    (compiled,) = other_cache.glob("*.so")
    assert compiled.name == theirs and compiled.read_text() == "stand-in c++ 2\n"
    # and sent, under its own name, replacing the moved entry
    stored = client.get(entries.cpu_kernel_key("tribuild:", theirs))
    assert entries.unframe(entries.cpu_kernel_key("tribuild:", theirs), stored, None) == (
        compiled.read_bytes()
    )
