"""The report's JSON: the run's context, the flat figures compare.py reads, the goals.

Terms:
- *meta*: where and when the run was taken: machine, CPU count, Python, tribuild's commit
  (and whether the tree had local changes), package versions, the load average at the start
  and the end (on a shared machine, a load above the CPU count stretches wall times; CPU
  times are the steadier figures).
- *figures*: a flat map ``name -> value`` of every median, lower is better (seconds, bytes
  or a runtime ratio); names are dotted paths, e.g. ``cold.resnet18.O2.wall_s``.
- *goal row*: ``{goal, bound, unit, how, measured, met}``; ``measured`` is None (and ``met``
  None) when the run did not measure it (a ``--quick`` run measures few models).
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata

from benchmarks.report import runtime, seed
from benchmarks.report.zoo import REPO

PACKAGES = ("pytest-benchmark", "matplotlib", "torch", "networkx")


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def meta() -> dict:
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in open("/proc/cpuinfo")
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if os.path.exists("/proc/cpuinfo")
        else platform.processor()
    )
    return {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty_paths": len(_git("status", "--porcelain", "--", "tribuild").splitlines()),
        "versions": {p: _version(p) for p in PACKAGES},
        "load_average_start": os.getloadavg(),
    }


def _clock(prefix: str, s: dict, out: dict) -> None:
    out[f"{prefix}.wall_s"] = s["wall"]["median"]
    out[f"{prefix}.cpu_s"] = s["cpu"]["median"]
    if "rss_bytes" in s:
        out[f"{prefix}.rss_bytes"] = s["rss_bytes"]["median"]


def _slug(text: str) -> str:
    return text.replace(" ", "_")


def figures(report: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for model, row in report.get("cold", {}).items():
        for level, s in row["levels"].items():
            _clock(f"cold.{model}.O{level}", s, out)
        out[f"cold.{model}.traced_peak_bytes"] = row["traced_peak_bytes"]
    for model, per in report.get("incremental", {}).items():
        for scenario, s in per.items():
            _clock(f"incremental.{model}.{_slug(scenario)}", s, out)
    process = report.get("process", {})
    for model, s in process.get("cold", {}).items():
        _clock(f"process.cold.{_slug(model)}", s, out)
    for model, per in process.get("scenarios", {}).items():
        for scenario, s in per.items():
            _clock(f"process.{model}.{_slug(scenario)}", s, out)
    for case, row in process.get("jobs", {}).items():
        _clock(f"jobs.{_slug(case)}.j1", row["jobs1"], out)
        _clock(f"jobs.{_slug(case)}.j2", row["jobs2"], out)
    for kind, rows in report.get("scaling", {}).items():
        for row in rows:
            size = row["files"] if kind == "files" else row["layers"]
            _clock(f"scaling.{kind}.{size}", row["in_process"], out)
    for row in report.get("runtime", {}).get("models", []):
        for level, r in row["ratio"].items():
            out[f"runtime.{row['model']}.{level}.ratio"] = r
    return out


def _cold_s(report: dict, model: str) -> tuple | None:
    row = report.get("cold", {}).get(model)
    s = row and row["levels"].get("2")
    return (s["wall"]["median"], s["cpu"]["median"]) if s else None


def _worst(report: dict, scenario: str) -> tuple | None:
    runs = [per[scenario] for per in report.get("incremental", {}).values() if scenario in per]
    return tuple(max(s[c]["median"] for s in runs) * 1e3 for c in ("wall", "cpu")) if runs else None


def _per_line(report: dict) -> tuple | None:
    files = report.get("scaling", {}).get("files")
    row = files and files[-1]
    return (
        tuple(row["in_process"][c]["median"] * 1e3 / row["lines"] for c in ("wall", "cpu"))
        if row
        else None
    )


def measured_goals(report: dict) -> dict[str, tuple | None]:
    """Goal name -> the measured (wall, CPU) figures in the goal's unit (CPU None where the
    figure is not a time; None: not measured)."""
    rss = report.get("process", {}).get("cold", {}).get("resnet152")
    run = report.get("runtime")
    return {
        "cold ResNet-18, in-process": _cold_s(report, "resnet18"),
        "cold ResNet-152, in-process": _cold_s(report, "resnet152"),
        "time per source line": _per_line(report),
        "peak memory, ResNet-152": (rss["rss_bytes"]["median"] / 1e6, None) if rss else None,
        "no-change rebuild, every zoo model": _worst(report, "no change"),
        "one-body edit, every zoo model": _worst(report, "body edit"),
        "runtime overhead": (runtime.worst_overhead(run, "2"), None) if run else None,
    }


def goals(report: dict) -> list[dict]:
    """Goal rows; ``met`` is judged on the wall time (the figure a user sees), ``met_cpu`` on
    the CPU time (what the load of a shared machine does not stretch)."""
    rows = []
    for name, value in measured_goals(report).items():
        bound, unit, how = seed.GOALS[name]
        wall, cpu = value or (None, None)
        rows.append(
            {
                "goal": name,
                "bound": bound,
                "unit": unit,
                "how": how,
                "measured": wall,
                "measured_cpu": cpu,
                "met": None if wall is None else wall <= bound,
                "met_cpu": None if cpu is None else cpu <= bound,
            }
        )
    return rows
