"""The model zoo checks clean, and its broken copies give the errors their EXPECTED.txt describe.

Every models/**/*.tri and examples/seed_style/*.tri item checks clean generically, and every
layer whose construction parameters all have defaults instantiates and checks clean. Each
tests/fixtures/zoo_broken/<case> gives the diagnostics in tests/fixtures/check/zoo_broken/
<case>.expected (regenerate with TRIBUILD_UPDATE_GOLDEN=1), whose codes are stated here
from the EXPECTED.txt descriptions.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_check_support import load_dir, run_program

ROOT = Path(__file__).parent.parent.parent
BROKEN = ROOT / "tests" / "fixtures" / "zoo_broken"
GOLDEN = ROOT / "tests" / "fixtures" / "check" / "zoo_broken"

# case -> the one code EXPECTED.txt asks for; missing_import's error is the import
# resolver's (E02xx), so the checker must stay silent there.
EXPECTED_CODES = {
    "data_dependent_if": ["E0308"],
    "missing_import": [],
    "non_trit_literal": ["E0303"],
    "residual_mismatch": ["E0403"],
    "syntax_error": ["E0100"],
    "unknown_name": ["E0307"],
    "wrong_channels": ["E0401"],
}


@pytest.mark.parametrize("root", ["models", "examples/seed_style"])
def test_zoo_checks_clean(root: str) -> None:
    program = load_dir(ROOT / root)
    assert program.items, f"no items found under {root}"
    assert run_program(program) == []


@pytest.mark.parametrize("case", sorted(EXPECTED_CODES))
def test_zoo_broken(case: str) -> None:
    lines = run_program(load_dir(BROKEN / case))
    assert [line.split(": ")[1] for line in lines] == EXPECTED_CODES[case]
    golden = GOLDEN / f"{case}.expected"
    actual = "".join(line + "\n" for line in lines)
    if os.environ.get("TRIBUILD_UPDATE_GOLDEN"):
        golden.write_text(actual)
    assert actual == golden.read_text()


def test_every_broken_case_is_covered() -> None:
    assert sorted(p.name for p in BROKEN.iterdir() if p.is_dir()) == sorted(EXPECTED_CODES)
