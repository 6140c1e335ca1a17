"""Fixtures of the driver tests: a copy of the mini project or of the zoo, and the CLI run
in-process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tribuild.cli import main

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.fixture
def mini(tmp_path) -> Path:
    return Path(shutil.copytree(HERE / "fixtures" / "mini", tmp_path / "mini"))


@pytest.fixture
def zoo(tmp_path) -> Path:
    dest = tmp_path / "zoo"
    shutil.copytree(REPO / "models", dest / "models")
    shutil.copy(REPO / "Tribuild.toml", dest / "Tribuild.toml")
    return dest


@pytest.fixture
def cli(monkeypatch, capsys):
    """``cli(args, cwd) -> (exit code, stdout, stderr)``."""

    def run(args, cwd):
        monkeypatch.chdir(cwd)
        try:
            code = main(list(args))
        except SystemExit as exit:  # argparse's usage errors
            code = exit.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative POSIX path -> bytes)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def mtimes(folder: Path) -> dict[str, int]:
    return {
        p.relative_to(folder).as_posix(): p.stat().st_mtime_ns
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }
