"""Scaling: cold compiles of generated projects, in this process, by lines, files and layers.

Terms:
- *synthetic project*: bench_build's generator: ``files`` files of ~400 lines, each with
  28 blocks of three layers (two ternary linears and a norm) chained by a network layer,
  one target per file, every block a distinct instance (widths differ).
- *deep file*: one generated file whose network chains ``blocks`` blocks: its *layers* are
  ``3 * blocks + 1`` (the head included). Its forward applies them one statement each
  (``x = b7(x)``): bench_build's single nested expression ``head(b27(...b0(x)))`` fails to
  lower (E0601) from about 38 calls deep.
- *project compile*: ``compile_target`` of every target of a project on one fresh database
  (files shared by targets are compiled once), the sizes taking turns in each repeat.
- *ms per line*: the median wall time of a project compile over its lines.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from benchmarks import bench_build
from benchmarks.report.processes import build, clear
from benchmarks.report.timing import round_robin, summary, timed
from benchmarks.report.zoo import compile_target
from tribuild.config.load import Target, load_config
from tribuild.engine import Database

SYNTHETIC_BLOCKS = 28  # blocks per file of bench_build.synthetic_file (its default)
DEEP_TOML = (
    '[project]\nname = "deep"\nsources = ["src"]\nout = "out"\n\n'
    '[targets.net00]\nentry = "src/net00.tri:Net0"\n'
)


def write_deep(dest: Path, blocks: int) -> int:
    """A one-file project at ``dest`` whose network chains ``blocks`` blocks; its lines."""
    chain = "".join(f"        x = b{j}(x)\n" for j in range(blocks)) + "        return head(x)\n"
    text = re.sub(
        r"        return head\(.*\)\n", lambda _: chain, bench_build.synthetic_file(0, blocks)
    )
    (dest / "src").mkdir(parents=True)
    (dest / "src" / "net00.tri").write_text(text)
    (dest / "Tribuild.toml").write_text(DEEP_TOML)
    return text.count("\n")


def compile_project(root: str, targets: tuple[Target, ...], scratch: str) -> tuple:
    db = Database()
    with tempfile.TemporaryDirectory(dir=scratch) as out:
        return timed(lambda: [compile_target(db, root, t, "2", out) for t in targets])[0]


def measure(kind: str, sizes: tuple[int, ...], repeats: int, scratch: str) -> list[dict]:
    """``kind`` "files" (synthetic projects of ``sizes`` files) or "layers" (deep files of
    ``sizes`` blocks): per size its lines, layers, files, the summary of its in-process
    project compiles, and one cold ``tribuild build -j 1`` process (wall, CPU, peak RSS)."""
    projects = {}
    for size in sizes:
        dest = Path(scratch) / f"{kind}-{size}"
        lines = (
            bench_build.write_synthetic(dest, size) if kind == "files" else write_deep(dest, size)
        )
        targets = load_config(dest / "Tribuild.toml").targets
        projects[size] = (str(dest), targets, lines)
    runs = round_robin(
        repeats, list(sizes), lambda size, _: compile_project(*projects[size][:2], scratch)
    )
    rows = []
    for size in sizes:
        root, targets, lines = projects[size]
        clear(root)
        files, blocks = (size, SYNTHETIC_BLOCKS) if kind == "files" else (1, size)
        row = {
            "files": files,
            "lines": lines,
            "layers": files * (3 * blocks + 1),
            "in_process": summary(runs[size]),
            "process": summary([build(root, "-j", "1")]),
        }
        row["ms_per_line"] = row["in_process"]["wall"]["median"] * 1e3 / lines
        rows.append(row)
    return rows
