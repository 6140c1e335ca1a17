"""examples/bitnet/generate.py on a fresh clone (issue 37): `--random` runs the tiny LM in
seconds without a checkpoint; a missing folder and a token id outside the vocabulary end in
one line, exit 2, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from tests.codegen.harness import build, write  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TINY = {"vocab": 96, "dim": 64, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 160}


@pytest.fixture(scope="module")
def module(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("lm")
    write(build("models/bitnet_lm.tri:BitNetLM", TINY, "2", name="tiny"), folder)
    return folder / "tiny.py"


def generate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / "bitnet" / "generate.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_random_weights_generate_tokens(module):
    run = generate(str(module), "--random", "--ids", "1,2,3", "--max-new-tokens", "4")
    assert run.returncode == 0, run.stderr
    tokens = [int(t) for t in run.stdout.split()]
    assert len(tokens) == 4 and all(0 <= t < 96 for t in tokens)
    assert "[4 tokens in " in run.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nowhere/at/all", "--ids", "1"], "/nowhere/at/all: no such folder"),
        (
            ["--random", "--ids", "1,500"],
            "token ids must be 0 to 95 (the model's vocab), got [500]",
        ),
        (["--random", "--ids", "a,b"], "--ids: expected comma-separated integers"),
    ],
)
def test_mistakes_end_in_one_line(module, args, message):
    run = generate(str(module), *args)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert message in run.stderr


def test_an_empty_folder_is_one_line_too(module, tmp_path):
    run = generate(str(module), str(tmp_path), "--ids", "1")
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "no *.safetensors files" in run.stderr
