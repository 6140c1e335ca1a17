"""Latency of `tribuild watch`: from a file write to the outputs on disk.

Each case runs `tribuild watch --json --debounce 50` on a copy of the zoo's models with a
Tribuild.toml holding one target, waits for its first build, then edits a file and, as an
outside observer, polls the target's module until its bytes change (*latency*: from just
before the write to the new bytes being readable). A comment edit changes no output: its
latency is taken at the arrival of the watch's `rebuild` event on stdout instead. The edit
toggles between two texts, so every repeat is a real change; repeats are spaced out so
each is one rebuild. Also recorded: the watch's own time for the rebuild (`ms` of the
event: from the end of the debounce to the outputs written) and the queries re-run.

Goal: latency <= debounce + 30 ms, the same for ResNet-18 and ResNet-152. Writes
benchmarks/results/watch.json and watch.md; the machine is shared, so the load average
before and after is recorded and figures are medians.

    python benchmarks/bench_watch.py [--repeats N]
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BLOCKS = "models/blocks/resnet_blocks.tri"
DEBOUNCE_MS = 50
GOAL_MS = 30
CASES = {
    # name: (target, (old, new) in BLOCKS, the module changes)
    "resnet18 body edit": ("resnet18", ("let y = relu(bn1", "let y = relu6(bn1"), True),
    "resnet152 body edit": ("resnet152", ("y = relu(bn2(conv2", "y = relu6(bn2(conv2"), True),
    "resnet18 comment edit": ("resnet18", ("# One stage:", "#  One stage:"), False),
    "resnet152 comment edit": ("resnet152", ("# One stage:", "#  One stage:"), False),
}


def project(base: Path, target: str) -> Path:
    """A copy of the zoo's models with a Tribuild.toml holding ``target`` alone."""
    dest = base / target
    if dest.exists():
        return dest
    shutil.copytree(REPO / "models", dest / "models")
    table = tomllib.loads((REPO / "Tribuild.toml").read_text())["targets"][target]
    args = ", ".join(f"{k} = {json.dumps(v)}" for k, v in table["args"].items())
    (dest / "Tribuild.toml").write_text(
        f'[project]\nname = "bench"\nsources = ["models"]\nout = "out"\n\n'
        f'[targets.{target}]\nentry = "{table["entry"]}"\nargs = {{ {args} }}\n'
        f'input = {json.dumps(table["input"])}\n')
    return dest


class Watch:
    """`tribuild watch --json` as a process; its events arrive in a queue with their time."""

    def __init__(self, root: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tribuild", "watch", "--json", "--debounce", str(DEBOUNCE_MS)],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.events: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.events.put((time.perf_counter(), json.loads(line)))

    def rebuild(self, timeout: float = 600.0) -> tuple[float, dict]:
        while True:
            at, event = self.events.get(timeout=timeout)
            if event["event"] == "rebuild":
                return at, event

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def measure(root: Path, target: str, edit: tuple[str, str], changes_output: bool,
            repeats: int) -> list[dict]:
    watch = Watch(root)
    try:
        watch.rebuild()
        module = root / "out" / f"{target}.py"
        blocks = root / BLOCKS
        runs = []
        for i in range(repeats * 2):                       # forward and back: 2 per repeat
            text = blocks.read_text()
            old, new = edit if i % 2 == 0 else edit[::-1]
            before = module.read_bytes()
            start = time.perf_counter()
            blocks.write_text(text.replace(old, new, 1))
            seen = None
            while changes_output and seen is None:
                if module.read_bytes() != before:
                    seen = time.perf_counter()
                elif time.perf_counter() - start > 30:
                    raise SystemExit(f"{target}: the module did not change")
            at, event = watch.rebuild(60)
            assert event["ok"], event
            runs.append({"latency_ms": 1e3 * ((seen or at) - start), "event_ms": event["ms"],
                         "reran": sum(event["executed"].values()), "written": len(event["written"])})
            time.sleep(0.3)
        return runs
    finally:
        watch.stop()


def summarize(runs: list[dict]) -> dict:
    latency = statistics.median(r["latency_ms"] for r in runs)
    return {"latency_ms": round(latency, 1),
            "beyond_debounce_ms": round(latency - DEBOUNCE_MS, 1),
            "watch_ms": round(statistics.median(r["event_ms"] for r in runs), 1),
            "reran": statistics.median(r["reran"] for r in runs),
            "written": statistics.median(r["written"] for r in runs),
            "runs_ms": [round(r["latency_ms"], 1) for r in runs]}


def report(results: dict, load: tuple) -> str:
    lines = ["# tribuild watch: latency from a file write to the outputs on disk", "",
             f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, debounce {DEBOUNCE_MS} ms, "
             f"load average before {load[0]:.2f}, after {load[1]:.2f}. Medians of the repeats "
             "(each edit applied and reverted). Body edits: observed by polling the module's "
             "bytes; comment edits change no output: observed at the `rebuild` event.", "",
             "| case | latency | beyond debounce | watch's own time | queries re-run | outputs written | runs |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['latency_ms']} ms | {r['beyond_debounce_ms']} ms | "
                     f"{r['watch_ms']} ms | {r['reran']:g} | {r['written']:g} | "
                     f"{', '.join(f'{x:.0f}' for x in r['runs_ms'])} |")
    lines += ["", "| goal | met |", "|---|---|"]
    for name, r in results.items():
        met = "yes" if r["beyond_debounce_ms"] <= GOAL_MS else "no"
        lines.append(f"| {name} <= debounce + {GOAL_MS} ms | {met} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (target, edit, changes_output) in CASES.items():
            root = project(Path(tmp), target)
            results[name] = summarize(measure(root, target, edit, changes_output, args.repeats))
            print(name, results[name], file=sys.stderr)
    load = (load_before, os.getloadavg()[0])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "watch.json").write_text(json.dumps(
        {"cpus": os.cpu_count(), "python": sys.version.split()[0], "debounce_ms": DEBOUNCE_MS,
         "load_before": load[0], "load_after": load[1], "goal_beyond_debounce_ms": GOAL_MS,
         "cases": results}, indent=1) + "\n")
    (RESULTS / "watch.md").write_text(report(results, load))


if __name__ == "__main__":
    main()
