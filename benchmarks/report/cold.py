"""Cold compiles in this process: every model at every -O level, stages and traced memory.

Terms:
- *cold compile*: ``compile_target`` on a fresh ``Database`` into an empty output folder
  (nothing memoized; the compiler's modules already imported, as in a notebook or a watch
  loop; a fresh process adds its start-up, see ``processes``).
- *runs*: every (model, level) pair takes its turn in each repeat (round-robin).
- *traced peak*: the largest memory traced by ``tracemalloc`` during one more cold compile at
  -O2, run apart from the timed ones (tracing slows Python down).
- *instances*: the distinct layer instances the target reaches (identical blocks share one;
  this, not the nominal depth, is what a cold compile's work grows with).
"""

from __future__ import annotations

import tempfile
import tracemalloc

from benchmarks.report.timing import round_robin, timed
from benchmarks.report.zoo import Zoo, compile_target, lines_of, summarize
from tribuild.driver.sources import load_sources
from tribuild.engine import Database
from tribuild.queries.targets import reached_instances, target_report

LEVELS = ("0", "1", "2", "3", "s")


def one_cold(zoo: Zoo, name: str, level: str, scratch: str) -> tuple:
    t = zoo.target(name)
    db = Database()
    with tempfile.TemporaryDirectory(dir=scratch) as out:
        sample, figures = timed(lambda: compile_target(db, zoo.root, t, level, out))
    return sample, figures


def traced_peak(zoo: Zoo, name: str, scratch: str) -> int:
    t = zoo.target(name)
    tracemalloc.start()
    try:
        with tempfile.TemporaryDirectory(dir=scratch) as out:
            compile_target(Database(), zoo.root, t, "2", out)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def shape(zoo: Zoo, name: str) -> dict:
    """Lines and distinct instances of a target."""
    t, db = zoo.target(name), Database()
    load_sources(db, zoo.root, (t.entry_path,))
    report = target_report(db, t.entry_path, t.entry_layer, t.args, t.input)
    return {
        "lines": lines_of(db, t.entry_path),
        "instances": len(reached_instances(db, report.root).instances),
    }


def measure(zoo: Zoo, names: list[str], repeats: int, scratch: str, levels=LEVELS) -> dict:
    """Per model: per level the summary of its cold compiles and median stage times; at -O2
    also the traced peak; and the model's lines and instances."""
    pairs = [(n, lv) for n in names for lv in levels]
    runs = round_robin(repeats, pairs, lambda pair, _: one_cold(zoo, *pair, scratch))
    out = {}
    for n in names:
        row = shape(zoo, n)
        row["levels"] = {lv: summarize(runs[(n, lv)]) for lv in levels}
        row["traced_peak_bytes"] = traced_peak(zoo, n, scratch)
        out[n] = row
    return out
