"""What the build's CPU kernels step (``tribuild/driver/cpu_kernels.py``) costs a build whose
library is already in the kernel cache, side by side in one run, medians of repeats.

Cases:
- step, stamp holds: ``begin`` + ``end`` in this process, the project's stamp matching (what a
  rebuild after an edit does: a few ``stat``s, no compiler run);
- step, no stamp: the same with the stamp deleted before each repeat (what a clean build
  does: the compiler's ``--version``, the library's key, the file's existence);
- zoo body edit, step off / on: whole ``tribuild build -q`` processes after one edit of
  models/blocks/resnet_blocks.tri (bench_build's), ``TRIBUILD_CPU_KERNELS=off`` and on
  alternating; bench_build judges this path's 150 ms goal on a quiet machine. The no-op
  path does not run the step at all.

Writes benchmarks/results/cpu_kernels_step.json and .md. The machine is shared: the load
average before and after is recorded.

    python benchmarks/bench_cpu_kernels_step.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from bench_build import BLOCKS, EDITS  # noqa: E402  (the same edit as bench_build's)

from tribuild.driver import cpu_kernels  # noqa: E402
from tribuild.driver.progress import Quiet  # noqa: E402
from tribuild.driver.results import BuildResult, TargetResult  # noqa: E402


def step_seconds(cache: Path, result: BuildResult, keep_stamp: bool) -> float:
    if not keep_stamp:
        (cache / cpu_kernels.STAMP).unlink(missing_ok=True)
    begin = time.perf_counter()
    step = cpu_kernels.KernelStep(str(cache), None, Quiet())
    step.begin(result)
    outcome = step.end()
    took = time.perf_counter() - begin
    assert outcome is not None and outcome.state == "ready", outcome
    return took


def build_seconds(project: Path, env: dict[str, str], forward: bool) -> float:
    path = project / BLOCKS
    text = path.read_text()
    old, new = EDITS["body"] if forward else EDITS["body"][::-1]
    path.write_text(text.replace(old, new, 1))
    begin = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tribuild", "build", "-q"], cwd=project, env=env, check=True
    )
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {
        "step, stamp holds": [],
        "step, no stamp": [],
        "zoo body edit, step off": [],
        "zoo body edit, step on": [],
    }
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "zoo"
        shutil.copytree(REPO / "models", project / "models")
        shutil.copy(REPO / "Tribuild.toml", project / "Tribuild.toml")
        subprocess.run(  # the library ready, the store and the stamp written
            [sys.executable, "-m", "tribuild", "build", "-q"], cwd=project, env=env, check=True
        )
        result = BuildResult([TargetResult("t", ("kernels/k.py", "t.py"))], str(project))
        cache = project / ".tribuild-cache"
        for _ in range(args.repeats):
            times["step, no stamp"].append(step_seconds(cache, result, keep_stamp=False))
            times["step, stamp holds"].append(step_seconds(cache, result, keep_stamp=True))
        forward = True
        for _ in range(args.repeats):
            for case, switch in (("off", "off"), ("on", "on")):
                run_env = {**env, cpu_kernels.SWITCH_VARIABLE: switch}
                seconds = build_seconds(project, run_env, forward)
                times[f"zoo body edit, step {case}"].append(seconds)
                forward = not forward
    medians = {name: statistics.median(values) for name, values in times.items()}
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
            "python": sys.version.split()[0],
        },
        "seconds": times,
        "median_seconds": medians,
        "body_edit_step_cost_seconds": statistics.median(
            on - off
            for off, on in zip(
                times["zoo body edit, step off"], times["zoo body edit, step on"], strict=True
            )
        ),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cpu_kernels_step.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / "cpu_kernels_step.md").write_text(markdown(report))
    print(markdown(report))


def markdown(report: dict) -> str:
    machine = report["machine"]
    before = ", ".join(f"{x:.2f}" for x in machine["load_before"])
    after = ", ".join(f"{x:.2f}" for x in machine["load_after"])
    lines = [
        "# The build's CPU kernels step, the library already there",
        "",
        f"{machine['cpus']} CPUs, Python {machine['python']}, load average before {before}, "
        f"after {after}. Medians of the repeats, measured side by side in one run "
        "(`benchmarks/bench_cpu_kernels_step.py`).",
        "",
        "| case | median | runs (ms) |",
        "|---|---:|---|",
    ]
    for name, values in report["seconds"].items():
        runs = ", ".join(f"{v * 1000:.1f}" for v in values)
        lines.append(f"| {name} | {report['median_seconds'][name] * 1000:.1f} ms | {runs} |")
    cost = report["body_edit_step_cost_seconds"] * 1000
    lines += [
        "",
        f"Zoo body edit, step on minus step off: {cost:.1f} ms (the median of the rounds' "
        "differences; each round runs the two back to back).",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
