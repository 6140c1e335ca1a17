"""The whole suite's --quick run (marked bench_smoke: `pytest -m bench_smoke tests/benchmarks`),
so that it cannot rot: every section runs, the JSON, REPORT.md and plots are written, and
compare.py accepts the run against itself."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import compare
from benchmarks.report.edits import SCENARIOS
from benchmarks.report.seed import GOALS

RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--out", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return out, json.loads((out / "report.json").read_text())


@pytest.mark.bench_smoke
def test_every_section_and_goal_is_reported(quick_run):
    out, report = quick_run
    assert "errors" not in report, report.get("errors")
    assert {"cold", "incremental", "process", "scaling", "runtime"} <= report.keys()
    assert [g["goal"] for g in report["goals"]] == list(GOALS)
    assert set(report["incremental"]["resnet18"]) == set(SCENARIOS)
    assert report["meta"]["load_average_end"] and report["meta"]["commit"]
    text = (out / "REPORT.md").read_text()
    for heading in (
        "## Goals",
        "## Cold compile",
        "## Peak memory",
        "## Cache scenarios",
        "## Runtime",
        "## --jobs",
    ):
        assert heading in text


@pytest.mark.bench_smoke
def test_figures_are_positive_and_compare_to_themselves(quick_run):
    out, report = quick_run
    figures = report["figures"]
    assert "cold.resnet18.O2.wall_s" in figures and "process.cold.resnet18.rss_bytes" in figures
    assert all(v > 0 for k, v in figures.items() if k.endswith(("_s", "_bytes")))
    assert compare.main([str(out / "report.json"), str(out / "report.json")]) == 0


@pytest.mark.bench_smoke
def test_plots_are_pngs(quick_run):
    pytest.importorskip("matplotlib")
    out, report = quick_run
    assert report["plots"]
    for name in report["plots"]:
        assert (out / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
