"""The models measured and the full pipeline run on one of them, in this process.

Terms:
- *zoo copy*: models/ and Tribuild.toml copied to a scratch folder, plus DenseNet-201
  (``models/densenet201.tri``, written from densenet.tri: the zoo's DenseNet-121 fixes its
  block sizes (6, 12, 24, 16) in the layer's body, so DenseNet-201's (6, 12, 48, 32) cannot
  be had from construction arguments) and its target. Every measurement runs on a copy, so
  edits never touch the repository.
- *compile*: the full pipeline of one target on a database: ``load_sources`` (read the
  entry's import closure), ``target_build`` (front end, lowering, optimization, module and
  kernel code generation) and the write of its files into an output folder
  (``write_changed``: only changed bytes, one ``os.sync`` per batch, as the driver does).
- *stage*: a group of queries (``STAGES``); its time is the sum of its queries' own seconds
  from ``db.stats()``. ``write`` is timed by the clock; ``engine + I/O`` is what is left of
  the wall time (reading files, memo lookups, dependency validation).
- *lines*: the lines of every file of a target's import closure.
"""

from __future__ import annotations

import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import bench_frontend
from benchmarks.report.timing import summary
from tribuild.config.load import Target, load_config
from tribuild.driver.depfile import import_closure
from tribuild.driver.outputs import resolve, write_changed
from tribuild.driver.sources import load_sources
from tribuild.engine import Database
from tribuild.queries.codegen import target_build
from tribuild.queries.inputs import source_text

REPO = Path(__file__).resolve().parents[2]
_FRONT = bench_frontend.STAGES
STAGES = {
    "lex": _FRONT["lex"],
    "parse": _FRONT["parse"],
    "check": _FRONT["names"] + _FRONT["check"] + _FRONT["instances"] + ("item_refs", "const_cycle"),
    "lower": ("ir",),
    "optimize": ("optimized_ir",),
    "pytorch codegen": ("module_source", "target_build"),
    "kernel codegen": ("kernel_source",),
}
STAGE_COLUMNS = tuple(STAGES) + ("write", "other queries", "engine + I/O")
# densenet.tri -> densenet201.tri: (old, new), each found exactly once.
DENSENET201 = (
    ("DenseNet-121", "DenseNet-201"),
    ("layer DenseNet121(", "layer DenseNet201("),
    ("DenseBlock(8 * growth, 24, growth)", "DenseBlock(8 * growth, 48, growth)"),
    ("Transition(32 * growth)", "Transition(56 * growth)"),
    ("DenseBlock(16 * growth, 16, growth)", "DenseBlock(28 * growth, 32, growth)"),
    ("BatchNorm2d(32 * growth)", "BatchNorm2d(60 * growth)"),
    ("Linear(32 * growth, num_classes)", "Linear(60 * growth, num_classes)"),
)
DENSENET201_TARGET = """
[targets.densenet201]
entry = "models/densenet201.tri:DenseNet201"
args = { growth = 32, num_classes = 1000 }
input = [1, 3, 224, 224]
"""


@dataclass(frozen=True)
class Zoo:
    root: str
    targets: tuple[Target, ...]

    def target(self, name: str) -> Target:
        return next(t for t in self.targets if t.name == name)


def densenet201_text(densenet121: str) -> str:
    text = densenet121
    for old, new in DENSENET201:
        if text.count(old) != 1:
            raise ValueError(f"densenet.tri changed: `{old}` is not there exactly once")
        text = text.replace(old, new)
    return (
        "# Written by benchmarks/report from densenet.tri: blocks of 6, 12, 48 and 32 layers\n"
        "# (k = 32: 64, 256, 128, 512, 256, 1792, 896, 1920 channels).\n" + text
    )


def make_zoo(dest: Path) -> Zoo:
    """A zoo copy under ``dest`` (created)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "models", dest / "models")
    models = dest / "models"
    (models / "densenet201.tri").write_text(densenet201_text((models / "densenet.tri").read_text()))
    (dest / "Tribuild.toml").write_text((REPO / "Tribuild.toml").read_text() + DENSENET201_TARGET)
    config = load_config(dest / "Tribuild.toml")
    return Zoo(str(dest), config.targets)


def compile_target(db: Database, root: str, t: Target, opt: str, out_dir: str) -> dict:
    """The full pipeline of ``t`` on ``db``; figures besides the clock: stage times (ms),
    queries executed, files written."""
    before = db.stats()
    with db.log() as log:
        start = time.perf_counter()
        load_sources(db, root, (t.entry_path,))
        built = target_build(db, t.name, t.entry_path, t.entry_layer, t.args, t.input, opt)
        if not built.files:
            raise RuntimeError(
                f"{t.name} -O{opt} built nothing: {built.problem} {built.diagnostics[:3]}"
            )
        compiled = time.perf_counter()
        written = write_changed({resolve(out_dir, f.relpath): f.text.encode() for f in built.files})
        end = time.perf_counter()
    stages = bench_frontend.stage_seconds(before, db.stats(), STAGES)
    stages["write"] = (end - compiled) * 1e3
    stages["engine + I/O"] = (end - start) * 1e3 - sum(stages.values())
    return {"stages_ms": stages, "executed": len(log.executed), "written": len(written)}


def lines_of(db: Database, entry_path: str) -> int:
    """Lines of the import closure of ``entry_path`` (sources must be loaded)."""
    return sum((source_text(db, p).text or "").count("\n") for p in import_closure(db, entry_path))


def summarize(runs: list[tuple]) -> dict:
    """The summary of ``(sample, compile_target figures)`` runs, with median stage times and
    queries executed, and the files written by the first run."""
    figures = [f for _, f in runs]
    return summary([s for s, _ in runs]) | {
        "stages_ms": {
            k: statistics.median(f["stages_ms"][k] for f in figures)
            for k in figures[0]["stages_ms"]
        },
        "executed": statistics.median(f["executed"] for f in figures),
        "written": figures[0]["written"],
    }
