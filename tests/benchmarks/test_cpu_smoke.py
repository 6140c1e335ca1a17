"""bench_cpu.py's --quick run (marked bench_smoke: `pytest -m bench_smoke tests/benchmarks`), so
that it cannot rot: the tiny config through tribuild's and transformers' workers, the GEMV and
ResNet-18 figures, the JSON and the Markdown. llama.cpp's rows run where bench_cpu.py finds a
Python with llama_cpp and gguf (the bench extra; CI never installs it) and say why not elsewhere."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bench_cpu

BENCH = Path(bench_cpu.__file__)
HAS_LLAMA = bench_cpu.llama_python(None) is not None  # as bench_cpu.py finds one


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    pytest.importorskip("transformers")
    pytest.importorskip("safetensors")
    out = tmp_path_factory.mktemp("cpu")
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--out", str(out), "--work", str(out / "work")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return out, json.loads((out / "cpu.json").read_text())


@pytest.mark.bench_smoke
def test_every_torch_runtime_reports_its_figures(quick_run):
    out, report = quick_run
    tiny = report["configs"]["tiny"]
    for name in ("tribuild", "transformers"):
        figures = tiny["runtimes"][name]
        assert "error" not in figures, figures
        assert figures["decode_ms"] > 0 and figures["load_s"] > 0
        assert set(figures["prefill_tok_s"]) == {"16", "32"}
        assert figures["peak_rss"] >= figures["rss_first"] > 0
    first = tiny["runtimes"]["tribuild"]["first_load"]  # the load that filled the cache
    assert "error" not in first, first
    assert first["load_s"] > 0 and first["first_token_s"] > 0 and first["peak_rss"] > 0
    assert not (out / "work" / "tiny" / "weight-cache").exists()  # deleted after the runs
    agreement = tiny["agreement"]["tribuild vs transformers"]
    assert agreement["max_rel_diff"] < 0.1  # same weights; tribuild quantizes activations
    assert report["meta"]["load_average_start"] and report["meta"]["load_average_end"]


@pytest.mark.bench_smoke
def test_llama_cpp_runs_or_says_why(quick_run):
    _, report = quick_run
    figures = report["configs"]["tiny"]["runtimes"]["llama.cpp"]
    if HAS_LLAMA:
        assert "error" not in figures, figures
        assert report["configs"]["tiny"]["agreement"]["llama.cpp vs transformers (SiLU)"]
    else:
        assert figures == {"error": "not run: llama_cpp and gguf are not installed"}


@pytest.mark.bench_smoke
def test_kernels_resnet_and_tables(quick_run):
    out, report = quick_run
    assert report["kernels"]["read_gb_s"] > 0 and report["kernels"]["ternary_gb_s"] > 0
    assert report["resnet18"]["ms"]["tribuild"] > 0 and report["resnet18"]["max_rel_error"] < 1e-3
    goals = {g["goal"] for g in report["goals"]}
    assert {"decode, tiny", "decode GEMV kernel", "ResNet-18 batch 1"} <= goals
    assert {"load + first token, tiny", "first load + first token, tiny"} <= goals
    text = (out / "cpu.md").read_text()
    for heading in ("## Logits on the same weights", "## GEMV and read bandwidth", "## Goals"):
        assert heading in text
    assert "| tiny | tribuild, first load (converts; the cache empty) |" in text


@pytest.mark.bench_smoke
def test_cpu_runs_puts_runs_side_by_side(quick_run, tmp_path):
    """Two runs (the quick run and a copy whose GEMV figure is halved) into cpu_runs.md: every
    run's figure, the median of the two, and the goal judged on it by the row's bound."""
    from benchmarks import cpu_runs

    out, report = quick_run
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(report))
    gemv = next(g for g in report["goals"] if g["goal"] == "decode GEMV kernel")
    gemv["measured"] /= 2
    second.write_text(json.dumps(report))
    assert cpu_runs.main([str(first), str(second), "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "cpu_runs.json").read_text())
    row = summary["goals"]["decode GEMV kernel"]
    assert row["median"] == pytest.approx(gemv["measured"] * 1.5)
    assert row["met"] == (row["median"] >= row["limit"])
    assert (
        len(summary["runs"]) == 2
        and "| decode GEMV kernel |" in (tmp_path / "out" / "cpu_runs.md").read_text()
    )


def test_cpu_runs_tells_apart_runs_of_one_name(tmp_path):
    """bench_cpu.py writes every run as <out>/cpu.json: two runs' folders given side by side
    are two runs (their figures were filed under one name, the first lost, the median of one)."""
    from benchmarks import cpu_runs

    paths = []
    for run, measured in (("a", 1.0), ("b", 3.0)):
        (tmp_path / run).mkdir()
        report = {
            "meta": {
                "started": run,
                "commit": "c",
                "load_average_start": [1.0],
                "load_average_end": [1.0],
            },
            "goals": [
                {
                    "goal": "g",
                    "bound": ">= 2x",
                    "limit": 2.0,
                    "at_least": True,
                    "measured": measured,
                }
            ],
        }
        paths.append(tmp_path / run / "cpu.json")
        paths[-1].write_text(json.dumps(report))
    summary = cpu_runs.collect(paths)
    assert len(summary["runs"]) == 2 and summary["goals"]["g"]["median"] == 2.0
    assert summary["goals"]["g"]["met_in"] == [1, 2]
    cells = cpu_runs.markdown(summary).split("| g |")[1]
    assert "1.00x" in cells and "3.00x" in cells
    with pytest.raises(SystemExit, match="given twice"):  # one run counted twice
        cpu_runs.collect([paths[0], paths[0]])


@pytest.mark.bench_smoke
def test_bench_cpu_conv_quick(tmp_path):
    """bench_cpu_conv.py --quick: one tiny convolution through every route, the float-activation
    kernel's output equal to float32's up to rounding, the JSON and the table written."""
    pytest.importorskip("torch")
    from benchmarks import bench_cpu_conv
    from tribuild.runtime.kernels.cpu import build

    if build.find_compiler() is None:
        pytest.skip("no C++ compiler: the native kernels cannot be built")

    assert bench_cpu_conv.main(["--quick", "--repeats", "2", "--out", str(tmp_path)]) == 0
    (row,) = json.loads((tmp_path / "cpu_conv.json").read_text())["rows"]
    assert set(row["ms"]) == {"float32", "ternary_f32", "ternary_int8"}
    assert row["ternary_f32_rel_error"] < 1e-5
    assert "| 8 -> 8 @ 6 |" in (tmp_path / "cpu_conv.md").read_text()
