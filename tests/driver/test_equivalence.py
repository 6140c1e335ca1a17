"""Byte-identical outputs: whatever --jobs is, and incremental builds (in one process and
across fresh processes) equal to a clean build of the same sources, under random edits."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tests.driver.conftest import HERE, snapshot
from tribuild.driver.build import Request, build
from tribuild.driver.session import Project


def _build(root: Path, jobs: int = 1) -> dict[str, bytes]:
    result = build(Project.discover(str(root)), Request(jobs=jobs))
    assert not result.failed or all(t.diagnostics for t in result.failed)
    return {k: v for k, v in snapshot(root / "out").items()}


def test_jobs_1_and_jobs_2_give_the_same_bytes(mini, tmp_path):
    other = Path(shutil.copytree(mini, tmp_path / "mini2"))
    assert _build(mini, jobs=1) == _build(other, jobs=2)


def test_with_workers_the_workers_write_the_outputs_and_the_report_counts_them(mini, tmp_path):
    other = Path(shutil.copytree(mini, tmp_path / "mini2"))
    one = build(Project.discover(str(mini)), Request(jobs=1))
    two = build(Project.discover(str(other)), Request(jobs=2))
    assert one.written_early == () and two.written_early == two.report.written
    assert (two.report.written, two.report.unchanged) == (one.report.written, one.report.unchanged)
    assert two.explain == one.explain  # why each was written, wherever it was built


def test_with_workers_a_failing_target_keeps_its_previous_outputs(mini):
    build(Project.discover(str(mini)), Request(jobs=1))
    before = snapshot(mini / "out")
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("fc2(relu(fc1(x)))", "fc2(x)"))
    shutil.rmtree(mini / ".tribuild-cache")  # a clean build: workers run
    result = build(Project.discover(str(mini)), Request(jobs=2))
    assert [t.name for t in result.failed] == ["mlp"]
    assert not any(rel.startswith("mlp") for rel in result.written_early)
    assert snapshot(mini / "out") == before


@pytest.mark.slow
def test_jobs_1_and_jobs_3_give_the_same_bytes_on_the_zoo(zoo, tmp_path):
    other = Path(shutil.copytree(zoo, tmp_path / "zoo2"))
    assert _build(zoo, jobs=1) == _build(other, jobs=3)


# Edits that keep the program valid: (file, old, new).
EDITS = [
    ("models/lib/blocks.tri", "return relu(fc(x))", "return fc(x)"),
    ("models/lib/blocks.tri", "# Blocks shared", "# Blocks, shared"),
    ("models/net.tri", "width: int = 32", "width: int = 40"),
    (
        "models/net.tri",
        "let head = Linear(width, classes)",
        "let head = TernaryLinear(width, classes)",
    ),
    ("models/mlp.tri", "hidden: int = 16", "hidden: int = 24"),
    ("models/mlp.tri", "fc2(relu(fc1(x)))", "fc2(fc1(x))"),
]


def _apply(root: Path, steps: list[int]) -> None:
    for step in steps:
        path, old, new = EDITS[step]
        file = root / path
        text = file.read_text()
        file.write_text(text.replace(old, new) if old in text else text.replace(new, old))


@settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.lists(st.integers(0, len(EDITS) - 1), min_size=1, max_size=3), min_size=1, max_size=3
    )
)
def test_incremental_equals_clean(tmp_path_factory, batches):
    _check_edits(tmp_path_factory.mktemp("inc"), batches)


@pytest.mark.slow
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.lists(st.integers(0, len(EDITS) - 1), min_size=1, max_size=4), min_size=1, max_size=6
    )
)
def test_incremental_equals_clean_slow(tmp_path_factory, batches):
    _check_edits(tmp_path_factory.mktemp("inc"), batches)


def _check_edits(base: Path, batches: list[list[int]]) -> None:
    """After each batch, an incremental build (fresh database from the persistent cache,
    as a new process would) and a clean build in a fresh copy give the same outputs."""
    work = Path(shutil.copytree(HERE / "fixtures" / "mini", base / "work"))
    _build(work)
    for n, batch in enumerate(batches):
        _apply(work, batch)
        incremental = _build(work, jobs=1 + n % 2)
        clean = Path(shutil.copytree(work / "models", base / f"clean{n}" / "models")).parent
        shutil.copy(work / "Tribuild.toml", clean / "Tribuild.toml")
        assert incremental == _build(clean)
