"""PNG plots of the report (matplotlib, imported here only; the suite runs without it).

Plots: compile time vs layers (zoo by nominal depth, seed beside it; one generated file by
layers), compile time vs lines (synthetic projects and zoo models, the seed's 2.6 ms/line
as a line), cache scenarios (log scale), --jobs, and peak memory. A plot whose section the
run skipped is not drawn. ``draw`` returns the file names written.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.report import seed
from benchmarks.report.edits import SCENARIOS


def _median(s: dict) -> float:
    return s["wall"]["median"]


def vs_layers(report: dict, ax_zoo, ax_deep) -> None:
    cold = {n: r for n, r in report.get("cold", {}).items() if n in seed.NOMINAL_DEPTH}
    names = sorted(cold, key=seed.NOMINAL_DEPTH.get)
    ax_zoo.plot(
        [seed.NOMINAL_DEPTH[n] for n in names],
        [_median(cold[n]["levels"]["2"]) for n in names],
        "o",
        label="ours, in-process",
    )
    procs = report.get("process", {}).get("cold", {})
    with_proc = [n for n in names if n in procs]
    ax_zoo.plot(
        [seed.NOMINAL_DEPTH[n] for n in with_proc],
        [_median(procs[n]) for n in with_proc],
        "s",
        label="ours, fresh process",
    )
    seeded = sorted(seed.COLD_SECONDS, key=seed.NOMINAL_DEPTH.get)
    ax_zoo.plot(
        [seed.NOMINAL_DEPTH[n] for n in seeded],
        [seed.COLD_SECONDS[n] for n in seeded],
        "x",
        label="seed",
    )
    ax_zoo.set(
        xlabel="nominal depth (layers)", ylabel="cold compile (s)", yscale="log", title="zoo models"
    )
    ax_zoo.legend()
    deep = report.get("scaling", {}).get("layers", [])
    ax_deep.plot([r["layers"] for r in deep], [_median(r["in_process"]) for r in deep], "o-")
    ax_deep.set(xlabel="layers", ylabel="cold compile, in-process (s)", title="one generated file")


def vs_lines(report: dict, ax) -> None:
    rows = report.get("scaling", {}).get("files", [])
    lines = [r["lines"] for r in rows]
    ax.plot(
        lines,
        [_median(r["in_process"]) for r in rows],
        "o-",
        label="synthetic projects, in-process",
    )
    ax.plot(
        lines,
        [_median(r["process"]) for r in rows],
        "s-",
        label="synthetic projects, fresh process",
    )
    cold = report.get("cold", {})
    ax.plot(
        [r["lines"] for r in cold.values()],
        [_median(r["levels"]["2"]) for r in cold.values()],
        "^",
        label="zoo models, in-process",
    )
    if lines:
        ax.plot(
            [min(lines), max(lines)],
            [x * seed.MS_PER_LINE / 1e3 for x in (min(lines), max(lines))],
            "--",
            label=f"seed, {seed.MS_PER_LINE} ms/line",
        )
    ax.set(
        xlabel="source lines",
        ylabel="cold compile (s)",
        xscale="log",
        yscale="log",
        title="compile time vs lines",
    )
    ax.legend()


def scenarios(report: dict, ax) -> None:
    inc = report.get("incremental", {})
    procs = report.get("process", {}).get("scenarios", {})
    series = [(f"{n}, in-process", per) for n, per in inc.items() if n in ("resnet18", "resnet152")]
    series += [(f"{n}, fresh process", per) for n, per in procs.items()]
    width = 0.8 / max(len(series), 1)
    for i, (label, per) in enumerate(series):
        xs = [j + i * width for j, s in enumerate(SCENARIOS) if s in per]
        ax.bar(xs, [_median(per[s]) * 1e3 for s in SCENARIOS if s in per], width, label=label)
    for s, value in (
        ("no change", seed.NOOP_RESNET18_S),
        ("add a layer", seed.ADD_LAYER_RESNET18_S),
    ):
        j = SCENARIOS.index(s)
        ax.plot([j - 0.1, j + 0.9], [value * 1e3] * 2, "k--")
    ax.set_xticks([j + 0.4 for j in range(len(SCENARIOS))], SCENARIOS, rotation=20)
    ax.set(
        ylabel="rebuild (ms, log)", yscale="log", title="cache scenarios (dashed: seed, ResNet-18)"
    )
    ax.legend(fontsize="small")


def jobs(report: dict, ax) -> None:
    cases = report.get("process", {}).get("jobs", {})
    xs = range(len(cases))
    ax.bar(
        [x - 0.2 for x in xs], [_median(r["jobs1"]) for r in cases.values()], 0.4, label="--jobs 1"
    )
    ax.bar(
        [x + 0.2 for x in xs], [_median(r["jobs2"]) for r in cases.values()], 0.4, label="--jobs 2"
    )
    ax.set_xticks(
        list(xs), [f"{c}\n{r['speedup']:.2f}x" for c, r in cases.items()], fontsize="small"
    )
    ax.set(ylabel="clean build (s)", title="--jobs scaling")
    ax.legend()


def memory(report: dict, ax) -> None:
    cold, procs = report.get("cold", {}), report.get("process", {}).get("cold", {})
    names = list(cold)
    xs = range(len(names))
    ax.bar(
        [x - 0.2 for x in xs],
        [cold[n]["traced_peak_bytes"] / 1e6 for n in names],
        0.4,
        label="traced peak",
    )
    ax.bar(
        [x + 0.2 for x in xs],
        [procs[n]["rss_bytes"]["median"] / 1e6 if n in procs else 0 for n in names],
        0.4,
        label="peak RSS, fresh process",
    )
    for n, mb in seed.PEAK_MB.items():
        if n in names:
            ax.plot([names.index(n)], [mb], "rx", label=f"seed {n}")
    ax.set_xticks(list(xs), names, rotation=60, fontsize="small")
    ax.set(ylabel="MB (log)", yscale="log", title="peak memory of a cold compile")
    ax.legend()


def draw(report: dict, folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    made = []

    def save(name: str, fig) -> None:
        fig.tight_layout()
        fig.savefig(folder / name, dpi=90)
        plt.close(fig)
        made.append(name)

    if report.get("cold"):
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
        vs_layers(report, a, b)
        save("compile_vs_layers.png", fig)
    if report.get("scaling"):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        vs_lines(report, ax)
        save("compile_vs_lines.png", fig)
    if report.get("incremental"):
        fig, ax = plt.subplots(figsize=(9, 4.5))
        scenarios(report, ax)
        save("incremental.png", fig)
    if report.get("process", {}).get("jobs"):
        fig, ax = plt.subplots(figsize=(7, 4))
        jobs(report, ax)
        save("jobs.png", fig)
    if report.get("cold"):
        fig, ax = plt.subplots(figsize=(9, 4.5))
        memory(report, ax)
        save("memory.png", fig)
    return made
