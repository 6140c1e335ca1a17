"""Whether ternary convolutions should run through the native CPU GEMM: ResNet-18's 3x3
convolutions at batch 1, float32 PyTorch (oneDNN) against the patches (``F.unfold``, the
packed order) times the 2-bit codes on ``ternary.cpp``'s kernels, side by side in one run.

Why: issue 34 asks for ternary convolutions through the kernels' GEMM where that beats the
float path. The zoo's CNNs keep float activations, so their product is the float-activation
kernel (``tb_linear_f32``); the int8 one (``tb_linear``, BitLinear's per-row quantization of
the patches) is shown too, for a network that quantizes its activations: its arithmetic is
another model's, so it cannot stand in for the float one.

Figures are medians over ``--repeats`` interleaved rounds, in CPU time on 1 thread
(``time.process_time()``: the machine is shared, and the CPU time of a compute-bound call is
not at the mercy of its load). The im2col copy counts: it is work the native route must do.
Writes ``benchmarks/results/cpu_conv.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
# (input channels, output channels, height = width): ResNet-18's 3x3 stages at 224x224
SHAPES = ((64, 64, 56), (128, 128, 28), (256, 256, 14), (512, 512, 7))
QUICK_SHAPES = ((8, 8, 6),)
SCALE = 0.02


def cases(torch: Any, lib: Any, cin: int, cout: int, hw: int) -> dict[str, Callable[[], Any]]:
    """The three routes of one convolution, each returning ``[1, cout, hw, hw]``."""
    import torch.nn.functional as F

    from tribuild.runtime import native
    from tribuild.runtime.packing import pack

    gen = torch.Generator().manual_seed(cin * cout + hw)
    x = torch.randn(1, cin, hw, hw, generator=gen)
    codes = torch.randint(-1, 2, (cout, cin * 9), dtype=torch.int8, generator=gen)
    weight = codes.float().reshape(cout, cin, 3, 3) * SCALE
    layout = native.layout(lib, pack(codes), cout, cin * 9)
    scale = torch.tensor([SCALE])

    def patches() -> Any:
        return F.unfold(x, 3, padding=1).transpose(1, 2).contiguous()  # [1, hw², cin·9]

    def native_route(quantize: bool) -> Any:
        cols = patches()
        m = cols.shape[1]
        out = torch.empty(m, cout)
        args = (cols.data_ptr(), m, cin * 9, layout.data_ptr(), cout, scale.data_ptr(), 0)
        args += (None, None, 0, out.data_ptr())
        if quantize:
            lib.cdll.tb_linear(*args, native.EPS, 1)
        else:
            lib.cdll.tb_linear_f32(*args, 1)
        return out.T.reshape(1, cout, hw, hw)

    return {
        "float32": lambda: F.conv2d(x, weight, padding=1),
        "ternary_f32": lambda: native_route(False),
        "ternary_int8": lambda: native_route(True),
    }


def measure(shapes: tuple[tuple[int, int, int], ...], repeats: int) -> list[dict]:
    import torch

    from tribuild.runtime import native

    torch.set_num_threads(1)
    lib = native.library("a benchmark")
    if lib is None:
        raise SystemExit("the native CPU kernels cannot be built here (see the warning)")
    rows = []
    for cin, cout, hw in shapes:
        routes = cases(torch, lib, cin, cout, hw)
        with torch.no_grad():
            reference = routes["float32"]()
            error = (routes["ternary_f32"]() - reference).abs().max() / reference.abs().max()
            times: dict[str, list[float]] = {name: [] for name in routes}
            for _ in range(repeats):
                for name, fn in routes.items():
                    start = time.process_time()
                    fn()
                    times[name].append(time.process_time() - start)
        ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
        rows.append(
            {
                "shape": [cin, cout, hw],
                "ms": ms,
                "vs_float32": {name: ms["float32"] / v for name, v in ms.items()},
                "ternary_f32_rel_error": error.item(),
            }
        )
    return rows


def markdown(report: dict) -> str:
    out = [
        "# Ternary 3x3 convolutions through the native GEMM (`benchmarks/bench_cpu_conv.py`)",
        "",
        f"{report['cpu']}; 1 thread, CPU time, medians of {report['repeats']} interleaved "
        f"rounds; commit {report['commit']}; {report['started']}. Batch 1, padding 1, "
        "ResNet-18's 3x3 stages at 224x224. Speed is float32's time over the route's (above "
        "1 is faster than float32).",
        "",
        "| conv (in -> out @ size) | float32 F.conv2d ms | im2col + ternary kernel, float "
        "activations ms (speed) | im2col + ternary kernel, int8 activations ms (speed) | "
        "float-activation error vs float32 |",
        "|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        cin, cout, hw = r["shape"]
        ms, v = r["ms"], r["vs_float32"]
        out.append(
            f"| {cin} -> {cout} @ {hw} | {ms['float32']:.2f} | {ms['ternary_f32']:.2f} "
            f"({v['ternary_f32']:.2f}x) | {ms['ternary_int8']:.2f} ({v['ternary_int8']:.2f}x) | "
            f"{r['ternary_f32_rel_error']:.1e} |"
        )
    out += [
        "",
        "The zoo's CNNs keep float activations: their convolutions stay on PyTorch's float path, "
        "which the float-activation kernel does not beat on any stage. The int8 column is "
        "another network's arithmetic (activations quantized per patch row), shown for a "
        "network built that way.",
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    from benchmarks.report.results import meta

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="one tiny shape (the smoke test's)")
    p.add_argument("--out", type=Path, default=RESULTS)
    a = p.parse_args(argv)
    report = {**meta(), "repeats": a.repeats}
    report["rows"] = measure(QUICK_SHAPES if a.quick else SHAPES, a.repeats)
    report["load_average_end"] = os.getloadavg()
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "cpu_conv.json").write_text(json.dumps(report, indent=1) + "\n")
    text = markdown(report)
    (a.out / "cpu_conv.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
