"""The native CPU kernels (``tribuild.runtime.kernels.cpu``) against float32 ``F.linear``, and
the machine's read bandwidth, measured side by side in one run.

For each layer shape of ``bitnet_2b`` (N outputs, K inputs) and each row count M: the time of
``launch.ternary_linear(..., quantize=True)`` on the ``cpu`` backend (BitLinear: the int8
quantization of ``x`` fused, 2-bit weights in the kernels' layout) and of ``F.linear`` with the
dense float32 weight, their ratio, and the GB/s each reads (weight bytes / time; what bounds
decoding, M = 1) against the *read bandwidth*: a float32 sum over a buffer far
larger than the caches (``READ_MB``), the same threads. Each round times every case once, in
turn (the machine is shared: figures are medians over ``--repeats`` rounds, and ratios are
taken within a round). ``torch.set_num_threads(--threads)`` governs both sides.

Writes ``benchmarks/results/cpu_kernels.json`` and ``.md``; ``--quick`` checks itself on tiny
shapes and writes nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = ((2560, 2560), (6912, 2560), (2560, 6912), (640, 2560))  # (N, K): bitnet_2b's layers
ROWS = (1, 4, 16, 128, 512)
QUICK_SIZES = ((24, 40),)
QUICK_ROWS = (1, 3)
READ_MB = 256
CALLS = 20  # calls a timing takes the median of, at most
BUDGET_S = 0.5  # seconds of calls a timing stops after (long products)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny smoke check only; writes nothing")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--repeats", type=int, default=5, help="side-by-side rounds; medians kept")
    return p.parse_args(argv)


def median_ms(fn, calls: int = CALLS) -> float:
    """The median of up to ``calls`` timed calls (at least 3, else ``BUDGET_S`` seconds)."""
    fn()  # warm: converted layouts, caches, the thread pool
    times: list[float] = []
    while len(times) < calls and (len(times) < 3 or sum(times) < BUDGET_S):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def cases(quick: bool):
    import torch
    import torch.nn.functional as F

    from tribuild.runtime import launch
    from tribuild.runtime.packing import pack
    from tribuild.runtime.ternarize import dequantize, ternarize

    gen = torch.Generator().manual_seed(0)
    for n, k in QUICK_SIZES if quick else SIZES:
        codes, g = ternarize(torch.randn(n, k, generator=gen))
        packed, dense = pack(codes), dequantize(codes, g)
        # copies enough to overflow the last-level cache twice, called in turn: every call reads
        # its weight from memory, as in a model (the float weight alone is larger already)
        copies = [packed] + [
            packed.clone() for _ in range(-(-2 * last_level_cache() // packed.numel()) - 1)
        ]
        for m in QUICK_ROWS if quick else ROWS:
            x = torch.randn(m, k, generator=gen)
            with launch.force_backend("cpu"):
                out = launch.ternary_linear(x, packed, g, quantize=True)
            with launch.force_backend("torch"):
                ref = launch.ternary_linear(x, packed, g, quantize=True)
            err = float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-12))
            if err > 1e-4:
                raise SystemExit(f"cpu kernel disagrees with the torch path: {err:.2e}")

            turn = itertools.cycle(copies)

            def ternary(x=x, g=g, turn=turn):
                with launch.force_backend("cpu"):
                    launch.ternary_linear(x, next(turn), g, quantize=True)

            yield (
                {"m": m, "n": n, "k": k, "weight_bytes": n * -(-k // 4)},
                ternary,
                (lambda x=x, dense=dense: F.linear(x, dense)),
            )


def last_level_cache() -> int:
    """Bytes of the CPU's largest cache (sysfs; 32 MiB where it does not say)."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip()
        unit = {"K": 2**10, "M": 2**20}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KM")) * unit)
    return max(sizes, default=32 * 2**20)


def read_gbps(quick: bool) -> float:
    """GB/s of a float32 sum over ``READ_MB`` (a few MB with ``quick``)."""
    import torch

    buf = torch.ones((4 if quick else READ_MB) * 2**20 // 4)
    return buf.numel() * 4 / median_ms(buf.sum, 5 if quick else 10) / 1e6


def run(args: argparse.Namespace) -> dict:
    import torch

    from tribuild.runtime import native

    torch.set_num_threads(args.threads)
    lib = native.library("the benchmark")
    if lib is None:
        raise SystemExit("the CPU kernels are not available here (see the warning)")
    built = list(cases(args.quick))
    rounds: list[dict] = []
    for _ in range(1 if args.quick else args.repeats):
        bandwidth = read_gbps(args.quick)
        row = []
        for spec, ternary, dense in built:
            t, f = median_ms(ternary), median_ms(dense)
            row.append({**spec, "ternary_ms": t, "float_ms": f, "read_gbps": bandwidth})
        rounds.append({"read_gbps": bandwidth, "cases": row})
    results = []
    for i, (spec, _, _) in enumerate(built):
        per = [r["cases"][i] for r in rounds]
        t = statistics.median(c["ternary_ms"] for c in per)
        f = statistics.median(c["float_ms"] for c in per)
        entry = {
            **spec,
            "ternary_ms": t,
            "float_ms": f,
            "speedup": statistics.median(c["float_ms"] / c["ternary_ms"] for c in per),
            "ternary_gbps": spec["weight_bytes"] / t / 1e6,
            "float_gbps": 4 * spec["n"] * spec["k"] / f / 1e6,
            "ternary_of_read": statistics.median(
                spec["weight_bytes"] / c["ternary_ms"] / 1e6 / c["read_gbps"] for c in per
            ),
        }
        results.append(entry)
    return {
        "load_average": os.getloadavg(),  # the shared machine's load: how far to trust a run
        "isa": lib.isa,
        "threads": args.threads,
        "repeats": len(rounds),
        "read_gbps": statistics.median(r["read_gbps"] for r in rounds),
        "results": results,
    }


def table(report: dict) -> str:
    lines = [
        "# CPU kernels: ternary BitLinear vs float32 F.linear",
        "",
        f"ISA `{report['isa']}`, {report['threads']} threads, medians of {report['repeats']} "
        f"side-by-side rounds; read bandwidth (float32 sum over {READ_MB} MB) "
        f"{report['read_gbps']:.1f} GB/s; load average at the end "
        f"{', '.join(f'{v:.1f}' for v in report['load_average'])} on "
        f"{os.cpu_count()} CPUs. Written by `benchmarks/bench_cpu_kernels.py`.",
        "",
        "| M | N | K | ternary ms | float32 ms | speedup | ternary GB/s (2-bit weight) "
        "| of read bandwidth | float32 GB/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['m']} | {r['n']} | {r['k']} | {r['ternary_ms']:.3f} | {r['float_ms']:.3f} "
            f"| {r['speedup']:.1f}x | {r['ternary_gbps']:.1f} | {100 * r['ternary_of_read']:.0f}% "
            f"| {r['float_gbps']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    text = table(report)
    if args.quick:
        print(text)
        return 0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cpu_kernels.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / "cpu_kernels.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
