"""examples/bitnet/train.py measured: what ternary costs in loss, what DDP costs in speed, and
whether a killed run resumes exactly (benchmarks/results/train_lm.md and .json).

Parts, each in fresh processes running the example as a user would (the Tribuild.toml target
``bitnet_lm_train``, the standard library's source):
- *quality*: the ternary model (QAT from ``Model()``) and its float twin, trained with the same
  settings, one after the other, one process of ``--threads`` threads each: held-out bits per
  byte beside the unigram baseline, the sizes of the packed and the float checkpoints, and a
  sampled continuation of ``def ``.
- *ddp*: ``--ddp-steps`` steps as one process with 2 threads, then as ``torchrun
  --nproc-per-node 2`` with 1 thread each, alternated ``--repeats`` times: tokens/s (the
  example's own, over its training loop). Then the losses of DDP against one process of 1
  thread on the same global batches, taken two ways: in 2 accumulated micro-batches
  (``--accumulate 2``: the ranks' rows in rank order, their gradients summed as the
  all-reduce sums them, the goal's comparison), and in one forward (the batch's gradient
  summed in another order: one batched matmul over all windows, not two halves added).
- *resume*: the one-process run of *ddp* again, killed with SIGKILL once its first state is
  on disk, then started again: its losses against the uninterrupted run's.
Each part records the load average (1 minute) before and after: on a shared machine the
throughput ratio means little when the load exceeds the cores.

Usage: ``python benchmarks/bench_train_lm.py [--steps 1200] [--ddp-steps 40] [--out DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "bitnet" / "train.py"
RESULTS = ROOT / "benchmarks" / "results"


def load() -> float:
    return round(os.getloadavg()[0], 2)


def env(threads: int) -> dict:
    out = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(threads)}
    out.pop("TRITON_INTERPRET", None)
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def train(out: Path, args: list[str], threads: int, world: int = 1) -> dict:
    """Run the example to the end; its result.json."""
    launcher = [sys.executable]
    if world > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}"]
    command = [*launcher, str(SCRIPT), "--out", str(out), "--threads", str(threads), "--quiet"]
    subprocess.run([*command, *args], env=env(threads), check=True, timeout=3600)
    return json.loads((out / "result.json").read_text())


def quality(work: Path, common: list[str], threads: int, parallel: bool) -> dict:
    """Both runs, one after the other, or with ``parallel`` side by side (a shared machine's
    wait for a CPU overlaps; each run then has ``threads`` threads of its own)."""
    modes = (("ternary", []), ("float", ["--float"]))
    runs: dict = {}
    if not parallel:
        for mode, extra in modes:
            before = load()
            runs[mode] = train(work / mode, [*common, *extra], threads)
            runs[mode]["load_before"], runs[mode]["load_after"] = before, load()
        return runs
    before = load()
    processes = {}
    for mode, extra in modes:
        command = [sys.executable, str(SCRIPT), "--out", str(work / mode), "--quiet"]
        command += ["--threads", str(threads), *common, *extra]
        processes[mode] = subprocess.Popen(command, env=env(threads))
    for mode, process in processes.items():
        if process.wait(timeout=3600) != 0:
            raise RuntimeError(f"the {mode} run failed (exit {process.returncode})")
        runs[mode] = json.loads((work / mode / "result.json").read_text())
        runs[mode]["load_before"], runs[mode]["load_after"] = before, load()
    return runs


def ddp(work: Path, common: list[str], repeats: int) -> dict:
    single, double = [], []
    for i in range(repeats):
        single.append(train(work / f"single{i}", common, threads=2))
        single[-1]["load_after"] = load()
        double.append(train(work / f"ddp{i}", common, threads=1, world=2))
        double[-1]["load_after"] = load()
    ranks = double[0]["losses"]

    def largest(losses: list[float]) -> float:
        return max(abs(a - b) for a, b in zip(losses, ranks, strict=True))

    # one thread, as a rank has (2 threads sum in another order, and the int8 activations'
    # rounding ties let such differences grow over the steps); the global batch in the
    # ranks' 2 micro-batches, their gradients accumulated: DDP's arithmetic in one process
    accumulated = train(work / "accumulated", [*common, "--accumulate", "2"], threads=1)
    # the global batch in one forward: the same data, its gradient summed in another order
    one_forward = train(work / "single1thread", common, threads=1)
    one = statistics.median(r["tokens_per_s"] for r in single)
    two = statistics.median(r["tokens_per_s"] for r in double)
    return {
        "single_tokens_per_s": [r["tokens_per_s"] for r in single],
        "ddp_tokens_per_s": [r["tokens_per_s"] for r in double],
        "ratio": round(two / one, 3),
        "max_loss_difference": largest(single[0]["losses"]),
        "max_loss_difference_accumulated": largest(accumulated["losses"]),
        "losses_equal_accumulated": accumulated["losses"] == ranks,
        "max_loss_difference_one_thread": largest(one_forward["losses"]),
        "first_losses": {"single": single[0]["losses"][:5], "ddp": double[0]["losses"][:5]},
        "loads": [r["load_after"] for r in single + double],
        "reference_losses": single[0]["losses"],
    }


def resume(work: Path, common: list[str], reference: list[float], every: int) -> dict:
    out = work / "killed"
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(SCRIPT), "--out", str(out), "--threads", "2", "--quiet"]
    extra = [*common, "--checkpoint-every", str(every)]
    process = subprocess.Popen([*command, *extra], env=env(2))
    state = out / "state.pt"
    while not state.exists() and process.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)  # into the steps after the checkpoint
    killed_at = time.monotonic()
    process.send_signal(signal.SIGKILL)
    process.wait()
    import torch

    saved = torch.load(state, weights_only=False)["step"]
    result = train(out, extra, threads=2)
    return {
        "killed_after_state_of_step": saved,
        "killed_at_s": round(killed_at, 1),
        "resumed_from": result["resumed_from"],
        "losses_equal": result["losses"] == reference,
        "steps": len(result["losses"]),
    }


def speed_verdict(d: dict) -> str:
    """The DDP speed goal's cell: no verdict when the machine was oversubscribed, where a
    2-thread process waits for both of its threads at every parallel region and the ratio
    measures the scheduler, not DDP."""
    cpus = os.cpu_count() or 1
    if not d["loads"] or max(d["loads"]) > cpus:
        return f"not measurable: load average {d['loads']} on {cpus} CPUs (goal ≥ 0.85)"
    return f"{'yes' if d['ratio'] >= 0.85 else 'no'} (≥ 0.85; loads {d['loads']})"


def table(figures: dict) -> str:
    missing = {"steps": 0, "note": "not measured"}
    q = figures["quality"]
    d = figures.get("ddp", {"ddp_tokens_per_s": [], "single_tokens_per_s": [], "ratio": 0,
                            "loads": [], "max_loss_difference": float("nan")})  # fmt: skip
    r = figures.get("resume", {"killed_after_state_of_step": None, "resumed_from": None,
                               "losses_equal": None, **missing})  # fmt: skip
    t, f = q["ternary"], q["float"]
    acc = d.get("max_loss_difference_accumulated")
    acc_diff = (
        "not measured"
        if acc is None
        else f"largest difference {acc:.2e}; bit-identical: {d['losses_equal_accumulated']}"
    )
    acc_met = "not measured" if acc is None else ("yes" if acc == 0 else "no")
    one = d.get("max_loss_difference_one_thread")
    one_thread_diff = "not measured" if one is None else f"{one:.2e}"
    uni = t["unigram_bits_per_byte"]
    tb, fb = t["held_out_bits_per_byte"], f["held_out_bits_per_byte"]
    ratio = t["checkpoint_bytes"] / f["checkpoint_bytes"]
    rows = [
        "# Training a BitNet LM on the stdlib's source (examples/bitnet/train.py)",
        "",
        f"Measured {figures['date']} on {figures['machine']} with `{figures['command']}`.",
        f"Settings of this run: {figures['settings']}.",
        f"Settings of the quality runs: {q.get('settings', figures['settings'])}.",
        "Each part measured at: "
        + ", ".join(
            f"{k} {figures[k].get('measured', '?')}"
            for k in ("quality", "ddp", "resume")
            if k in figures
        )
        + ".",
        "",
        "| goal | measured | goal met |",
        "| --- | --- | --- |",
        f"| held-out bits/byte, ternary vs float twin at {t['steps']} steps | ternary {tb:.3f}, "
        f"float {fb:.3f} (ternary/float {tb / fb:.3f}) | {'yes' if tb <= 1.15 * fb else 'no'} "
        "(≤ 1.15) |",
        f"| both far below the unigram baseline ({uni:.3f} bits/byte) | ternary "
        f"{tb / uni:.2f}x, float {fb / uni:.2f}x of unigram | "
        f"{'yes' if max(tb, fb) <= 0.75 * uni else 'no'} (≤ 0.75x) |",
        f"| frozen packed checkpoint vs float checkpoint | {t['checkpoint_bytes']:,} B vs "
        f"{f['checkpoint_bytes']:,} B ({ratio:.3f}) | {'yes' if ratio <= 0.1 else 'no'} (≤ 0.1) |",
        f"| 2-process DDP (1 thread each) vs 1 process (2 threads), tokens/s | "
        f"{d['ddp_tokens_per_s']} vs {d['single_tokens_per_s']} (median ratio {d['ratio']}) | "
        f"{speed_verdict(d)} |",
        "| DDP losses vs one process (1 thread) taking the global batch in 2 accumulated "
        f"micro-batches (`--accumulate 2`: the ranks' rows, DDP's sums) | {acc_diff} | "
        f"{acc_met} (bit-identical) |",
        "| DDP losses vs one process (1 thread) taking the global batch in one forward | "
        f"largest difference {one_thread_diff} | — (the batch's gradient summed in another "
        "order: one matmul over all windows, not two halves added by the all-reduce; the int8 "
        "and ternary rounding ties let that grow over the steps; not the goal's comparison) |",
        f"| DDP losses vs the 2-thread process above | largest difference "
        f"{d['max_loss_difference']:.2e} | {'yes' if d['max_loss_difference'] < 1e-3 else 'no'} "
        "(another summation order; not the goal's comparison) |",
        f"| kill -9 after the state of step {r['killed_after_state_of_step']}, resume | resumed "
        f"from step {r['resumed_from']}; all {r['steps']} losses bit-identical to the "
        f"uninterrupted run: {r['losses_equal']} | {'yes' if r['losses_equal'] else 'no'} |",
        "",
        f"Throughput in the quality runs: ternary {t['tokens_per_s']} tokens/s, float "
        f"{f['tokens_per_s']} tokens/s ({t['threads']} threads; load average "
        f"{t['load_before']} → {t['load_after']} and {f['load_before']} → {f['load_after']}).",
        f"Held-out bits/byte of the packed checkpoint read back (bfloat16 floats): "
        f"{t['packed_held_out_bits_per_byte']:.3f}.",
        "",
        "Sampled continuations of `def ` (temperature 0.7, top-k 20):",
        "",
        "ternary (packed checkpoint, read back):",
        "```python",
        "def " + t["sample"],
        "```",
        "float twin:",
        "```python",
        "def " + f["sample"],
        "```",
    ]
    if figures.get("notes"):
        rows += ["", "Notes:", "", *[f"- {note}" for note in figures["notes"]]]
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--eval-windows", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ddp-steps", type=int, default=40)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--parallel", action="store_true", help="the quality runs side by side")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--work", type=Path, help="where the runs write (default: a temp folder)")
    p.add_argument("--note", action="append", default=[], help="a line for the table's notes")
    p.add_argument(
        "--parts",
        default="quality,ddp,resume",
        help="which parts to run; the others are kept from --out's train_lm.json (the quality "
        "runs count steps, not seconds, so they may run on a busy machine; ddp may not)",
    )
    args = p.parse_args(argv)
    parts = set(args.parts.split(","))
    if unknown := parts - {"quality", "ddp", "resume"}:
        p.error(f"--parts: unknown {sorted(unknown)}; choose from quality, ddp, resume")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_train_lm-"))
    common = ["--steps", str(args.steps), "--batch", str(args.batch)]
    common += ["--eval-windows", str(args.eval_windows)]
    short = ["--steps", str(args.ddp_steps), "--batch", str(args.batch)]
    figures: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} CPUs, shared",
        "command": "python benchmarks/bench_train_lm.py " + " ".join(argv or sys.argv[1:]),
        "settings": f"{args.steps} steps of {args.batch} windows of 256 bytes for quality "
        f"({'side by side' if args.parallel else 'one after the other'}, {args.threads} "
        f"thread(s) each), {args.ddp_steps} steps for ddp and resume",
        "load_start": load(),
        "notes": args.note,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    earlier_path = args.out / "train_lm.json"
    earlier = json.loads(earlier_path.read_text()) if earlier_path.exists() else {}
    for part in {"quality", "ddp", "resume"} - parts:
        if part in earlier:  # a part not rerun keeps its figures, and says when they were taken
            figures[part] = {
                **earlier[part],
                "measured": earlier[part].get("measured", earlier["date"]),
                "settings": earlier[part].get("settings", earlier["settings"]),
            }
    if "quality" not in figures and "quality" not in parts:
        p.error(f"--parts without quality needs an earlier run's {earlier_path}")

    def write() -> None:  # after each part: a late part cut short leaves the earlier ones
        figures["load_end"] = load()
        (args.out / "train_lm.json").write_text(json.dumps(figures, indent=2) + "\n")
        (args.out / "train_lm.md").write_text(table(figures))

    if "quality" in parts:
        figures["quality"] = quality(work / "quality", common, args.threads, args.parallel)
        figures["quality"]["measured"] = figures["date"]
        figures["quality"]["settings"] = figures["settings"]
        write()
    short += ["--skip-final"]
    if "ddp" in parts:
        figures["ddp"] = ddp(work / "ddp", short, args.repeats)
        figures["ddp"]["measured"] = figures["date"]
        write()
    if "resume" in parts:
        if "ddp" not in figures:
            p.error("--parts resume compares against the ddp part's losses: run ddp too")
        every = max(1, args.ddp_steps // 3)
        reference = figures["ddp"]["reference_losses"]
        figures["resume"] = resume(work / "resume", short, reference, every)
        figures["resume"]["measured"] = figures["date"]
        write()
    print(table(figures))
    return figures


if __name__ == "__main__":
    main()
