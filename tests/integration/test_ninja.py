"""tribuild under the real ninja: `tribuild compile` as a rule with a depfile and
``restat = 1``."""

from __future__ import annotations

import shutil

import pytest

from tests.integration.conftest import BIN, TRIBUILD, tool

pytestmark = pytest.mark.skipif(
    shutil.which("ninja", path=str(BIN)) is None, reason="the ninja package is not installed"
)

BUILD_NINJA = f"""\
rule tri
  command = {TRIBUILD} compile $in -o $out --depfile $out.d
  depfile = $out.d
  deps = gcc
  restat = 1
  description = TRI $out

rule stamp
  command = cp $in $out
  description = STAMP $out

build gen/net.py: tri models/net.tri
build gen/mlp.py: tri models/mlp.tri
build gen/net.copy: stamp gen/net.py
build gen/mlp.copy: stamp gen/mlp.py
"""


def ninja(mini, *args):
    run = tool("ninja", *args, cwd=mini)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def test_ninja_rebuilds_what_an_edit_reaches_and_restat_stops_the_rest(mini):
    (mini / "build.ninja").write_text(BUILD_NINJA)
    first = ninja(mini)
    assert "TRI gen/net.py" in first and "STAMP gen/mlp.copy" in first
    assert (mini / "gen" / "kernels").is_dir()
    assert "no work to do" in ninja(mini, "-n")

    blocks = mini / "models" / "lib" / "blocks.tri"
    blocks.write_text("# only a comment\n" + blocks.read_text())
    out = ninja(mini)
    assert "TRI gen/net.py" in out and "gen/mlp.py" not in out
    assert "STAMP" not in out  # restat: net.py kept its bytes and mtime
    assert "no work to do" in ninja(mini, "-n")

    blocks.write_text(blocks.read_text().replace("return relu(fc(x))", "return fc(x)"))
    out = ninja(mini)
    assert "TRI gen/net.py" in out and "STAMP gen/net.copy" in out
    assert "mlp" not in out
    assert "no work to do" in ninja(mini, "-n")

    (mini / "models" / "mlp.tri").touch()
    out = ninja(mini)
    assert "TRI gen/mlp.py" in out and "STAMP" not in out and "net" not in out


def test_a_failing_compile_fails_the_ninja_build_with_the_diagnostic(mini):
    (mini / "build.ninja").write_text(BUILD_NINJA)
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("fc1(x)", "fc1(z)"))
    run = tool("ninja", "-k", "0", cwd=mini)
    assert run.returncode != 0
    assert "mlp.tri:" in run.stdout and "error[" in run.stdout
    assert (mini / "gen" / "net.py").exists() and not (mini / "gen" / "mlp.py").exists()
