"""Regression check: a report run against a baseline run; exit 1 when a figure got slower.

    python benchmarks/compare.py NEW.json BASELINE.json [--threshold 1.2] [--only REGEX]
                                 [--floor 0.001]

Both files are benchmarks/run.py's JSON. Every figure present in both (``figures``: dotted
name -> median, lower is better: seconds, bytes or a runtime ratio) is compared: its
*ratio* is new / baseline, and it *regressed* when the ratio exceeds the threshold and the
two values differ by more than ``--floor`` (an absolute margin, in the figure's unit, below
which noise dominates: by default 1 ms for times, and nothing for other figures). ``--only``
keeps the figures whose name matches a regular expression (e.g. ``'\\.cpu_s$'``: CPU times,
steadier than wall times on a shared machine). Exit 0: no regression; 1: some; 2: no
figure in common, or unreadable input. Compare runs from the same kind of machine.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    baseline: float
    new: float
    ratio: float
    regressed: bool


def _floor(name: str, floor: float) -> float:
    return floor if name.endswith("_s") else 0.0


def compare(
    new: dict[str, float],
    baseline: dict[str, float],
    threshold: float = 1.2,
    floor: float = 0.001,
    only: str | None = None,
) -> list[Row]:
    """A row for each figure in both maps (matching ``only``), sorted by name."""
    keep = re.compile(only) if only else None
    rows = []
    for name in sorted(new.keys() & baseline.keys()):
        if keep and not keep.search(name):
            continue
        old, now = baseline[name], new[name]
        ratio = now / old if old > 0 else (1.0 if now == old else float("inf"))
        regressed = ratio > threshold and now - old > _floor(name, floor)
        rows.append(Row(name, old, now, ratio, regressed))
    return rows


def text(rows: list[Row], threshold: float, verbose: bool) -> str:
    shown = rows if verbose else [r for r in rows if r.regressed]
    lines = [f"{'figure':<60} {'baseline':>12} {'new':>12} {'ratio':>7}"]
    lines += [
        f"{r.name:<60} {r.baseline:>12.6g} {r.new:>12.6g} {r.ratio:>6.2f}x"
        + ("  REGRESSED" if r.regressed else "")
        for r in shown
    ]
    bad = sum(r.regressed for r in rows)
    lines.append(f"{len(rows)} figures compared, {bad} regressed above {threshold}x")
    return "\n".join(lines)


def load_figures(path: str) -> dict[str, float]:
    with open(path) as f:
        return json.load(f)["figures"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("new")
    p.add_argument("baseline")
    p.add_argument(
        "--threshold", type=float, default=1.2, help="largest allowed new/baseline (1.2)"
    )
    p.add_argument(
        "--floor", type=float, default=0.001, help="seconds a time may grow regardless (0.001)"
    )
    p.add_argument("--only", help="compare only figures whose name matches this regular expression")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="show every figure, not only regressions"
    )
    args = p.parse_args(argv)
    try:
        rows = compare(
            load_figures(args.new),
            load_figures(args.baseline),
            args.threshold,
            args.floor,
            args.only,
        )
    except (OSError, ValueError, KeyError) as err:
        print(f"compare: cannot read the reports: {err!r}", file=sys.stderr)
        return 2
    if not rows:
        print("compare: no figure in common", file=sys.stderr)
        return 2
    print(text(rows, args.threshold, args.verbose))
    return 1 if any(r.regressed for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
