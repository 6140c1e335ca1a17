"""benchmarks/bench_kernels.py --quick runs its smoke check on the CPU and says GPU figures need
a GPU."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("triton")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_kernels.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_kernels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_smoke_check(capsys):
    bench = load_bench()
    before = set(bench.RESULTS.glob("*")) if bench.RESULTS.exists() else set()
    bench.main(["--quick"])
    out = capsys.readouterr().out
    assert out.count("triton path ok") == len(bench.QUICK_SIZES)
    assert "GPU figures need a GPU" in out
    assert (set(bench.RESULTS.glob("*")) if bench.RESULTS.exists() else set()) == before


@pytest.mark.parametrize(
    "device, override, expected",
    [
        ("NVIDIA H100 80GB HBM3", None, 3350),
        ("NVIDIA H100 PCIe", None, 2000),
        ("NVIDIA H200", None, 4800),
        ("NVIDIA L40S", None, 864),
        ("NVIDIA L4", None, 300),
        ("NVIDIA A100-SXM4-40GB", None, 1555),
        ("Mystery GPU", None, None),
        ("Mystery GPU", 1234.0, 1234.0),
    ],
)
def test_peak_bandwidth_table(device, override, expected):
    assert load_bench().peak_gbps(device, override) == expected


def test_bytes_moved_counts_two_bits_per_ternary_weight():
    bench = load_bench()
    assert bench.moved_bytes(1, 8, 16, ternary=True) == 8 * 4 + 4 * 8 + 2 * 16 + 2 * 8
    assert bench.moved_bytes(1, 8, 16, ternary=False) == 2 * 8 * 16 + 2 * 16 + 2 * 8


def test_markdown_table_row():
    row = {
        "M": 1,
        "N": 4096,
        "K": 4096,
        "ternary_ms": 0.01,
        "fp16_ms": 0.02,
        "speedup_vs_fp16": 2.0,
        "ternary_gbps": 500.0,
        "ternary_peak_fraction": 0.15,
        "fp16_gbps": 1600.0,
        "fp16_peak_fraction": None,
        "ternary_eager_ms": 0.03,
        "fp16_eager_ms": 0.015,
        "eager_speedup_vs_fp16": 0.5,
        "kernel": "ternary_decode_kernel(BLOCK_N=16,warps=4)",
    }
    report = {
        "device": "X",
        "peak_gbps": None,
        "torch": "t",
        "triton": "tr",
        "opt_level": 3,
        "repeats": 5,
        "results": [row],
    }
    table = load_bench().markdown(report)
    assert (
        "| 1 | 4096 | 4096 | 0.0100 | 0.0200 | 2.00x | 500 (15%) | 1600 (?) | 0.0300 | 0.0150 | "
        "0.50x |" in table.splitlines()
    )
    assert "- M=1 N=4096 K=4096: ternary_decode_kernel(BLOCK_N=16,warps=4)" in table


@pytest.mark.slow  # every way under Triton's interpreter: a minute; `make test-all` and CI
def test_small_m_exploration_dry_run(tmp_path):
    """explore_small_m.py --dry: every way on a tiny shape under the interpreter, each
    checked against the dense product, each tuning into its own cache file."""
    import json
    import os
    import subprocess
    import sys

    script = SCRIPT.with_name("explore_small_m.py")
    env = {**os.environ, "OUT": str(tmp_path)}
    subprocess.run([sys.executable, str(script), "--dry"], env=env, check=True, capture_output=True)
    (row,) = json.loads((tmp_path / "m16.json").read_text())
    assert all(row[f"{way}_err"] < 1e-2 for way in ("gemm", "small", "gemv"))
    families = {
        way: next(iter(json.loads((tmp_path / f"tune-{way}.json").read_text())["entries"]))
        for way in ("gemm", "small", "gemv")
    }
    assert families["gemm"].startswith("gemm_small[") and families["small"].startswith(
        "gemm_small["
    )
    assert families["gemv"].startswith("gemv[")
