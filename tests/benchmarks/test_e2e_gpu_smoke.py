"""The GPU end-to-end benchmark, checked without a GPU so that the script a GPU session runs in
its one device call cannot rot.

- Its --quick run on the CPU (marked bench_smoke): every case of its tables runs in its workers
  and is in the JSON, the goals are judged, the tables are written; a budget too short for any
  case records each as skipped instead of losing it.
- Its judging and tables (in the default run: no torch, milliseconds): the goals of issue 23
  from the figures of a full-size GPU report made up here, met, not met and not measured, and
  each figure under its own heading."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bench_e2e_gpu

SCRIPT = Path(bench_e2e_gpu.__file__)


def quick_run(out: Path, *extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "e2e_gpu.json").read_text())


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e_gpu")
    return out, quick_run(out)


@pytest.mark.bench_smoke
def test_every_case_runs_and_is_recorded(report):
    _, data = report
    expected = [c.id for c in bench_e2e_gpu.cases(quick=True)]
    assert data["case_ids"] == expected
    assert set(data["cases"]) == set(expected)
    failed = {k: v for k, v in data["cases"].items() if v["status"] != "ok"}
    assert not failed, failed
    assert data["meta"]["skipped"] == []
    kinds = {c.kind for c in bench_e2e_gpu.cases(quick=True)}
    assert kinds == {"kernel", "side_by_side", "compile"}


@pytest.mark.bench_smoke
def test_figures_are_measured_and_checked(report):
    _, data = report
    for case in bench_e2e_gpu.cases(quick=True):
        result = data["cases"][case.id]
        if case.kind == "kernel":
            assert result["ternary"]["ms"] > 0 and result["fp16"]["ms"] > 0
            assert result["ternary"]["speedup_vs_fp16"] > 0
            assert result["rel_error"] < 1e-2
            assert "not run" in result["gemlite"]  # no gemlite on the CPU
        elif case.kind == "side_by_side":
            assert result["ternary eager"]["ms"] > 0 and result["fp16 eager"]["ms"] > 0
            assert result["ternary eager"]["calls"] == 3
            assert result["rel_error"] < 2e-2
            assert "not run" in result["ternary graph"]  # no CUDA graphs on the CPU
        else:
            assert result["ms"] > 0 and result["rel_error"] < 1e-3
            assert result["graph_breaks"] == 0


@pytest.mark.bench_smoke
def test_goals_and_tables_are_written(report):
    out, data = report
    assert len(data["goals"]) == 9
    assert {g["status"] for g in data["goals"]} <= {"met", "not met", "not measured"}
    # without CUDA graphs the graph-based goals cannot be judged
    assert data["goals"][5]["status"] == "not measured"
    text = (out / "e2e_gpu.md").read_text()
    for heading in ("## Goals", "## End to end", "## Kernels"):
        assert heading in text
    for model, label, _ in bench_e2e_gpu.e2e_rows(quick=True):
        assert f"{model}, {label} " in text


@pytest.mark.bench_smoke
def test_a_budget_too_short_records_every_case_as_skipped(tmp_path):
    data = quick_run(tmp_path, "--budget-s", "0")
    assert set(data["cases"]) == set(data["case_ids"])
    assert {v["status"] for v in data["cases"].values()} == {"skipped"}
    assert data["meta"]["skipped"] == data["case_ids"]
    assert {g["status"] for g in data["goals"]} == {"not measured"}


def full_report(ms: dict[str, float], peak: float = 4800.0) -> dict:
    """A report of the full (GPU) case list with the figures ``ms`` gives by column, as a
    GPU run writes it: every kernel row at 0.001 ms for tribuild (4.2 to 11 TB/s) and
    ``ms["fp16 kernel"]`` for cuBLAS; every end-to-end column at ``ms[column]``."""
    found: dict[str, dict] = {}
    todo = bench_e2e_gpu.cases(quick=False)
    for case in todo:
        if case.kind == "kernel":
            spec = case.spec
            moved = bench_e2e_gpu.bench_kernels.moved_bytes(spec["m"], spec["n"], spec["k"], True)
            found[case.id] = {
                "status": "ok",
                "rel_error": 1e-3,
                "ternary": {
                    "ms": 0.001,
                    "speedup_vs_fp16": ms["fp16 kernel"] / 0.001,
                    "gbps": moved / 0.001 / 1e6,
                },
                "fp16": {"ms": ms["fp16 kernel"]},
                "gemlite": {"not run": "gemlite is not importable"},
            }
            if spec["acts"] == "int8":  # a peer's figures, as when gemlite imports
                found[case.id]["gemlite"] = {"ms": 0.004, "speedup_vs_fp16": 1.25, "gbps": 1.0}
        elif case.kind == "side_by_side":
            found[case.id] = {"status": "ok", "rel_error": 1e-3}
            for column in ("ternary eager", "fp16 eager", "ternary graph", "fp16 graph"):
                found[case.id][column] = {"ms": ms[column], "calls": 50}
        else:
            side, mode = case.spec["side"], case.spec["mode"]
            found[case.id] = {
                "status": "ok",
                "ms": ms[f"{side} {mode}"],
                "backend": "inductor",
                "compile_s": 20.0,
                "graphs": 1,
                "graph_breaks": 0,
                "cudagraph_skips": 0,
                "rel_error": 1e-3,
            }
    meta = {
        "device": "NVIDIA H200",
        "torch": "2.11",
        "triton": "3.6",
        "cuda": "13.0",
        "date": "today",
        "calls": 50,
        "kernel_rounds": 3,
        "budget_s": 195.0,
        "wall_s": 190.0,
        "peak_gbps": peak,
        "skipped": [],
    }
    return {
        "meta": meta,
        "cases": found,
        "kernel_cases": [{"id": c.id, **c.spec} for c in todo if c.kind == "kernel"],
        "case_ids": [c.id for c in todo],
    }


FAST = {
    "fp16 kernel": 0.005,  # tribuild 5x cuBLAS
    "ternary eager": 0.1,
    "fp16 eager": 1.0,
    "ternary graph": 0.06,
    "fp16 graph": 0.5,
    "ternary reduce-overhead": 0.08,
    "fp16 reduce-overhead": 0.3,
    "ternary default": 0.2,
}


def test_goals_are_judged_from_the_figures_of_a_gpu_run():
    goals = bench_e2e_gpu.goals(full_report(FAST), quick=False)
    assert [g["status"] for g in goals] == ["met"] * 9, goals
    # one token: the faster fp16 capture (reduce-overhead, 0.3) over the faster ternary one
    assert goals[4]["measured"] == "5.00x"
    slow = dict(FAST, **{"fp16 kernel": 0.002, "fp16 reduce-overhead": 0.1, "ternary eager": 0.5})
    goals = bench_e2e_gpu.goals(full_report(slow), quick=False)
    # kernels 2x: under 4x and 2.5x, over 1.3x and 0.9x; one token 1.67x (under 4x), eager
    # 3.3x its graph (the default compile's 0.2 ms); prefills and ResNet-18 still faster
    expected = ["not met", "not met", "met", "met", "not met", "not met", "met", "met", "met"]
    assert [g["status"] for g in goals] == expected
    # the default-mode compile (0.2 ms) counts as the eager figure when it is the faster
    faster_default = dict(FAST, **{"ternary eager": 5.0, "ternary default": 0.1})
    assert bench_e2e_gpu.goals(full_report(faster_default), quick=False)[5]["status"] == "met"
    faster_default["ternary default"] = 0.2  # 3.3x the graph's 0.06 ms
    assert bench_e2e_gpu.goals(full_report(faster_default), quick=False)[5]["status"] == "not met"


def test_a_missing_figure_leaves_its_goal_not_measured_and_the_tables_written():
    report = full_report(FAST)
    for case_id in list(report["cases"]):
        if case_id.startswith("e2e/bitnet_block/1x1x2560/"):
            report["cases"][case_id] = {"status": "skipped", "why": "the time budget"}
    report["goals"] = goals = bench_e2e_gpu.goals(report, quick=False)
    assert goals[4]["status"] == goals[5]["status"] == "not measured"
    assert goals[6]["status"] == "met"
    text = bench_e2e_gpu.markdown(report, quick=False)
    assert "skipped: the time budget" in text and "| **not measured** |" in text
    assert "NVIDIA H200" in text and "4096x11008" in text
    assert (
        "| 2048 rows | int8 | 4096x4096 | 0.001 | 0.005 | 5.00x | 37765 (787%) | 0.004 | 1.25x |"
        in text
    )
    # each figure under its own heading: ternary / fp16 eager, graph, reduce-overhead, default
    assert (
        "| resnet18, batch 1 [1, 3, 224, 224] | 0.1 | 1 | 0.06 | 0.5 | 0.08 | 0.3 | 0.2 |" in text
    )
