"""The options that come before the command: ``-C DIR``, ``--color``, ``--version``, and the
top-level help. Run as a user runs them: ``python -m tribuild`` in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BROKEN = REPO / "tests" / "fixtures" / "zoo_broken" / "unknown_name"


def tribuild(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "tribuild", *args],
        cwd=cwd,
        env=environ | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def broken(tmp_path) -> Path:
    return Path(shutil.copytree(BROKEN, tmp_path / "project"))


def test_dash_c_runs_in_another_folder_as_make_and_ninja_do(broken, tmp_path):
    for args in (["-C", str(broken)], [f"-C{broken}"], [f"--directory={broken}"]):
        run = tribuild(*args, "check", cwd=tmp_path)
        assert run.returncode == 1 and "error[E0307]" in run.stderr, (args, run.stderr)
    run = tribuild("-C", str(tmp_path / "nowhere"), "check", cwd=tmp_path)
    assert run.returncode == 2 and "-C" in run.stderr and "No such file" in run.stderr


def test_dash_c_reaches_the_no_op_path(tmp_path):
    project = Path(shutil.copytree(REPO / "tests" / "driver" / "fixtures" / "mini", tmp_path / "m"))
    assert tribuild("-C", str(project), "build", "-q", cwd=tmp_path).returncode == 0
    again = tribuild("-C", str(project), "build", cwd=tmp_path)
    assert again.returncode == 0 and again.stderr == "tribuild: no work to do\n"


def test_color_follows_the_flag_then_no_color_then_force_color(broken):
    escape = "\x1b["
    assert escape not in tribuild("check", cwd=broken).stderr  # not a terminal
    assert escape in tribuild("check", cwd=broken, FORCE_COLOR="1").stderr
    assert escape not in tribuild("check", cwd=broken, NO_COLOR="1", FORCE_COLOR="1").stderr
    assert escape in tribuild("--color=always", "check", cwd=broken, NO_COLOR="1").stderr
    assert escape not in tribuild("--color", "never", "check", cwd=broken, FORCE_COLOR="1").stderr
    bad = tribuild("--color=sometimes", "check", cwd=broken)
    assert bad.returncode == 2 and "--color must be auto, always or never" in bad.stderr


def test_version_and_help(tmp_path):
    version = tribuild("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("tribuild ")
    top = tribuild("--help", cwd=tmp_path).stdout
    description = top.split("\n\n")[1]
    assert description.rstrip().endswith(".") and "-C DIR" in top and "--color" in top
    compile_help = " ".join(tribuild("compile", "--help", cwd=tmp_path).stdout.split())
    for option, words in (
        ("IN.tri", "the .tri file that defines the layer"),
        ("-o OUT.py", "the module to write"),
        ("-O LEVEL", "-O0, -O1, -O2, -O3 or -Os"),
        ("--touch", "update the module's and depfile's modification times"),
    ):
        assert f"{option} {words}" in compile_help, (option, compile_help)


def test_a_global_option_after_the_command_says_where_it_goes(tmp_path):
    """Issue 37: `tribuild check -C p2` was argparse's "unrecognized arguments: -C"."""
    for args, line in (
        (["check", "-C", "p2"], "tribuild -C p2 check"),
        (["build", "--color=never", "mlp"], "tribuild --color=never build mlp"),
        (["check", "-Cp2", "models"], "tribuild -Cp2 check models"),
    ):
        run = tribuild(*args, cwd=tmp_path)
        assert run.returncode == 2, run.stderr
        assert "is a global option: it comes before the command" in run.stderr, run.stderr
        assert run.stderr.rstrip().endswith(f"help: {line}"), run.stderr
