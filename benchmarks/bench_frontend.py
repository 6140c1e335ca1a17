"""The front end (lex + parse + names + check) on every zoo target, in process.

Terms:
- *cold*: a fresh ``Database`` in a fresh process (``--cold TARGET``: tribuild imported
  first, not timed), so the checker's per-process tables (``lang.check_calls``, ``dims``)
  start empty too: ``load_sources`` (reads the entry's import closure, lexes each file to
  find its imports) then ``target_report``.
- *no-op*: the same database, files read again and found unchanged, ``target_report`` again.
- *comment edit*: a comment line added at the top of the *edit file*; the body edit: a
  ``let unused_k = 0`` statement added before the first ``return`` of the *edit layer*'s
  ``fn forward`` (a block the model instantiates many times; the program stays valid).
  Edits toggle between the edited and the original text, so every repeat is a real change
  of one input (``db.set(source_text, ...)``) followed by ``target_report``.
- *stage*: a group of queries (``STAGES``); a stage's time is the sum of its queries' own
  ``seconds`` from ``db.stats()`` (nested queries excluded); queries in no stage count as
  *other queries*. *engine + I/O* is the rest of the wall time: reading files, memo lookups
  and dependency validation.
- *whole zoo*: a fresh database, every source file's diagnostics and every target's report.
- *reference*: a fixed pure-Python loop timed before and after; on a shared virtual machine
  the CPU's speed drifts (the load average inside the machine does not show it), and this
  figure shows by how much, so runs on different days can be compared.
Figures are medians of ``--repeats`` runs: wall time (``total_ms``, what the goals are judged
on) and this process's CPU time (``cpu_ms``, less disturbed by other work on a shared
machine). Writes ``results/frontend.json`` and ``frontend.md``; ``--quick`` (a few seconds,
two targets, writes nothing) is the CI smoke run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path
from time import perf_counter, process_time

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tribuild.config.load import load_config  # noqa: E402
from tribuild.driver.sources import load_sources, scan  # noqa: E402
from tribuild.engine import Database  # noqa: E402
from tribuild.queries.inputs import SourceText, source_text  # noqa: E402
from tribuild.queries.report import file_diagnostics  # noqa: E402
from tribuild.queries.targets import target_report  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
STAGES = {
    "lex": (
        "read_error",
        "lexed",
        "chunks",
        "chunk_text",
        "chunk_lexed",
        "item_places",
        "item_index",
        "item_tokens",
    ),
    "parse": ("item_ast", "item_construction"),
    "names": ("item_names", "item_head", "imports", "exports", "scope", "import_cycle"),
    "check": (
        "signature",
        "const_value",
        "item_diagnostics",
        "generic_members",
        "instance_members",
        "checked_instance",
        "instance_children",
        "instance_diagnostics",
        "layer_instance",
    ),
    "instances": ("reached_instances", "instance_report", "target_report"),
}
BLOCKS = "models/blocks/"
EDIT_LAYER = {  # target -> (file, layer) whose forward body the body edit changes
    "mnist_mlp": ("models/mlp.tri", "MnistMLP"),
    "lenet5": ("models/lenet.tri", "LeNet5"),
    "vgg16": ("models/vgg.tri", "VGGStage"),
    "resnet18": (BLOCKS + "resnet_blocks.tri", "BasicBlock"),
    "resnet34": (BLOCKS + "resnet_blocks.tri", "BasicBlock"),
    "resnet50": (BLOCKS + "resnet_blocks.tri", "Bottleneck"),
    "resnet101": (BLOCKS + "resnet_blocks.tri", "Bottleneck"),
    "resnet152": (BLOCKS + "resnet_blocks.tri", "Bottleneck"),
    "mobilenet_v2": (BLOCKS + "inverted_residual.tri", "InvertedResidual"),
    "efficientnet_b0": (BLOCKS + "inverted_residual.tri", "InvertedResidual"),
    "densenet121": (BLOCKS + "dense_blocks.tri", "DenseLayer"),
    "vit": (BLOCKS + "transformer.tri", "EncoderBlock"),
    "bitnet_block": (BLOCKS + "bitnet_blocks.tri", "BitAttention"),
    "bitnet_lm_tiny": ("models/bitnet_lm.tri", "BitNetDecoderLayer"),
    "bitnet_2b": ("models/bitnet_lm.tri", "BitNetDecoderLayer"),
}
GOALS = {  # goal name -> (target, run, bound in ms)
    "cold front end of ResNet-50": ("resnet50", "cold", 30.0),
    "body edit re-check, ResNet-18": ("resnet18", "body_edit", 3.0),
    "body edit re-check, ResNet-152": ("resnet152", "body_edit", 3.0),
}
QUICK_TARGETS = ("resnet18", "resnet50")


def body_edit(text: str, layer: str) -> str:
    """``text`` with ``let unused_k = 0`` before the first return of ``layer``'s forward."""
    start = text.index(f"layer {layer}(")
    forward = text.index("fn forward", start)
    ret = re.compile(r"\n([ \t]+)return ").search(text, forward)
    return text[: ret.start()] + f"\n{ret.group(1)}let unused_k = 0" + text[ret.start() :]


