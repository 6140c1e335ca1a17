"""REPORT.md: the report's tables, from its JSON.

Terms: a cell ``wall (CPU)`` shows the median wall time and, in parentheses, the median CPU
time of the same runs; *ratio* is seed / ours (> 1: ours is faster or smaller); a dash is a
figure the run did not measure or the seed does not claim.
"""

from __future__ import annotations

from benchmarks.report import seed
from benchmarks.report.edits import SCENARIOS
from benchmarks.report.zoo import STAGE_COLUMNS

METHOD = """\
## How this was produced

`{command}`, one process, every table from the same run ({started}, commit `{commit}`{dirty}).
{cpu}, {cpus} CPUs, Python {python}, {versions}. Load average {load0:.2f} at the start and
{load1:.2f} at the end: the machine is shared, so wall times carry the neighbours' load; each
cell gives the median wall time and the median CPU time of the same runs (CPU time of this
process in-process; user + system of the child and its workers for fresh processes). Runs
being compared take turns within each repeat (round-robin), so a drift of the machine's speed
touches them alike. Statistics (median, quartiles, outliers, in `results/report.json`) are
computed by pytest-benchmark's `Stats`; its fixture is not the runner, because it measures one
function to completion before the next (no interleaving), with one clock (not wall and CPU
side by side), and cannot time a fresh `tribuild build` process. `python benchmarks/compare.py
NEW.json BASELINE.json` fails when a figure regressed by more than 1.2x.
"""


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.3g} ms"


def cell(s: dict | None) -> str:
    return "-" if s is None else f"{fmt_s(s['wall']['median'])} ({fmt_s(s['cpu']['median'])})"


def fmt_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.3g}x"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        + ["| " + " | ".join(r) + " |" for r in rows]
        + [""]
    )


def _met(met: bool | None) -> str:
    return {True: "yes", False: "**NO**", None: "-"}[met]


def goals_table(goals: list[dict]) -> list[str]:
    rows = [
        [
            g["goal"],
            f"<= {g['bound']:g} {g['unit']}",
            g["how"],
            "not measured" if g["measured"] is None else f"{g['measured']:.3g} {g['unit']}",
            _met(g["met"]),
            "-" if g["measured_cpu"] is None else f"{g['measured_cpu']:.3g} {g['unit']}",
            _met(g["met_cpu"]),
        ]
        for g in goals
    ]
    return [
        "## Goals",
        "",
        "Judged on the median wall time (what a user waits) and, for times, on the median "
        "CPU time of the same runs (what the neighbours' load on this shared machine does not "
        "stretch).",
        "",
    ] + table(["goal", "bound", "judged on", "wall", "met", "CPU", "met (CPU)"], rows)


def cold_table(report: dict) -> list[str]:
    cold, procs = report.get("cold", {}), report.get("process", {}).get("cold", {})
    rows = []
    for name, row in cold.items():
        ours, proc = row["levels"].get("2"), procs.get(name)
        s = seed.COLD_SECONDS.get(name)
        rows.append(
            [
                name,
                str(seed.NOMINAL_DEPTH.get(name, "-")),
                str(row["instances"]),
                str(row["lines"]),
                fmt_s(s),
                cell(ours),
                fmt_ratio(seed.ratio(s, ours and ours["wall"]["median"])),
                cell(proc),
                fmt_ratio(seed.ratio(s, proc and proc["wall"]["median"])),
            ]
        )
    head = [
        "model",
        "depth",
        "instances",
        "lines",
        "seed",
        "ours in-process",
        "ratio",
        "ours, fresh process",
        "ratio",
    ]
    return (
        [
            "## Cold compile, -O2 (seed vs ours)",
            "",
            "In-process: `target_build` on a fresh database plus the write of its files. Fresh "
            "process: "
            "`tribuild build NAME -j 1`, no cache, no outputs (start-up, imports and the store's "
            "save "
            "included). *instances*: distinct layer instances (identical blocks share one).",
            "",
        ]
        + table(head, rows)
        + stages_table(cold)
    )


