"""Helpers of the make and ninja tests: tribuild run as a command, as those tools run it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "tests" / "driver" / "fixtures" / "mini"
TRIBUILD = f"{sys.executable} -m tribuild"
BIN = Path(sys.executable).parent


@pytest.fixture
def mini(tmp_path) -> Path:
    return Path(shutil.copytree(MINI, tmp_path / "mini"))


def tool(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {}))
    for name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # CI runs the suite under `make test`:
        environ.pop(name, None)  # each tool runs as if from a shell
    return subprocess.run(args, cwd=cwd, env=environ, capture_output=True, text=True, timeout=300)
