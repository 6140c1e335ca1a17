"""The performance report: every table of the seed's claims, measured on tribuild, in one run.

    .venv/bin/python benchmarks/run.py            # full run (~10 min): results/report.json,
                                                  # REPORT.md, plots/*.png
    .venv/bin/python benchmarks/run.py --quick    # smoke run (~30 s) into a temporary folder

Sections (``--sections``, default all): ``cold`` (every model at every -O level, in-process,
stages, traced memory), ``incremental`` (cache scenarios in-process), ``process`` (fresh
`tribuild build` processes: cold with peak RSS, the cache scenarios of ResNet-18, --jobs),
``scaling`` (generated projects up to ~50k lines; one generated file up to 385 layers),
``runtime`` (generated modules vs hand-written PyTorch, needs torch). benchmarks/report's
module docstrings define what each measures. ``--quick`` runs every section on two or three
small models with one repeat, and writes into a temporary folder unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks import bench_build  # noqa: E402
from benchmarks.report import cold, edits, processes, results, runtime, scaling, tables  # noqa: E402
from benchmarks.report.zoo import make_zoo  # noqa: E402

SECTIONS = ("cold", "incremental", "process", "scaling", "runtime")
FULL = {
    "levels": cold.LEVELS,
    "files": (1, 5, 25, 125),
    "blocks": (8, 16, 32, 64, 128),
    "process_scenarios": ("resnet18",),
    "runtime": (7, 10),
    "jobs_synthetic": 50,
}
QUICK = {
    "models": ["mnist_mlp", "resnet18"],
    "levels": ("0", "2"),
    "files": (1, 2),
    "blocks": (4, 8),
    "process_scenarios": ("mnist_mlp",),
    "runtime": (1, 1),
    "jobs_synthetic": 2,
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smoke run: small models, one repeat")
    p.add_argument("--repeats", type=int, default=5, help="repeats of each timed run (default 5)")
    p.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument(
        "--out",
        type=Path,
        help="folder for report.json, REPORT.md and plots/ "
        "(default: benchmarks/results, benchmarks/ and benchmarks/plots)",
    )
    p.add_argument("--no-plots", action="store_true")
    return p.parse_args(argv)


def jobs_cases(zoo, scratch: Path, plan: dict, quick: bool) -> dict:
    root = scratch / "jobs-synthetic"
    lines = bench_build.write_synthetic(root, plan["jobs_synthetic"])
    cases = {f"synthetic, {plan['jobs_synthetic']} files ({lines} lines)": (str(root), ())}
    if not quick:
        cases = {
            "resnet18 (one target)": (zoo.root, ("resnet18",)),
            "resnet152 (one target)": (zoo.root, ("resnet152",)),
            f"zoo ({len(zoo.targets)} targets)": (zoo.root, ()),
        } | cases
    return cases


def measure(args: argparse.Namespace, scratch: Path) -> dict:
    plan = QUICK if args.quick else FULL
    repeats = 1 if args.quick else args.repeats
    zoo = make_zoo(scratch / "zoo")
    names = plan.get("models") or [t.name for t in zoo.targets]
    report: dict = {"meta": results.meta(), "quick": args.quick, "repeats": repeats}

    def section(name: str, fn) -> None:
        """Run one section; a failure is recorded in ``errors`` and the others still run."""
        if name in args.sections:
            print(f"[{name}] ...", file=sys.stderr, flush=True)
            try:
                report[name] = fn()
            except Exception:  # noqa: BLE001 - a long run keeps what the other sections measured
                report.setdefault("errors", {})[name] = traceback.format_exc()
                print(report["errors"][name], file=sys.stderr)

    section("cold", lambda: cold.measure(zoo, names, repeats, str(scratch), plan["levels"]))
    section("incremental", lambda: edits.measure(zoo, names, repeats, str(scratch)))
    process_zoo = make_zoo(scratch / "process-zoo")
    section(
        "process",
        lambda: {
            "cold": processes.cold(process_zoo, names, repeats),
            "scenarios": {
                n: processes.scenarios(process_zoo, n, repeats) for n in plan["process_scenarios"]
            },
            "jobs": processes.jobs(
                jobs_cases(process_zoo, scratch, plan, args.quick), max(1, repeats - 2)
            ),
        },
    )
    section(
        "scaling",
        lambda: {
            "files": scaling.measure("files", plan["files"], max(1, repeats - 2), str(scratch)),
            "layers": scaling.measure("layers", plan["blocks"], repeats, str(scratch)),
        },
    )
    if "runtime" in args.sections:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("[runtime] skipped: torch is not installed", file=sys.stderr)
        else:
            section("runtime", lambda: runtime.measure(args.quick, *plan["runtime"]))
    report["meta"]["load_average_end"] = os.getloadavg()
    report["figures"] = results.figures(report)
    report["goals"] = results.goals(report)
    return report


def paths(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """Where the JSON, the markdown and the plots go."""
    out = args.out or (Path(tempfile.mkdtemp(prefix="tribuild-bench-")) if args.quick else None)
    if out is None:
        return HERE / "results" / "report.json", HERE / "REPORT.md", HERE / "plots"
    return out / "report.json", out / "REPORT.md", out / "plots"


def write(report: dict, args: argparse.Namespace, command: str) -> Path:
    json_path, md_path, plot_dir = paths(args)
    report["plots"] = []
    if not args.no_plots:
        try:
            from benchmarks.report import plots

            report["plots"] = plots.draw(report, plot_dir)
        except ImportError:
            print("plots skipped: matplotlib is not installed", file=sys.stderr)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    md_path.write_text(tables.markdown(report, command))
    return md_path


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    command = "python benchmarks/run.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="tribuild-bench-scratch-") as scratch:
        report = measure(args, Path(scratch))
    md = write(report, args, command.strip())
    print(md.read_text())
    print(f"written: {md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
