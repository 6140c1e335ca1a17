"""The query engine's fast paths, measured on a ~100k-query graph.

The graph: ``LEAVES`` leaf queries, each reading one of ``INPUTS`` inputs, reduced pairwise
by a binary tree of derived queries up to one root (about 2 x LEAVES derived queries in all).
Figures, each the median of ``--repeats`` runs in this process, in CPU time of this process
(``time.process_time``: the machines are shared, and wall time under a load average of 4 on
2 cores measures the neighbours more than the engine):
- memo hit: one top-level call of an already verified query (the root, and a leaf with an
  argument), per call;
- re-validation: reading the root after setting an input nothing depends on, so every memo
  is verified green (all inputs LOW);
- the same with the graph's inputs HIGH and the changed input LOW (durability shortcut);
- save, load and store size of the whole database; the first root read after a load with
  the inputs set to equal values (executes nothing, decodes one value); the first
  re-validation after a load (a load builds memos on first use, so this one builds all).
Writes ``benchmarks/results/engine.json`` and ``engine.md``; ``--quick`` runs a small graph
for a few seconds and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import timeit
from pathlib import Path
from time import process_time

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tribuild.engine import Database, Durability, derived, input_query  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
INPUTS = 1000
GOALS = {  # figure -> (goal, unit)
    "memo_hit_us": (2.0, "µs"),
    "revalidate_100k_ms": (150.0, "ms"),
    "revalidate_durability_ms": (5.0, "ms"),
    "load_ms": (300.0, "ms"),
}


@input_query
def source(db, i): ...


@derived
def leaf(db, i):
    return source(db, i % INPUTS) * 2 + i % 7


@derived
def reduce(db, level, i):
    """Node ``i`` of tree level ``level`` (level 0 are the leaves)."""
    if level == 1:
        return leaf(db, 2 * i) + leaf(db, 2 * i + 1) if 2 * i + 1 < _width[0] else leaf(db, 2 * i)
    below = _width[level - 1]
    left = reduce(db, level - 1, 2 * i)
    return left + reduce(db, level - 1, 2 * i + 1) if 2 * i + 1 < below else left


_width: list[int] = []  # nodes per level, fixed before any query runs


def build(leaves: int, durability: Durability) -> tuple[Database, tuple]:
    """A database with the whole tree computed bottom-up; returns it and the root key."""
    _width[:] = [leaves]
    while _width[-1] > 1:
        _width.append((_width[-1] + 1) // 2)
    db = Database()
    for i in range(INPUTS):
        db.set(source, i, i, durability=durability)
    db.set(source, "unused", 0)
    for i in range(leaves):
        leaf(db, i)
    for level in range(1, len(_width)):
        for i in range(_width[level]):
            reduce(db, level, i)
    return db, (len(_width) - 1, 0)


def query_count(db: Database) -> int:
    stats = db.stats()
    return stats["leaf"].executed + stats["reduce"].executed


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = process_time()
        fn()
        times.append((process_time() - start) * 1e3)
    return statistics.median(times)


def hit_us(call, repeats: int, number: int) -> float:
    times = timeit.repeat(call, number=number, repeat=repeats, timer=process_time)
    return statistics.median(times) / number * 1e6


def revalidate_ms(db: Database, root: tuple, repeats: int) -> float:
    counter = iter(range(1, 10**9))

    def once():
        db.set(source, "unused", next(counter))
        reduce(db, *root)

    return median_ms(once, repeats)


def _loaded(store: str) -> Database:
    db = Database.load(store, "bench")
    for i in range(INPUTS):
        db.set(source, i, i)
    return db


def measure(leaves: int, repeats: int, hits: int) -> dict:
    figures: dict = {}
    db, root = build(leaves, Durability.LOW)
    figures["derived_queries"] = query_count(db)
    figures["memo_hit_us"] = hit_us(lambda: reduce(db, *root), repeats, hits)
    figures["memo_hit_leaf_us"] = hit_us(lambda: leaf(db, 12345 % leaves), repeats, hits)
    figures["revalidate_100k_ms"] = revalidate_ms(db, root, repeats)
    with tempfile.TemporaryDirectory() as store:
        figures["save_ms"] = median_ms(lambda: db.save(store, "bench"), repeats)
        figures["store_bytes"] = sum(f.stat().st_size for f in Path(store).iterdir())
        figures["load_ms"] = median_ms(lambda: Database.load(store, "bench"), repeats)
        loaded = _loaded(store)
        assert loaded.store_report.status == "loaded", loaded.store_report
        with loaded.log() as log:
            start = process_time()
            reduce(loaded, *root)
            figures["first_query_after_load_ms"] = (process_time() - start) * 1e3
        assert log.executed == [], "a load with unchanged inputs must execute nothing"
        figures["revalidate_after_load_ms"] = statistics.median(
            revalidate_ms(_loaded(store), root, 1) for _ in range(repeats)
        )
    db = loaded = None  # free the first tree before building the second
    high, root = build(leaves, Durability.HIGH)
    figures["revalidate_durability_ms"] = revalidate_ms(high, root, repeats)
    return figures


def goal_rows(figures: dict) -> list[dict]:
    return [
        {
            "figure": name,
            "goal": goal,
            "unit": unit,
            "measured": figures[name],
            "met": figures[name] <= goal,
        }
        for name, (goal, unit) in GOALS.items()
    ]


def markdown(report: dict) -> str:
    f = report["figures"]
    lines = [
        "# Engine benchmark",
        "",
        f"{f['derived_queries']} derived queries over {INPUTS} inputs; medians of "
        f"{report['repeats']} runs, CPU time; Python {report['python']} on {report['machine']}; "
        f"load average {report['load_average']:.2f} when it started (a shared machine: "
        "figures near a goal may land on either side of it from run to run).",
        "",
        "| figure | goal | measured | met |",
        "|---|---|---|---|",
    ]
    for row in report["goals"]:
        lines.append(
            f"| {row['figure']} | <= {row['goal']:g} {row['unit']} | "
            f"{row['measured']:.3g} {row['unit']} | {'yes' if row['met'] else 'NO'} |"
        )
    lines += [
        "",
        "| other figure | measured |",
        "|---|---|",
        f"| memo hit, leaf with one argument | {f['memo_hit_leaf_us']:.3g} µs |",
        f"| save | {f['save_ms']:.0f} ms |",
        f"| store size | {f['store_bytes'] / 1e6:.1f} MB |",
        f"| first root read after load (inputs set equal) | {f['first_query_after_load_ms']:.3g} "
        "ms |",
        f"| first re-validation after load (builds every memo) | "
        f"{f['revalidate_after_load_ms']:.0f} ms |",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="small graph, a few seconds; writes nothing"
    )
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    leaves, repeats, hits = (5_000, 3, 20_000) if args.quick else (50_000, args.repeats, 200_000)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    load_average = os.getloadavg()[0]
    figures = measure(leaves, repeats, hits)
    report = {
        "figures": figures,
        "goals": goal_rows(figures),
        "repeats": repeats,
        "load_average": load_average,
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {platform.processor() or ''} "
        f"{os.cpu_count()} CPUs, {platform.platform()}".replace("  ", " "),
    }
    text = markdown(report)
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "engine.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / "engine.md").write_text(text)


if __name__ == "__main__":
    main()
