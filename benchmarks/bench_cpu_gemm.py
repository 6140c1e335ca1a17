"""The prefill GEMM of the native CPU kernels (``ternary.cpp``'s ``tb_linear``, M > 1 rows),
an old revision's library against the working tree's, side by side in one run, in **CPU
time** (the machine this runs on is shared: wall time is at the mercy of the load, the CPU
time a call takes is not, to first order).

For each layer shape of ``bitnet_2b`` (N outputs, K inputs) and each row count M, both
libraries are built from source (the old one from ``git show <rev>:<file>`` of the three
sources, the same compiler and flags), loaded side by side with ``ctypes``, and called on the
same random weight (already in the kernels' layout) and activations; each round times every
case once, in turn. Figures are medians over ``--repeats`` rounds of:
- *1 thread*: ``time.thread_time()`` around one call with ``threads=1`` (the caller's thread
  runs it all);
- *2 threads*: ``time.process_time()`` around one call with ``threads=2`` (the CPU time of
  both threads: equal to the 1-thread figure when the split costs nothing) and each OpenMP
  thread's share of the groups (the kernels split channel groups evenly, so the split is
  checked as the CPU time of the whole call against 1 thread).
The integer sums of both libraries are checked equal on every case first.

Writes ``benchmarks/results/cpu_gemm.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SIZES = ((2560, 2560), (6912, 2560), (2560, 6912), (640, 2560))  # (N, K): bitnet_2b's layers
ROWS = (128, 512)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", default="HEAD", help="git revision of the old kernels (default HEAD)")
    p.add_argument("--repeats", type=int, default=5, help="side-by-side rounds; medians kept")
    p.add_argument("--rows", type=int, nargs="*", default=list(ROWS))
    p.add_argument("--no-write", action="store_true", help="print only")
    p.add_argument(
        "--model",
        type=Path,
        help="a folder with module-O3/model.py and checkpoint/: also the whole prefill, old tree "
        "against new (cpu_prefill_split.py in a process each)",
    )
    p.add_argument("--model-repeats", type=int, default=3)
    return p.parse_args(argv)


def build_old(rev: str, out_dir: Path):
    """The library of revision ``rev``'s sources, built as ``build`` builds the tree's."""
    from tribuild.runtime.kernels.cpu import build

    src = out_dir / "src"
    src.mkdir()
    names = []
    for source in build.SOURCES:
        rel = source.relative_to(ROOT)
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:{rel}"], capture_output=True, check=True
        ).stdout
        (src / source.name).write_bytes(text)
        names.append(str(src / source.name))
    compiler = build.find_compiler()
    assert compiler is not None, "no C++ compiler"
    isa = build.wanted_isa()
    path = out_dir / f"old-{isa}.so"
    cmd = [compiler.path, *build.FLAGS, *build.ISA_FLAGS[isa], *names, "-o", str(path)]
    subprocess.run(cmd, check=True)
    return build.load(path, isa)


def model_split(rev: str, folder: Path, repeats: int, rounds: int = 2) -> dict[str, dict]:
    """``cpu_prefill_split.py``'s figures of the old tree (``git archive`` of ``rev``) and the
    working tree, each in a fresh process, interleaved ``rounds`` times (old, new, old, new);
    per case, the round with the most tokens per CPU-second (the least disturbed by the load)."""
    out: dict[str, dict] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "tribuild"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        for _ in range(rounds):
            for name, tree in (("old", Path(tmp)), ("new", ROOT)):
                env = {**os.environ, "PYTHONPATH": str(tree)}
                cmd = [sys.executable, str(Path(__file__).with_name("cpu_prefill_split.py"))]
                cmd += [str(folder / "module-O3" / "model.py"), str(folder / "checkpoint")]
                cmd += ["128,512", str(repeats)]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                got = json.loads(done.stdout.strip().splitlines()[-1])
                print(name, json.dumps(got))
                for key_, value in got.items():
                    best = out[name].get(key_)
                    if key_ == "library" or best is None:
                        out[name][key_] = value
                    elif value["tok_per_cpu_s"] > best["tok_per_cpu_s"]:
                        out[name][key_] = value
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from tribuild.runtime.kernels.cpu import build

    torch.manual_seed(0)
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.old],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        old = build_old(args.old, Path(tmp))
        new = build.build_and_load(build.wanted_isa())
        libs = {"old": old, "new": new}
        cases = []
        for n, k in SIZES:
            codes = torch.randint(0, 3, (n, (k + 3) // 4 * 4), dtype=torch.uint8)
            codes[:, k:] = 0
            c = codes.reshape(n, -1, 4)
            packed = (c[..., 0] | c[..., 1] << 2 | c[..., 2] << 4 | c[..., 3] << 6).contiguous()
            w = torch.empty(new.cdll.tb_layout_bytes(n, k), dtype=torch.uint8)
            new.cdll.tb_repack(packed.data_ptr(), n, k, w.data_ptr())
            w_old = torch.empty(old.cdll.tb_layout_bytes(n, k), dtype=torch.uint8)
            old.cdll.tb_repack(packed.data_ptr(), n, k, w_old.data_ptr())
            assert torch.equal(w, w_old), "the layouts differ: compare like with like"
            for m in args.rows:
                x = torch.randn(m, k)
                raws = {}
                for name, lib in libs.items():
                    raw = torch.empty(m, n, dtype=torch.int32)
                    lib.cdll.tb_linear_raw(
                        x.data_ptr(), m, k, w.data_ptr(), n, raw.data_ptr(), 1e-5, 2
                    )
                    raws[name] = raw
                assert torch.equal(raws["old"], raws["new"]), f"sums differ at {m}x{k}x{n}"
                cases.append((n, k, m, w, x))
        scale = torch.ones(1)
        times: dict[tuple, list[float]] = {}
        for _ in range(args.repeats):
            for n, k, m, w, x in cases:
                out = torch.empty(m, n)
                for name, lib in libs.items():
                    for threads, clock in ((1, time.thread_time), (2, time.process_time)):
                        start, wall = clock(), time.perf_counter()
                        lib.cdll.tb_linear(
                            x.data_ptr(),
                            m,
                            k,
                            w.data_ptr(),
                            n,
                            scale.data_ptr(),
                            0,
                            None,
                            None,
                            0,
                            out.data_ptr(),
                            1e-5,
                            threads,
                        )
                        times.setdefault((n, k, m, name, threads), []).append(clock() - start)
                        if threads == 2:
                            wall = time.perf_counter() - wall
                            times.setdefault((n, k, m, name, "wall"), []).append(wall)
        load = os.getloadavg()
    rows = []
    for n, k, m, _, _ in cases:
        row = {"n": n, "k": k, "m": m}
        for name in libs:
            for threads in (1, 2):
                t = times[(n, k, m, name, threads)]
                row[f"{name}_cpu_ms_{threads}t"] = statistics.median(t) * 1e3
                row[f"{name}_min_cpu_ms_{threads}t"] = min(t) * 1e3
            row[f"{name}_wall_ms_2t"] = statistics.median(times[(n, k, m, name, "wall")]) * 1e3
            row[f"{name}_gmacs_1t"] = m * n * k / row[f"{name}_cpu_ms_1t"] / 1e6
        row["speedup_1t"] = row["old_cpu_ms_1t"] / row["new_cpu_ms_1t"]
        row["speedup_min_1t"] = row["old_min_cpu_ms_1t"] / row["new_min_cpu_ms_1t"]
        rows.append(row)
        print(
            json.dumps({key: round(v, 3) if isinstance(v, float) else v for key, v in row.items()})
        )
    model = model_split(args.old, args.model, args.model_repeats) if args.model else None
    if args.no_write:
        return 0
    meta = {
        "what": "tb_linear (quantize + GEMM + epilogue), CPU time per call, medians",
        "old": rev,
        "new": "working tree",
        "isa": new.isa,
        "repeats": args.repeats,
        "loadavg_1_5_15_at_end": load,
        "cpu": platform.processor() or platform.machine(),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cpu_gemm.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "model": model}, indent=2) + "\n"
    )
    lines = [
        "# Prefill GEMM of the CPU kernels: old vs new, CPU time",
        "",
        "`benchmarks/bench_cpu_gemm.py`: `tb_linear` (int8 quantization, GEMM, epilogue) of "
        f"the old kernels (`{rev}`) and the new, built side by side and timed in turn, median "
        f"(and min) of {args.repeats} rounds, ISA {new.isa}. **CPU time**, not wall time: the "
        f"machine was shared (load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
        "at the end). *1 thread*: "
        "`thread_time` of a call with 1 thread; *2 threads*: `process_time` of a call with 2 "
        "threads (both threads' CPU time: ≈ the 1-thread figure when the split is even and free; "
        "more is time spent waiting, spinning, for the other thread); *wall*: the same 2-thread "
        "calls' wall time, indicative only on a loaded machine.",
        "",
        "| N | K | M | old ms, 1 thr (min) | new ms, 1 thr (min) | speedup (min) | new GMAC/cpu-s "
        "| old / new ms, 2 thr, CPU | old / new ms, 2 thr, wall (loaded) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']} | {r['k']} | {r['m']} "
            f"| {r['old_cpu_ms_1t']:.2f} ({r['old_min_cpu_ms_1t']:.2f}) "
            f"| {r['new_cpu_ms_1t']:.2f} ({r['new_min_cpu_ms_1t']:.2f}) "
            f"| {r['speedup_1t']:.2f}x ({r['speedup_min_1t']:.2f}x) | {r['new_gmacs_1t']:.1f} "
            f"| {r['old_cpu_ms_2t']:.2f} / {r['new_cpu_ms_2t']:.2f} "
            f"| {r['old_wall_ms_2t']:.2f} / {r['new_wall_ms_2t']:.2f} |"
        )
    if model:
        lines += [
            "",
            f"## Whole prefill: `{args.model}` (model-O3), old tree vs new",
            "",
            "`benchmarks/cpu_prefill_split.py` in a fresh process a tree, old and new "
            "interleaved twice, the less disturbed round of each (more tokens per CPU-second), "
            f"median of {args.model_repeats} forwards. *thread CPU s*: each thread's CPU seconds "
            "per forward "
            "(2 threads: both about equal = an even split; their sum above the 1-thread figure "
            "= time spent waiting, spinning, for the other thread). Wall time is indicative "
            "only: the machine was shared.",
            "",
            "| tokens | threads | old tok / CPU-s | new tok / CPU-s | old thread CPU s "
            "| new thread CPU s | old / new tok / wall-s |",
            "|---|---|---|---|---|---|---|",
        ]
        for key_ in (k_ for k_ in model["new"] if k_ != "library"):
            o, nw = model["old"][key_], model["new"][key_]
            t_, th = key_.split("x")
            lines.append(
                f"| {t_} | {th} | {o['tok_per_cpu_s']:.1f} | {nw['tok_per_cpu_s']:.1f} "
                f"| {o['thread_cpu_s']} | {nw['thread_cpu_s']} "
                f"| {o['tok_per_wall_s']:.1f} / {nw['tok_per_wall_s']:.1f} |"
            )
    (RESULTS / "cpu_gemm.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
