"""A small project to attack, `tribuild` run as a subprocess, and what a correct build leaves.

Terms:
- *project*: a copy of ``tests/driver/fixtures/mini`` (four targets over three small .tri
  files; a build takes well under a second).
- *version*: the text of ``models/net.tri``. ``VERSIONS`` holds two that generate different
  bytes for the same output paths (the ``Net`` default width), so after any interrupted build
  every output must hold one of two known contents.
- *outputs*: every file under the output folder (relative POSIX path -> bytes), the record
  ``.tribuild-outputs.json`` included.
- *reference*: the outputs of a clean build of a version in a fresh copy of the project.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "tests" / "driver" / "fixtures" / "mini"
OUT = "out"
CACHE = ".tribuild-cache"
_NET = (MINI / "models" / "net.tri").read_text()
VERSIONS = {"a": _NET, "b": _NET.replace("width: int = 32", "width: int = 40")}
assert VERSIONS["a"] != VERSIONS["b"]


def make_project(folder: Path, version: str = "a") -> Path:
    root = Path(shutil.copytree(MINI, folder))
    set_version(root, version)
    return root


def set_version(root: Path, version: str) -> None:
    (root / "models" / "net.tri").write_text(VERSIONS[version])


def tribuild(root: Path, *args: str, timeout: float = 120, **popen) -> subprocess.CompletedProcess:
    """``tribuild ARGS`` in ``root`` as a subprocess (stdout and stderr captured as text)."""
    return subprocess.run(
        command(*args),
        cwd=root,
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tribuild", *args]


def env() -> dict[str, str]:
    return dict(os.environ, CI="1", PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")


def outputs(root: Path) -> dict[str, bytes]:
    folder = root / OUT
    return (
        {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }
        if folder.is_dir()
        else {}
    )


def temp_files(folder: Path) -> list[str]:
    """Temporary files (``.NAME.XXXXXXXX.tmp``) left anywhere under ``folder``."""
    return sorted(p.name for p in folder.rglob(".*.tmp"))


def reference(folder: Path, version: str) -> dict[str, bytes]:
    """The outputs of a clean build of ``version`` in a fresh copy under ``folder``."""
    root = make_project(folder / f"reference-{version}", version)
    done = tribuild(root, "build", "-q")
    assert done.returncode == 0, done.stderr
    return outputs(root)


def check_python(files: dict[str, bytes]) -> None:
    """Every ``.py`` output compiles (a partial file would not)."""
    for rel, data in files.items():
        if rel.endswith(".py"):
            compile(data, rel, "exec")
