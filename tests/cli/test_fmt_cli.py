"""`tribuild fmt` end to end, in-process: the whole zoo is laid out already; a file out of
layout is reported by --check (exit 1, nothing written) and rewritten without it; a file the
lexer finds errors in is left alone and named."""

from __future__ import annotations

import shutil
from pathlib import Path

from tribuild.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_zoo_is_laid_out(tmp_path, monkeypatch, capsys):
    shutil.copytree(REPO / "models", tmp_path / "models")
    shutil.copy(REPO / "Tribuild.toml", tmp_path / "Tribuild.toml")
    monkeypatch.chdir(tmp_path)
    assert main(["fmt", "--check"]) == 0
    count = len(list((REPO / "models").rglob("*.tri")))
    assert f"0 of {count} files would reformat" in capsys.readouterr().err


def test_check_then_rewrite(tmp_path, monkeypatch, capsys):
    messy = tmp_path / "messy.tri"
    messy.write_text(
        "let A: int = 1\nfn f(x: Tensor<float32, [N]>) -> Tensor<float32, [N]> {\n  return x\n}\n"
    )
    broken = tmp_path / "broken.tri"
    broken.write_text('let B = "never closed\n')
    monkeypatch.chdir(tmp_path)
    before = messy.read_text()
    assert main(["fmt", "--check", "messy.tri"]) == 1
    assert "would reformat messy.tri" in capsys.readouterr().err
    assert messy.read_text() == before
    assert main(["fmt", "messy.tri"]) == 0
    assert "    return x\n" in messy.read_text()
    assert main(["fmt", "--check", "messy.tri"]) == 0
    capsys.readouterr()
    assert main(["fmt", "broken.tri"]) == 1
    assert "broken.tri: not formatted: the lexer finds errors" in capsys.readouterr().err
    assert broken.read_text() == 'let B = "never closed\n'
