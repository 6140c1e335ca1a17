"""`tribuild build --dump-ir`: the optimised IR of every instance of each target, printed as
the fixture's expected text for each -O level (fixtures/dump_ir/expected-O<level>.txt), the
same for any --jobs; nothing is written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.driver.conftest import HERE

FIXTURE = HERE / "fixtures" / "dump_ir"


@pytest.fixture
def project(tmp_path) -> Path:
    return Path(
        shutil.copytree(FIXTURE, tmp_path / "dump_ir", ignore=shutil.ignore_patterns("expected-*"))
    )


@pytest.mark.parametrize("level", ["0", "2"])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_dump_ir_prints_the_expected_text(cli, project, level, jobs):
    code, out, err = cli(["build", "-q", "--dump-ir", f"-O{level}", "-j", jobs], project)
    assert code == 0, err
    assert out == (FIXTURE / f"expected-O{level}.txt").read_text()
    assert not (project / "out").exists()


def test_dump_ir_of_one_target_and_of_a_failing_one(cli, project):
    code, out, _ = cli(["build", "-q", "--dump-ir", "-O0", "cat"], project)
    expected = (FIXTURE / "expected-O0.txt").read_text()
    assert code == 0 and out == expected[expected.index("# ==> cat:") :]
    source = project / "models" / "cat.tri"
    source.write_text(source.read_text().replace("concat([fc(x), x], dim=1)", "fc(x)"))
    code, out, err = cli(["build", "-q", "--dump-ir", "-O0"], project)
    assert code == 1 and "cat" in err
    assert out == expected[: expected.index("# ==> cat:")]


def test_dump_ir_excludes_the_other_dumps(cli, project):
    code, _, err = cli(["build", "--dump-ir", "--dump-code"], project)
    assert code == 2 and "not allowed with" in err
