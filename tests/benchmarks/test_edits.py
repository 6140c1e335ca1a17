"""The suite's inputs stay valid as the zoo changes: every edit applies to every model it is
meant for and keeps the program valid, and DenseNet-201 checks clean."""

from pathlib import Path

import pytest

from benchmarks.report import edits
from benchmarks.report.zoo import make_zoo
from tribuild.driver.sources import load_sources
from tribuild.engine import Database
from tribuild.queries.targets import target_report


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    return make_zoo(tmp_path_factory.mktemp("bench") / "zoo")


def _diagnostics(zoo, name):
    t, db = zoo.target(name), Database()
    load_sources(db, zoo.root, (t.entry_path,))
    report = target_report(db, t.entry_path, t.entry_layer, t.args, t.input)
    return report.problem, [d.code for d in report.diagnostics]


def test_densenet201_is_a_target_and_checks_clean(zoo):
    assert _diagnostics(zoo, "densenet201") == (None, [])


NAMES = ("mnist_mlp", "resnet18", "resnet152", "mobilenet_v2", "densenet201", "vit")
TEXT_EDITS = ("comment edit", "body edit", "signature edit", "add a layer")


@pytest.mark.parametrize(
    "name, scenario", [(n, s) for n in NAMES for s in TEXT_EDITS if edits.applies(n, s)]
)
def test_edit_applies_and_keeps_the_program_valid(zoo, name, scenario):
    path, change = edits.edit(scenario, name)
    file = Path(zoo.root) / path
    original = file.read_text()
    assert change(original) != original
    assert edits.with_edit(zoo.root, scenario, name, lambda: _diagnostics(zoo, name)) == (None, [])
    assert file.read_text() == original
