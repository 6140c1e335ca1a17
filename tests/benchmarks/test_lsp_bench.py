"""The language server benchmark's smallest run (marked bench_smoke), so that it cannot rot:
every case runs through the protocol and the report names every goal."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_lsp.py"


@pytest.mark.bench_smoke
def test_every_case_is_reported(tmp_path):
    done = subprocess.run(
        [sys.executable, str(BENCH), "--repeats", "1", "--edits", "100", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "lsp.json").read_text())
    assert set(result["edit"]) == set(result["recheck"]) == {"resnet18", "resnet152"}
    assert len(result["requests"]) == 4 and set(result["start"]) == {"in-process", "subprocess"}
    assert result["memory"]["edits"] == 100
    assert (tmp_path / "lsp.md").read_text().count("| ") > 10