def stages_table(cold: dict) -> list[str]:
    rows = [
        [name] + [f"{row['levels']['2']['stages_ms'][c]:.2f}" for c in STAGE_COLUMNS]
        for name, row in cold.items()
        if "2" in row["levels"]
    ]
    return [
        "Stages of the in-process cold compile at -O2, median ms (own time of each stage's "
        "queries; *write* by the clock, including the `os.sync`; *engine + I/O* is the rest: "
        "reading sources, memo lookups, validation):",
        "",
    ] + table(["model"] + list(STAGE_COLUMNS), rows)


def memory_table(report: dict) -> list[str]:
    cold, procs = report.get("cold", {}), report.get("process", {}).get("cold", {})
    start = procs.get("start-up")
    rows = [
        [
            name,
            f"{row['traced_peak_bytes'] / 1e6:.1f} MB",
            "-" if name not in procs else f"{procs[name]['rss_bytes']['median'] / 1e6:.1f} MB",
            "-" if name not in seed.PEAK_MB else f"{seed.PEAK_MB[name]:g} MB",
            fmt_ratio(
                seed.ratio(
                    seed.PEAK_MB.get(name),
                    name in procs and procs[name]['rss_bytes']['median'] / 1e6,
                )
            ),
        ]
        for name, row in cold.items()
    ]
    note = (
        ""
        if start is None
        else (
            f" A process that only imports the compiler peaks at "
            f"{start['rss_bytes']['median'] / 1e6:.1f} MB in {cell(start)}."
        )
    )
    return [
        "## Peak memory",
        "",
        "Traced: tracemalloc's peak during one in-process cold compile (Python "
        "allocations only). RSS: the high-water mark (VmHWM) of the fresh `tribuild build -j 1` "
        "process." + note,
        "",
    ] + table(["model", "traced peak", "peak RSS, fresh process", "seed", "ratio (RSS)"], rows)


def levels_table(report: dict) -> list[str]:
    cold = report.get("cold", {})
    levels = list(next(iter(cold.values()))["levels"]) if cold else []
    rows = []
    for name, row in cold.items():
        lv = row["levels"]
        speed = (
            lv["2"]["wall"]["median"] / lv["0"]["wall"]["median"]
            if "0" in lv and "2" in lv
            else None
        )
        rows.append([name] + [cell(lv[x]) for x in levels] + [fmt_ratio(speed)])
    out = [
        "## Optimization level: compile time",
        "",
        f"In-process cold compiles. Seed: -O0 compiles {seed.O0_COMPILE_SPEEDUP}x faster than -O2.",
        "",
    ]
    return out + table(["model"] + [f"-O{x}" for x in levels] + ["-O2 / -O0"], rows)


def runtime_table(report: dict) -> list[str]:
    run = report.get("runtime")
    if not run:
        return ["## Runtime", "", "Not measured (torch missing or section skipped).", ""]
    rows = [
        [
            r["model"],
            str(r["input"]),
            f"{r['ms']['reference']:.3f}",
            f"{r['ms']['O0']:.3f}",
            f"{(r['ratio']['O0'] - 1) * 100:+.1f}%",
            f"{r['ms']['O2']:.3f}",
            f"{(r['ratio']['O2'] - 1) * 100:+.1f}%",
        ]
        for r in run["models"]
    ]
    return [
        "## Runtime: generated modules vs hand-written PyTorch (CPU)",
        "",
        f"bench_runtime's measurement: torch {run['torch']}, {run['threads']} threads, median of "
        f"{run['repeats']} round-robin rounds of samples of about {run['sample_ms']:g} ms; "
        "overhead = generated / reference - 1 "
        f"(negative: faster). Seed target: {seed.SEED_TARGETS}.",
        "",
    ] + table(
        ["model", "input", "reference ms", "-O0 ms", "-O0 overhead", "-O2 ms", "-O2 overhead"], rows
    )