def stage_seconds(before: dict, after: dict, stages: dict = STAGES) -> dict[str, float]:
    """Per-stage own time (ms) executed between two ``db.stats()`` snapshots; ``stages``
    maps a stage to its queries (benchmarks/report groups the whole pipeline's)."""

    def own(name: str) -> float:
        old = before.get(name)
        return after[name].seconds - (old.seconds if old else 0.0) if name in after else 0.0

    out = {stage: sum(own(q) for q in queries) * 1e3 for stage, queries in stages.items()}
    staged = {q for queries in stages.values() for q in queries}
    out["other queries"] = sum(own(q) for q in after if q not in staged) * 1e3
    return out


def timed(db, action) -> dict:
    """Run ``action``; its wall time, stage times and the queries it executed. A full
    collection first, so every run starts with the same garbage collector state (otherwise
    collections land on whichever target's turn the allocation counts happen to reach)."""
    before = db.stats()
    gc.collect()
    with db.log() as log:
        start, cpu = perf_counter(), process_time()
        action()
        total, cpu = (perf_counter() - start) * 1e3, (process_time() - cpu) * 1e3
    stages = stage_seconds(before, db.stats())
    stages["engine + I/O"] = total - sum(stages.values())
    return {"total_ms": total, "cpu_ms": cpu, "stages_ms": stages, "executed": len(log.executed)}


def median_run(runs: list[dict]) -> dict:
    """Medians of every figure across runs."""
    return {
        "total_ms": statistics.median(r["total_ms"] for r in runs),
        "cpu_ms": statistics.median(r["cpu_ms"] for r in runs),
        "stages_ms": {
            s: statistics.median(r["stages_ms"][s] for r in runs) for s in runs[0]["stages_ms"]
        },
        "executed": statistics.median(r["executed"] for r in runs),
    }


def check(db, target) -> None:
    report = target_report(db, target.entry_path, target.entry_layer, target.args, target.input)
    assert report.problem is None and not report.diagnostics, (target.name, report)


def reload(db, root: str, target) -> None:
    load_sources(db, root, (target.entry_path,))
    check(db, target)


def measure(root: str, targets: list, repeats: int) -> dict[str, dict]:
    """Every run of every target. Targets take turns within each repeat, so a change in the
    machine's load touches all of them alike (the side-by-side comparisons stay fair)."""
    runs: dict[str, dict[str, list]] = {t.name: {} for t in targets}
    dbs: dict[str, Database] = {}

    def record(figure: str, db, target, action) -> None:
        runs[target.name].setdefault(figure, []).append(timed(db, action))

    for _ in range(repeats):
        for t in targets:
            runs[t.name].setdefault("cold", []).append(cold_in_fresh_process(t.name))
    for t in targets:
        dbs[t.name] = Database()
        reload(dbs[t.name], root, t)
    for _ in range(repeats):
        for t in targets:
            record("noop", dbs[t.name], t, lambda t=t: reload(dbs[t.name], root, t))
    for figure in ("comment_edit", "body_edit"):
        for i in range(repeats * 2):
            for t in targets:
                db, (path, text) = dbs[t.name], edit_text(dbs[t.name], t.name, figure, i)
                record(
                    figure,
                    db,
                    t,
                    lambda db=db, path=path, text=text, t=t: (
                        db.set(source_text, path, SourceText(text)),
                        check(db, t),
                    ),
                )
    out = {
        name: {figure: median_run(rs) for figure, rs in figures.items()}
        for name, figures in runs.items()
    }
    for name, figures in out.items():
        figures["edit"] = ":".join(EDIT_LAYER[name])
    return out


