"""Ternary kernels vs PyTorch's float16 matmul, on a CUDA GPU.

For each size (M tokens, N outputs, K inputs): the time of ``ternary_linear`` (2-bit packed
weights, float16 activations) and of ``x @ Wᵀ`` with a dense float16 ``W``, measured side by
side, their ratio, and the bandwidth each achieves (bytes it must move / time) as a fraction
of the device's peak, taken from ``PEAK_GBPS`` by device name or from ``--peak-gbps``. M = 1
is the GEMV (decoding at batch 1), larger M the GEMM. Each row names the kernel and config the
autotuner chose (at -O3 the decode kernel competes for M <= 16). BitLinear's int8 rows are
``bench_e2e_gpu.py``'s.

Two clocks per call:
- *kernel*: ``tribuild.runtime.autotune.gpu_ms``, the GPU time of one call replayed from a CUDA
  graph right after L2 is flushed, so neither Python's launch cost nor a warm L2 is counted
  (the median of ``REPLAYS``); the autotuner chooses by the same clock. Speedups and
  bandwidths use this one.
- *eager*: ``triton.testing.do_bench``'s median of plain calls, launch cost included, as a
  model run without graphs sees it.

Each round times both sides; the figures are medians over ``--repeats`` rounds. Writes
``benchmarks/results/kernels_<device>.json`` and ``.md``.

Without CUDA, or with ``--quick``, it only smoke-checks itself on tiny shapes (under the
Triton interpreter on a CPU) and writes nothing: GPU figures need a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = ((4096, 4096), (11008, 4096), (4096, 11008))  # (N, K) of Llama-7B-like layers
ROWS = (1, 16, 2048)
QUICK_SIZES = ((1, 24, 40), (8, 24, 40))
REPLAYS = 200
# HBM bandwidth in GB/s by a substring of torch.cuda.get_device_name(); first match wins.
PEAK_GBPS = [
    ("H200", 4800),
    ("H100 NVL", 3900),
    ("H100 PCIe", 2000),
    ("H100", 3350),
    ("A100-SXM4-80GB", 2039),
    ("A100 80GB PCIe", 1935),
    ("A100", 1555),
    ("L40S", 864),
    ("L4", 300),
    ("A10", 600),
    ("RTX 4090", 1008),
    ("RTX 3090", 936),
    ("V100", 900),
    ("T4", 320),
]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny smoke check only; writes nothing")
    p.add_argument("--peak-gbps", type=float, help="device peak memory bandwidth in GB/s")
    p.add_argument("--opt-level", type=int, default=3, help="3 tunes the kernel configs (default)")
    p.add_argument("--repeats", type=int, default=5, help="side-by-side rounds; the median is kept")
    return p.parse_args(argv)


def peak_gbps(device: str, override: float | None) -> float | None:
    if override is not None:
        return override
    return next((gbps for name, gbps in PEAK_GBPS if name in device), None)


def moved_bytes(m: int, n: int, k: int, ternary: bool) -> int:
    """Bytes a kernel must read and write at least: weight, activations in, outputs out."""
    weight = n * -(-k // 4) + 4 * n if ternary else 2 * n * k
    return weight + 2 * m * k + 2 * m * n


def operands(m: int, n: int, k: int, device: str):
    """``x`` [m, k] float16, the packed weight and scale of a random [n, k] layer, its dense
    float16."""
    import torch

    from tribuild.runtime.packing import pack
    from tribuild.runtime.ternarize import dequantize, ternarize

    gen = torch.Generator().manual_seed(0)
    codes, g = ternarize(torch.randn(n, k, generator=gen), "channel")
    x = torch.randn(m, k, generator=gen).half()
    return (
        x.to(device),
        pack(codes).to(device),
        g.to(device),
        dequantize(codes, g).half().to(device),
    )


def check(out, ref) -> float:
    """Relative error of ``out`` against ``ref``; raises when it is not float16 noise."""
    err = ((out.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-12)).item()
    if err > 1e-2:
        raise SystemExit(
            f"ternary kernel disagrees with the dense reference: relative error {err:.2e}"
        )
    return err


def measure(m: int, n: int, k: int, args, peak: float | None) -> dict:
    from triton.testing import do_bench

    from tribuild.runtime import ternary_linear
    from tribuild.runtime.autotune import gpu_ms
    from tribuild.runtime.launch import prepared_kernels

    x, packed, g, dense = operands(m, n, k, "cuda")

    def ternary():
        return ternary_linear(x, packed, g, tuned=args.opt_level >= 3)

    def fp16():
        return x @ dense.T

    before = len(prepared_kernels())
    err = check(ternary(), fp16())  # also tunes the ternary kernel at -O3, before any timing
    chosen = prepared_kernels()[before:]
    rounds = [
        (
            gpu_ms(ternary, x.device, REPLAYS),
            gpu_ms(fp16, x.device, REPLAYS),
            do_bench(ternary, return_mode="median"),
            do_bench(fp16, return_mode="median"),
        )
        for _ in range(args.repeats)
    ]
    t_ms, d_ms, t_eager, d_eager = (statistics.median(r[i] for r in rounds) for i in range(4))
    row = {
        "M": m,
        "N": n,
        "K": k,
        "ternary_ms": t_ms,
        "fp16_ms": d_ms,
        "speedup_vs_fp16": statistics.median(r[1] / r[0] for r in rounds),
        "ternary_eager_ms": t_eager,
        "fp16_eager_ms": d_eager,
        "eager_speedup_vs_fp16": statistics.median(r[3] / r[2] for r in rounds),
        "rel_error": err,
        "kernel": " + ".join(chosen),
    }
    for name, ms, is_ternary in (("ternary", t_ms, True), ("fp16", d_ms, False)):
        gbps = moved_bytes(m, n, k, is_ternary) / ms / 1e6
        row[f"{name}_gbps"] = gbps
        row[f"{name}_peak_fraction"] = gbps / peak if peak else None
        row[f"{name}_tflops"] = 2 * m * n * k / ms / 1e9
    return row


def _gbps_cell(row: dict, name: str) -> str:
    fraction = row[f"{name}_peak_fraction"]
    return f"{row[f'{name}_gbps']:.0f} ({'?' if fraction is None else f'{fraction:.0%}'})"


def markdown(report: dict) -> str:
    peak = report["peak_gbps"]
    lines = [
        f"# Ternary kernels on {report['device']}",
        "",
        f"Peak bandwidth {peak} GB/s; torch {report['torch']}, triton {report['triton']}; "
        f"-O{report['opt_level']}; medians of {report['repeats']} side-by-side rounds. Kernel: "
        "GPU time "
        f"of a CUDA-graph replay after an L2 flush (median of {REPLAYS}); eager: do_bench of plain "
        "calls, launch cost included. Speedup = fp16 / ternary; GB/s from kernel time.",
        "",
        "| M | N | K | ternary ms | fp16 ms | speedup | ternary GB/s (peak) | fp16 GB/s (peak) "
        "| eager ternary ms | eager fp16 ms | eager speedup |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        cells = [
            r["M"],
            r["N"],
            r["K"],
            f"{r['ternary_ms']:.4f}",
            f"{r['fp16_ms']:.4f}",
            f"{r['speedup_vs_fp16']:.2f}x",
            _gbps_cell(r, "ternary"),
            _gbps_cell(r, "fp16"),
            f"{r['ternary_eager_ms']:.4f}",
            f"{r['fp16_eager_ms']:.4f}",
            f"{r['eager_speedup_vs_fp16']:.2f}x",
        ]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    chosen = [r for r in report["results"] if r.get("kernel")]
    if chosen:
        lines += ["", "Kernels chosen:", ""]
        lines += [f"- M={r['M']} N={r['N']} K={r['K']}: {r['kernel']}" for r in chosen]
    return "\n".join(lines) + "\n"


def run_gpu(args) -> None:
    import torch
    import triton

    device = torch.cuda.get_device_name()
    peak = peak_gbps(device, args.peak_gbps)
    if peak is None:
        print(f"no peak bandwidth known for {device!r}: pass --peak-gbps for the fractions")
    results = []
    for m in ROWS:
        for n, k in SIZES:
            results.append(measure(m, n, k, args, peak))
            r = results[-1]
            print(
                f"M={m:5d} N={n:6d} K={k:6d}  ternary {r['ternary_ms']:.4f} ms  fp16 "
                f"{r['fp16_ms']:.4f} ms"
                f"  x{r['speedup_vs_fp16']:.2f}  {r['ternary_gbps']:.0f} GB/s"
                f"  (eager {r['ternary_eager_ms']:.4f} / {r['fp16_eager_ms']:.4f} ms)"
            )
    report = {
        "device": device,
        "peak_gbps": peak,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "opt_level": args.opt_level,
        "repeats": args.repeats,
        "results": results,
    }
    slug = re.sub(r"[^A-Za-z0-9]+", "-", device).strip("-")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"kernels_{slug}.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / f"kernels_{slug}.md").write_text(markdown(report))
    print(f"wrote {RESULTS / f'kernels_{slug}.json'} and .md")


def run_quick(on_gpu: bool) -> None:
    """Tiny shapes through the Triton path, checked against the dense reference; no timing."""
    if not on_gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    from tribuild.runtime.launch import force_backend, ternary_linear

    device = "cuda" if on_gpu else "cpu"
    for m, n, k in QUICK_SIZES:
        x, packed, g, dense = operands(m, n, k, device)
        with force_backend("triton"):
            err = check(ternary_linear(x, packed, g), x.float() @ dense.float().T)
        print(f"smoke M={m} N={n} K={k}: triton path ok (relative error {err:.1e})")
    if not on_gpu:
        print(
            "GPU figures need a GPU: this was only a smoke check under the Triton CPU interpreter."
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    on_gpu = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    if args.quick or not on_gpu:
        if not args.quick:
            print("no CUDA device: running the --quick smoke check instead")
        run_quick(on_gpu)
    else:
        run_gpu(args)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