def scenarios_table(report: dict) -> list[str]:
    inc = report.get("incremental", {})
    rows = [
        [name] + [cell(per.get(s)) for s in SCENARIOS] + [f"{per['body edit']['executed']:g}"]
        for name, per in inc.items()
    ]
    out = [
        "## Cache scenarios, in-process",
        "",
        "The rebuild after one change, on the database that compiled the model (see "
        "benchmarks/report/edits.py for each edit). Seed, ResNet-18: no change "
        f"{fmt_s(seed.NOOP_RESNET18_S)}, add one layer {fmt_s(seed.ADD_LAYER_RESNET18_S)}.",
        "",
    ]
    out += table(["model"] + list(SCENARIOS) + ["queries run (body edit)"], rows)
    for name, per in report.get("process", {}).get("scenarios", {}).items():
        seeds = (
            {"no change": seed.NOOP_RESNET18_S, "add a layer": seed.ADD_LAYER_RESNET18_S}
            if name == "resnet18"
            else {}
        )
        rows = [
            [
                s,
                cell(per[s]),
                fmt_s(seeds.get(s)),
                fmt_ratio(seed.ratio(seeds.get(s), per[s]["wall"]["median"])),
            ]
            for s in per
        ]
        out += [f"Fresh processes, `tribuild build {name}` with a warm cache:", ""]
        out += table(["scenario", "ours", "seed", "ratio"], rows)
    return out


def scaling_tables(report: dict) -> list[str]:
    out = []
    for kind, rows in report.get("scaling", {}).items():
        what = "synthetic projects by files" if kind == "files" else "one generated file by layers"
        body = [
            [
                str(r["files"]),
                str(r["layers"]),
                str(r["lines"]),
                cell(r["in_process"]),
                f"{r['ms_per_line']:.3f}",
                cell(r["process"]),
                f"{r['process']['rss_bytes']['median'] / 1e6:.0f} MB",
            ]
            for r in rows
        ]
        out += [
            f"## Scaling: {what}",
            "",
            f"Seed: about {seed.MS_PER_LINE} ms per source line.",
            "",
        ]
        out += table(
            ["files", "layers", "lines", "in-process", "ms/line", "fresh process -j 1", "peak RSS"],
            body,
        )
    return out


def jobs_table(report: dict) -> list[str]:
    jobs = report.get("process", {}).get("jobs", {})
    rows = [
        [case, cell(r["jobs1"]), cell(r["jobs2"]), f"{r['speedup']:.2f}x"]
        for case, r in jobs.items()
    ]
    seeds = ", ".join(f"{k} {v}x" for k, v in seed.JOBS8_SPEEDUP.items())
    return [
        "## --jobs",
        "",
        f"Clean builds, fresh processes, -j1 and -j2 alternating; {report['meta']['cpus']} "
        f"CPUs here. Seed (8 threads): {seeds}. A target is one unit of work: a one-target build "
        "cannot use a second worker.",
        "",
    ] + table(["case", "--jobs 1", "--jobs 2", "speedup"], rows)


def markdown(report: dict, command: str) -> str:
    m = report["meta"]
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    head = [
        "# tribuild performance report: the seed's tables, measured",
        "",
        METHOD.format(
            command=command,
            started=m["started"],
            commit=m["commit"],
            dirty=f", {m['dirty_paths']} uncommitted paths under tribuild/"
            if m["dirty_paths"]
            else "",
            cpu=m["cpu"],
            cpus=m["cpus"],
            python=m["python"],
            versions=versions,
            load0=m["load_average_start"][0],
            load1=m["load_average_end"][0],
        ),
    ]
    body = (
        goals_table(report["goals"])
        + cold_table(report)
        + memory_table(report)
        + scenarios_table(report)
        + levels_table(report)
        + runtime_table(report)
        + scaling_tables(report)
    )
    if report.get("process", {}).get("jobs"):
        body += jobs_table(report)
    for name, error in report.get("errors", {}).items():
        body += [
            f"## Section `{name}` failed",
            "",
            "```",
            error.strip().splitlines()[-1],
            "```",
            "",
        ]
    plots = report.get("plots", [])
    if plots:
        body += ["## Plots", ""] + [f"![{p}](plots/{p})" for p in plots] + [""]
    return "\n".join(head + body)
