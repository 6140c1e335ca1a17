"""Channels-last vs NCHW for conv chains on this CPU: the measurement behind the layout pass.

A *chain* here is ``depth`` blocks of ``conv (k x k, stride 1, 'same' padding) -> BatchNorm2d
-> ReLU`` at ``channels`` channels on a ``[1, channels, size, size]`` input, with the
conv's weight a plain float tensor (as the CPU path of a ternary layer computes it, a cached
dense weight through ``F.conv2d``). Op classes: ``dense`` (groups 1, k=3), ``pointwise``
(groups 1, k=1) and ``depthwise`` (groups = channels, k=3). Each chain is timed NCHW, and
channels-last *including* the conversion at its entry and back at its exit, interleaved
(ABAB...), one thread, median of ``--repeats`` rounds; ``speedup = nchw / channels_last``.
Writes ``benchmarks/results/layout.{json,md}``; ``tribuild.ir.passes.layout`` cites them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

RESULTS = Path(__file__).resolve().parent / "results"
CLASSES = {"dense": (3, False), "pointwise": (1, False), "depthwise": (3, True)}
CHANNELS = (8, 16, 32, 64, 128, 256)
SIZES = (8, 14, 28, 56)
DEPTH = 2


def chain(op: str, c: int, depth: int):
    k, depthwise = CLASSES[op]
    gen = torch.Generator().manual_seed(0)
    ws = [torch.randn(c, 1 if depthwise else c, k, k, generator=gen) * 0.1 for _ in range(depth)]
    stats = [
        (torch.randn(c, generator=gen), torch.rand(c, generator=gen) + 0.5) for _ in range(depth)
    ]

    def run(x: torch.Tensor) -> torch.Tensor:
        for w, (mean, var) in zip(ws, stats, strict=True):
            x = F.relu(
                F.batch_norm(F.conv2d(x, w, None, 1, k // 2, 1, c if depthwise else 1), mean, var)
            )
        return x

    return run


def timed(fn, x: torch.Tensor, iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        fn(x)
    return (time.perf_counter() - start) / iters * 1e3


def measure(op: str, c: int, size: int, repeats: int) -> dict:
    run = chain(op, c, DEPTH)
    x = torch.randn(1, c, size, size)
    nchw = run

    def channels_last(t: torch.Tensor) -> torch.Tensor:
        return run(t.contiguous(memory_format=torch.channels_last)).contiguous()

    iters = max(1, int(2e6 // (c * c * size * size // (c if op == "depthwise" else 1) + 1)))
    iters = min(iters, 50)
    a, b = [], []
    with torch.no_grad():
        torch.testing.assert_close(channels_last(x), nchw(x), rtol=1e-3, atol=1e-3)
        for fn in (nchw, channels_last):
            timed(fn, x, 2)
        for _ in range(repeats):
            a.append(timed(nchw, x, iters))
            b.append(timed(channels_last, x, iters))
    ma, mb = statistics.median(a), statistics.median(b)
    return {
        "op": op,
        "channels": c,
        "size": size,
        "nchw_ms": ma,
        "channels_last_ms": mb,
        "speedup": ma / mb,
        "spread": [
            min(x / y for x, y in zip(a, b, strict=True)),
            max(x / y for x, y in zip(a, b, strict=True)),
        ],
    }


def markdown(rows: list[dict], meta: dict) -> str:
    out = [
        "# Conv chains: channels-last vs NCHW (CPU, one thread)",
        "",
        f"torch {meta['torch']}, {meta['machine']}, load average {meta['load']}; {DEPTH} blocks of "
        f"conv -> BatchNorm -> ReLU, batch 1, median of {meta['repeats']} interleaved rounds; "
        "channels-last "
        "time includes the conversion at the chain's entry and back at its exit. speedup = NCHW / "
        "channels-last (> 1: channels-last wins); spread = min..max of the per-round ratios.",
        "",
    ]
    for op in CLASSES:
        out += [
            f"## {op}",
            "",
            "| channels | " + " | ".join(f"{s}x{s}" for s in SIZES) + " |",
            "|---|" + "---|" * len(SIZES),
        ]
        for c in CHANNELS:
            cells = []
            for s in SIZES:
                r = next(r for r in rows if (r["op"], r["channels"], r["size"]) == (op, c, s))
                cells.append(f"{r['speedup']:.2f} ({r['spread'][0]:.2f}..{r['spread'][1]:.2f})")
            out.append(f"| {c} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=9)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    meta = {
        "torch": torch.__version__,
        "machine": platform.machine(),
        "threads": 1,
        "load": [round(x, 2) for x in os.getloadavg()],
        "repeats": a.repeats,
    }
    rows = [measure(op, c, s, a.repeats) for op in CLASSES for c in CHANNELS for s in SIZES]
    text = markdown(rows, meta)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "layout.json").write_text(
        json.dumps({"meta": meta, "chains": rows}, indent=1) + "\n"
    )
    (RESULTS / "layout.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
