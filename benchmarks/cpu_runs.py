"""Several ``bench_cpu.py`` runs side by side: each run's goal figures, their medians, and the
goals judged on the medians (``benchmarks/results/cpu_runs.md`` and ``.json``).

Why: on this kind of machine two runs minutes apart disagree by more than the differences
they measure (llama.cpp decoded config S in 15.9-19.8 ms a token within minutes), so no run
alone judges a goal. Give every run made for a change, not a selection.

Terms:
- *run*: one ``cpu.json`` that ``bench_cpu.py`` wrote; its ``goals`` rows carry the bound as
  ``limit`` and ``at_least`` (``cpu/tables.py``).
- *median*: of the runs that measured the goal (a ``bitnet_2b`` run has no config S rows);
  judged with the bound of the rows (``tables.meets``).

Usage: ``python benchmarks/cpu_runs.py RUN.json... [--out benchmarks/results]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "cpu"))
import tables  # noqa: E402


def collect(paths: list[Path]) -> dict:
    """The runs' goal rows by goal, in the order they first appear, and each run's meta."""
    runs, by_goal = [], {}
    resolved = [p.resolve() for p in paths]
    if twice := next((p for i, p in enumerate(paths) if resolved[i] in resolved[:i]), None):
        raise SystemExit(f"{twice}: given twice; each run counts once in a median")
    names = [p.name for p in paths]
    for path in paths:
        # bench_cpu.py names every run <out>/cpu.json: where names repeat, the path tells them
        label = path.name if names.count(path.name) == 1 else str(path)
        report = json.loads(path.read_text())
        rows = report.get("goals", [])
        old = [g["goal"] for g in rows if "limit" not in g]
        if old:
            raise SystemExit(f"{path}: goal rows without their bound ({old[0]}): an older run")
        meta = report["meta"]
        runs.append(
            {
                "file": label,
                "started": meta["started"],
                "commit": meta["commit"],
                "load_average": [meta["load_average_start"][0], meta["load_average_end"][0]],
            }
        )
        for g in rows:
            entry = by_goal.setdefault(
                g["goal"], {"bound": g["bound"], "limit": g["limit"], "at_least": g["at_least"]}
            )
            entry.setdefault("runs", {})[label] = g["measured"]
    for entry in by_goal.values():
        values = [v for v in entry["runs"].values() if v is not None]
        entry["median"] = statistics.median(values) if values else None
        entry["met_in"] = [
            sum(tables.meets(v, entry["limit"], entry["at_least"]) for v in values),
            len(values),
        ]
        entry["met"] = (
            None
            if entry["median"] is None
            else tables.meets(entry["median"], entry["limit"], entry["at_least"])
        )
    return {"runs": runs, "goals": by_goal}


def text(value: float | None, goal: str) -> str:
    if value is None:
        return "–"
    if goal.startswith("peak RSS"):
        return f"{value / tables.GB:.2f} GB"
    if goal.startswith("decode GEMV"):
        return f"{value:.0%}"
    return f"{value:.2f}x"


def markdown(summary: dict) -> str:
    runs = summary["runs"]
    out = [
        "# bench_cpu runs side by side (`benchmarks/cpu_runs.py`)",
        "",
        "Every run of `benchmarks/bench_cpu.py` made for the change, not a selection: runs "
        "minutes apart on this machine disagree by more than they measure, so the goals are "
        "judged on the medians. Ratios against llama.cpp TQ2_0 as in `cpu.md` (above 1 is "
        "faster for speeds; below 1 is less for memory and load).",
        "",
        "| run | started | commit | load average (start, end) |",
        "|---|---|---|---|",
        *(
            f"| `{r['file']}` | {r['started']} | {r['commit']} | "
            f"{r['load_average'][0]:.1f}, {r['load_average'][1]:.1f} |"
            for r in runs
        ),
        "",
        "| goal | bound | "
        + " | ".join(f"run {i + 1}" for i in range(len(runs)))
        + " | median | met in runs | met (median) |",
        "|---|---|" + "---|" * len(runs) + "---|---|---|",
    ]
    verdict = {True: "met", False: "**not met**", None: "not measured"}
    for goal, g in summary["goals"].items():
        cells = [text(g["runs"].get(r["file"]), goal) for r in runs]
        out.append(
            f"| {goal} | {g['bound']} | "
            + " | ".join(cells)
            + f" | {text(g['median'], goal)} | {g['met_in'][0]} of {g['met_in'][1]} | "
            f"{verdict[g['met']]} |"
        )
    if summary.get("notes"):
        out += ["", "Notes:", "", *(f"- {note}" for note in summary["notes"])]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="cpu.json files of bench_cpu runs")
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--note", action="append", default=[], help="a line for the notes below")
    a = p.parse_args(argv)
    summary = collect(a.runs)
    summary["notes"] = a.note
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "cpu_runs.json").write_text(json.dumps(summary, indent=1) + "\n")
    md = markdown(summary)
    (a.out / "cpu_runs.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
