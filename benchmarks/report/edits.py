"""Cache scenarios: one change to a compiled model, then the rebuild, in this process.

Terms:
- *scenario*: the change before the rebuild (``SCENARIOS``):
  ``no change``; ``comment edit`` (a comment line at the top of the *edit file*); ``body
  edit`` (``let unused_k = 0`` in the *edit layer*'s forward, bench_frontend's edit);
  ``signature edit`` (a defaulted parameter appended to the edit layer's parameters);
  ``add a layer`` (ResNets only: a ``TernaryLinear(num_classes, num_classes)`` after the
  classifier in resnet.tri); ``-O change`` (the compiled model rebuilt at -O0 instead of -O2).
- *edit file / edit layer*: a block the model instantiates many times
  (``bench_frontend.EDIT_LAYER``), so an edit reaches most of the model.
- *rebuild*: ``compile_target`` on the database that compiled the model (sources re-read
  from disk, outputs written only where their bytes change). Each timed rebuild follows one
  edit written to the zoo copy; the original text is then put back and rebuilt, untimed, so
  every timed run starts from the same state. A ``-O change`` run starts from a fresh cold
  compile at -O2 (once compiled at -O0, a database would answer -O0 from its memos).
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from benchmarks import bench_frontend
from benchmarks.report.timing import timed
from benchmarks.report.zoo import Zoo, compile_target, summarize
from tribuild.engine import Database

SCENARIOS = ("no change", "comment edit", "body edit", "signature edit", "add a layer", "-O change")
EDIT_LAYER = bench_frontend.EDIT_LAYER | {"densenet201": bench_frontend.EDIT_LAYER["densenet121"]}
RESNET = "models/resnet.tri"
ADD_LAYER = (  # (old, new) in resnet.tri
    (
        "    let fc = Linear(bottleneck ? 2048 : 512, num_classes)\n",
        "    let fc = Linear(bottleneck ? 2048 : 512, num_classes)\n"
        "    let extra = TernaryLinear(num_classes, num_classes)\n",
    ),
    (
        "return fc(flatten(adaptive_avg_pool2d(x, 1), 1))",
        "return extra(fc(flatten(adaptive_avg_pool2d(x, 1), 1)))",
    ),
)


def signature_edit(text: str, layer: str) -> str:
    """``text`` with ``unused_sig: int = 0`` appended to ``layer``'s parameters."""
    start = text.index(f"layer {layer}(")
    close = text.index(") {", start)
    return text[:close] + ", unused_sig: int = 0" + text[close:]


def add_layer(text: str) -> str:
    for old, new in ADD_LAYER:
        if text.count(old) != 1:
            raise ValueError(f"resnet.tri changed: `{old.strip()}` is not there exactly once")
        text = text.replace(old, new)
    return text


def applies(name: str, scenario: str) -> bool:
    return scenario != "add a layer" or re.fullmatch(r"resnet\d+", name) is not None


def edit(scenario: str, name: str) -> tuple[str, callable] | None:
    """(file, text -> edited text) of a text scenario for model ``name``; None otherwise."""
    path, layer = EDIT_LAYER[name]
    return {
        "comment edit": (path, lambda t: "# an edit\n" + t),
        "body edit": (path, lambda t: bench_frontend.body_edit(t, layer)),
        "signature edit": (path, lambda t: signature_edit(t, layer)),
        "add a layer": (RESNET, add_layer),
    }.get(scenario)


def with_edit(root: str, scenario: str, name: str, action):
    """Run ``action`` with the scenario's edit written to the zoo copy at ``root``; put the
    original text back afterwards. Returns the action's result."""
    change = edit(scenario, name)
    if change is None:
        return action()
    file = Path(root) / change[0]
    original = file.read_text()
    file.write_text(change[1](original))
    try:
        return action()
    finally:
        file.write_text(original)


class Compiled:
    """One model compiled at -O2 on its own database, into its own output folder."""

    def __init__(self, zoo: Zoo, name: str, scratch: str):
        self.zoo, self.target = zoo, zoo.target(name)
        self.out = tempfile.mkdtemp(dir=scratch)
        self.db = Database()
        self.rebuild("2")

    def rebuild(self, level: str) -> dict:
        return compile_target(self.db, self.zoo.root, self.target, level, self.out)

    def scenario(self, scenario: str) -> tuple:
        """The timed rebuild after ``scenario``; the state is restored afterwards."""
        if scenario == "-O change":
            fresh = Compiled(self.zoo, self.target.name, str(Path(self.out).parent))
            return timed(lambda: fresh.rebuild("0"))
        result = with_edit(
            self.zoo.root, scenario, self.target.name, lambda: timed(lambda: self.rebuild("2"))
        )
        self.rebuild("2")
        return result


def measure(zoo: Zoo, names: list[str], repeats: int, scratch: str) -> dict:
    """Per model, per scenario: the summary of its timed rebuilds, median stage times and
    the queries executed. Models take turns within each scenario and repeat."""
    compiled = {n: Compiled(zoo, n, scratch) for n in names}
    runs: dict = {n: {s: [] for s in SCENARIOS if applies(n, s)} for n in names}
    for _ in range(repeats):
        for s in SCENARIOS:
            for n in names:
                if applies(n, s):
                    runs[n][s].append(compiled[n].scenario(s))
    return {n: {s: summarize(rs) for s, rs in per.items()} for n, per in runs.items()}