def cold_in_fresh_process(name: str) -> dict:
    """The cold run of target ``name`` in a new Python process (``--cold``)."""
    out = subprocess.run(
        [sys.executable, __file__, "--cold", name], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


def cold_here(name: str) -> None:
    """Print the cold run of target ``name`` as JSON: this process has checked nothing yet."""
    config = load_config(ROOT / "Tribuild.toml")
    target = next(t for t in config.targets if t.name == name)
    db = Database()
    print(json.dumps(timed(db, lambda: reload(db, config.root, target))))


_ORIGINALS: dict[str, str] = {}


def edit_text(db, target: str, figure: str, i: int) -> tuple[str, str]:
    """(path, text) of edit number ``i``: the edited text when ``i`` is even, else the original."""
    path, layer = EDIT_LAYER[target]
    original = _ORIGINALS.setdefault(path, source_text(db, path).text)
    if i % 2:
        return path, original
    return path, "# an edit\n" + original if figure == "comment_edit" else body_edit(
        original, layer
    )


def whole_zoo(config, repeats: int) -> float:
    """Median ms of a cold check of every file and every target in one fresh database."""
    files = scan(config.root, config.sources)
    times = []
    for _ in range(repeats):
        db = Database()
        start = perf_counter()
        closure = load_sources(db, config.root, files + tuple(t.entry_path for t in config.targets))
        for path in closure:
            file_diagnostics(db, path)
        for t in config.targets:
            target_report(db, t.entry_path, t.entry_layer, t.args, t.input)
        times.append((perf_counter() - start) * 1e3)
    return statistics.median(times)


def reference_ms(repeats: int) -> float:
    """Median ms of a fixed pure-Python workload (dict and tuple traffic, like the checker's)."""

    def work():
        table: dict = {}
        for i in range(100_000):
            key = (i % 977, "x")
            table[key] = table.get(key, 0) + i

    times = []
    for _ in range(repeats):
        start = perf_counter()
        work()
        times.append((perf_counter() - start) * 1e3)
    return statistics.median(times)


def goal_rows(models: dict) -> list[dict]:
    rows = []
    for name, (target, run, bound) in GOALS.items():
        if target in models:
            wall, cpu = models[target][run]["total_ms"], models[target][run]["cpu_ms"]
            rows.append(
                {
                    "goal": name,
                    "bound_ms": bound,
                    "wall_ms": wall,
                    "cpu_ms": cpu,
                    "met": wall <= bound,
                }
            )
    return rows


def markdown(report: dict) -> str:
    lines = [
        "# Front-end benchmark",
        "",
        f"Medians of {report['repeats']} runs (edits: {2 * report['repeats']} toggles); Python "
        f"{report['python']} on {report['machine']}; load average {report['load_average'][0]:.2f} "
        f"when it started, {report['load_average'][1]:.2f} when it ended (a shared machine: with "
        "the load above the CPU count, wall times stretch; CPU time is the steadier figure). "
        f"Reference workload: {report['reference_ms'][0]:.1f} ms before, "
        f"{report['reference_ms'][1]:.1f} ms "
        "after (see the module docstring).",
        "",
        "| goal | bound | wall | CPU | met (wall) |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['goal']} | <= {r['bound_ms']:g} ms | {r['wall_ms']:.2f} ms | {r['cpu_ms']:.2f} ms | "
        f"{'yes' if r['met'] else 'NO'} |"
        for r in report["goals"]
    ]
    if report.get("whole_zoo_cold_ms") is not None:
        lines += [
            "",
            f"Whole zoo, cold (every file's diagnostics and every target, one fresh "
            f"database): {report['whole_zoo_cold_ms']:.0f} ms.",
        ]
    models = report["models"]
    resnets = [n for n in models if n.startswith("resnet")]
    if resnets:
        edits = [models[n]["body_edit"] for n in resnets]
        lines += [
            "",
            "Body edit of one block across the ResNets (the goal: flat with model size; 18/34 "
            "edit BasicBlock, 50/101/152 Bottleneck):",
            "",
            "| | " + " | ".join(resnets) + " |",
            "|---" * (1 + len(resnets)) + "|",
            "| total (wall) | " + " | ".join(f"{e['total_ms']:.2f} ms" for e in edits) + " |",
            "| total (CPU) | " + " | ".join(f"{e['cpu_ms']:.2f} ms" for e in edits) + " |",
            "| queries executed | " + " | ".join(f"{e['executed']:g}" for e in edits) + " |",
        ]
        lines += [
            f"| {s} | " + " | ".join(f"{e['stages_ms'][s]:.2f} ms" for e in edits) + " |"
            for s in edits[0]["stages_ms"]
        ]
    stages = list(STAGES) + ["other queries", "engine + I/O"]
    for name, figures in models.items():
        edit = figures["edit"]
        lines += [
            "",
            f"## {name}",
            "",
            f"Edits in `{edit}`.",
            "",
            "| run | wall | CPU | executed | " + " | ".join(stages) + " |",
            "|---" * (4 + len(stages)) + "|",
        ]
        for run in ("cold", "noop", "comment_edit", "body_edit"):
            f = figures[run]
            lines.append(
                f"| {run.replace('_', ' ')} | {f['total_ms']:.2f} ms | {f['cpu_ms']:.2f} ms | "
                f"{f['executed']:g} | "
                + " | ".join(f"{f['stages_ms'][s]:.2f}" for s in stages)
                + " |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="two targets, a few seconds; writes nothing"
    )
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--cold", metavar="TARGET", help="print one cold run of TARGET as JSON")
    args = p.parse_args(argv)
    if args.cold:
        return cold_here(args.cold)
    repeats = 3 if args.quick else args.repeats
    config = load_config(ROOT / "Tribuild.toml")
    load_start, reference_start = os.getloadavg()[0], reference_ms(repeats)
    targets = [t for t in config.targets if not args.quick or t.name in QUICK_TARGETS]
    models = measure(config.root, targets, repeats)
    report = {
        "models": models,
        "goals": goal_rows(models),
        "repeats": repeats,
        "whole_zoo_cold_ms": None if args.quick else whole_zoo(config, repeats),
        "load_average": (load_start, os.getloadavg()[0]),
        "reference_ms": (reference_start, reference_ms(repeats)),
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.platform()}",
    }
    text = markdown(report)
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "frontend.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / "frontend.md").write_text(text)


if __name__ == "__main__":
    main()
