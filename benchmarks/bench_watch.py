"""Latency of `tribuild watch`: from a file write to the outputs on disk.

Each case runs `tribuild watch --json --debounce 50` on a copy of the zoo's models with a
Tribuild.toml holding one target, waits for its first build, then edits a file and, as an
outside observer, polls the target's module every 0.5 ms until its bytes change
(*latency*: from just before the write to the new bytes being readable). A comment edit
changes no output: its latency is taken at the arrival of the watch's `rebuild` event on
stdout instead. The edit toggles between two texts, so every repeat is a real change;
repeats are spaced out so each is one rebuild. Also recorded, from the `rebuild` event: the
watch's own time (`ms`: from the start of the rebuild to the outputs written), its *phases*
(``late``, ``read sources``, ``build units``: the queries, ``collect outputs``,
``debounce``: waiting for the rest of it, ``write outputs``: durable, stale ones deleted,
the record saved; docs/build.md, Watch), the queries re-run, and the CPU time of the watch
process per rebuild (user + system, from /proc/PID/stat, the mean over the repeats: the
clock ticks are 10 ms). From these, each run's latency is split into consecutive parts
(``timeline``).

``--before DIR`` measures another tribuild too (DIR holds its ``tribuild`` package, e.g. a
``git worktree`` of an earlier commit; it goes first on PYTHONPATH): each case then runs
both, one watch process each on its own copy, their repeats alternating, so both see the
same load. Goal: latency <= debounce + 30 ms, the same for ResNet-18 and ResNet-152. Writes
benchmarks/results/watch.json and watch.md; the machine is shared, so the load average
before and after is recorded and figures are medians. Children run with bytecode caching
on, as installed.

    python benchmarks/bench_watch.py [--repeats N] [--before DIR]
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
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
POLL = 0.0005  # seconds between two reads of the module: a busy loop would take a core
SETTLE_MS = DEBOUNCE_MS / 2  # the watch starts a rebuild after half the debounce
PHASES = ("late", "read sources", "build units", "collect outputs", "debounce", "write outputs")
TIMELINE = ("event delivery", "settle", *PHASES[:-1], "write until visible")
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
        f'input = {json.dumps(table["input"])}\n'
    )
    return dest


class Watch:
    """`tribuild watch --json` as a process (with the package of ``package`` first on
    PYTHONPATH, if given); its events arrive in a queue with their time."""

    def __init__(self, root: Path, package: Path | None = None):
        env = CHILD_ENV | ({"PYTHONPATH": str(package)} if package else {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tribuild", "watch", "--json", "--debounce", str(DEBOUNCE_MS)],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
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

    def cpu_seconds(self) -> float:
        """User + system time of the process so far, every thread included."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


class Case:
    """One case on one tribuild: a project copy and its running watch."""

    def __init__(
        self,
        base: Path,
        target: str,
        edit: tuple[str, str],
        changes_output: bool,
        package: Path | None,
    ):
        self.root = project(base, target)
        self.target, self.edit, self.changes_output = target, edit, changes_output
        self.watch = Watch(self.root, package)
        self.watch.rebuild()
        self.runs: list[dict] = []
        self.cpu = self.watch.cpu_seconds()

    def once(self) -> None:
        """Apply the edit (forward on even runs, back on odd ones) and time it."""
        module = self.root / "out" / f"{self.target}.py"
        blocks = self.root / BLOCKS
        text = blocks.read_text()
        old, new = self.edit if len(self.runs) % 2 == 0 else self.edit[::-1]
        before = module.read_bytes()
        start = time.perf_counter()
        blocks.write_text(text.replace(old, new, 1))
        seen = None
        while self.changes_output and seen is None:
            if module.read_bytes() != before:
                seen = time.perf_counter()
            elif time.perf_counter() - start > 30:
                raise SystemExit(f"{self.target}: the module did not change")
            else:
                time.sleep(POLL)
        at, event = self.watch.rebuild(60)
        assert event["ok"], event
        self.runs.append(
            {
                "latency_ms": 1e3 * ((seen or at) - start),
                "event_ms": event["ms"],
                "reported_after_ms": 1e3 * (at - (seen or at)),
                "phases_ms": event.get("phases", {}),
                "reran": sum(event["executed"].values()),
                "written": len(event["written"]),
            }
        )

    def finish(self) -> dict:
        cpu = self.watch.cpu_seconds() - self.cpu
        self.watch.stop()
        return summarize(self.runs, cpu)


def measure(
    base: Path, name: str, packages: dict[str, Path | None], repeats: int
) -> dict[str, dict]:
    """Each variant of ``packages`` (label -> package folder) on case ``name``, their runs
    alternating; label -> summary."""
    target, edit, changes_output = CASES[name]
    cases = {}
    try:
        for label, package in packages.items():
            cases[label] = Case(base / label, target, edit, changes_output, package)
        for _ in range(repeats * 2):  # forward and back: 2 per repeat
            for case in cases.values():
                case.once()
                time.sleep(0.3)
        return {label: case.finish() for label, case in cases.items()}
    finally:
        for case in cases.values():
            if case.watch.proc.poll() is None:
                case.watch.stop()


def timeline(run: dict) -> dict[str, float] | None:
    """The latency of one run as consecutive parts, ms: the event's way to the watch (and
    the report's way back), the settle period, the phases up to the write, the part of
    ``write outputs`` until the module was visible (all of it for a comment edit, observed
    at the event). None for a tribuild that does not report these phases."""
    phases = run["phases_ms"]
    if not set(PHASES) <= set(phases):
        return None
    parts = {
        "settle": SETTLE_MS,
        **{p: phases[p] for p in PHASES[:-1]},
        "write until visible": phases["write outputs"] - run["reported_after_ms"],
    }
    return {"event delivery": run["latency_ms"] - sum(parts.values()), **parts}


def summarize(runs: list[dict], cpu_seconds: float) -> dict:
    latency = statistics.median(r["latency_ms"] for r in runs)
    phases = {
        p: round(statistics.median(r["phases_ms"].get(p, 0.0) for r in runs), 1)
        for p in PHASES
        if any(p in r["phases_ms"] for r in runs)
    }
    parts = [t for t in map(timeline, runs) if t is not None]
    return {
        "latency_ms": round(latency, 1),
        "timeline_ms": {k: round(statistics.median(t[k] for t in parts), 1) for k in parts[0]}
        if parts
        else {},
        "beyond_debounce_ms": round(latency - DEBOUNCE_MS, 1),
        "watch_ms": round(statistics.median(r["event_ms"] for r in runs), 1),
        "phases_ms": phases,
        "cpu_ms_per_rebuild": round(1e3 * cpu_seconds / len(runs), 1),
        "reran": statistics.median(r["reran"] for r in runs),
        "written": statistics.median(r["written"] for r in runs),
        "runs_ms": [round(r["latency_ms"], 1) for r in runs],
    }


def report(results: dict, before: dict, load: tuple) -> str:
    lines = [
        "# tribuild watch: latency from a file write to the outputs on disk",
        "",
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, debounce {DEBOUNCE_MS} ms, "
        f"load average before {load[0]:.2f}, after {load[1]:.2f}. Medians of the repeats "
        "(each edit applied and reverted). Body edits: observed by polling the module's "
        "bytes; comment edits change no output: observed at the `rebuild` event.",
        "",
        "| case | latency | beyond debounce | watch's own time | CPU per rebuild | queries re-run "
        "| outputs written | runs |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['latency_ms']} ms | {r['beyond_debounce_ms']} ms | "
            f"{r['watch_ms']} ms | {r['cpu_ms_per_rebuild']} ms | {r['reran']:g} | "
            f"{r['written']:g} | {', '.join(f'{x:.0f}' for x in r['runs_ms'])} |"
        )
    lines += [
        "",
        "Where the latency goes, part by part (ms, medians of each part, so they need "
        "not add up to the median latency). *event delivery*: the rest: from the write "
        "to the watch's last event (the write itself included) and the report's way "
        "back to the observer; *settle*: the half of the "
        "debounce before a rebuild starts; *late*: how much later it started; *debounce*: "
        "waiting for the rest of the debounce once computed; *write until visible*: "
        "until the module's new bytes could be read (for a comment edit, the whole "
        "write phase):",
        "",
        "| case | latency | " + " | ".join(TIMELINE) + " |",
        "|---|---:|" + "---:|" * len(TIMELINE),
    ]
    for name, r in results.items():
        if r["timeline_ms"]:
            lines.append(
                f"| {name} | {r['latency_ms']} | "
                + " | ".join(f"{r['timeline_ms'][k]:.1f}" for k in TIMELINE)
                + " |"
            )
    if before:
        lines += [
            "",
            "Before and after, measured in alternation in this run (`--before`):",
            "",
            "| case | latency before | after | watch's own time before | after | CPU per rebuild "
            "before | after |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, r in results.items():
            b = before[name]
            lines.append(
                f"| {name} | {b['latency_ms']} ms | {r['latency_ms']} ms | "
                f"{b['watch_ms']} ms | {r['watch_ms']} ms | "
                f"{b['cpu_ms_per_rebuild']} ms | {r['cpu_ms_per_rebuild']} ms |"
            )
    lines += ["", "| goal | met |", "|---|---|"]
    for name, r in results.items():
        met = "yes" if r["beyond_debounce_ms"] <= GOAL_MS else "no"
        lines.append(f"| {name} <= debounce + {GOAL_MS} ms | {met} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--tribuild",
        type=Path,
        metavar="DIR",
        help="the folder holding the tribuild package measured (default: the installed one)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="also measure the tribuild package in DIR, in alternation",
    )
    args = parser.parse_args()
    packages = {"after": args.tribuild} | ({"before": args.before} if args.before else {})
    load_before = os.getloadavg()[0]
    results, before = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            got = measure(Path(tmp), name, packages, args.repeats)
            results[name] = got["after"]
            if "before" in got:
                before[name] = got["before"]
            print(name, got, file=sys.stderr)
    load = (load_before, os.getloadavg()[0])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "watch.json").write_text(
        json.dumps(
            {
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "debounce_ms": DEBOUNCE_MS,
                "load_before": load[0],
                "load_after": load[1],
                "goal_beyond_debounce_ms": GOAL_MS,
                "cases": results,
            }
            | ({"before": before} if before else {}),
            indent=1,
        )
        + "\n"
    )
    (RESULTS / "watch.md").write_text(report(results, before, load))


if __name__ == "__main__":
    main()
