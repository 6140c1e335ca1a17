"""Golden tests of the checker: tests/fixtures/check/*.tri against their .expected files.

Each expected file holds one line per diagnostic, ``line:col: CODE: message``, in the order
the checker reports them (generic checks item by item, then default instances). Regenerate
with ``TRIBUILD_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from test_check_support import load_program, run_program

from tribuild.diagnostics import CODES
from tribuild.lang.check import codes as check_codes
from tribuild.lang.check.checker import check_item
from tribuild.lang.check.values import format_value
from tribuild.lang.signature import signature_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "check"
CASES = sorted(FIXTURES.glob("*.tri"))


def rendered(case: Path) -> str:
    program = load_program({case.name: case.read_text()})
    return "".join(line.split(":", 1)[1] + "\n" for line in run_program(program))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_golden(case: Path) -> None:
    expected_file = case.with_suffix(".expected")
    actual = rendered(case)
    if os.environ.get("TRIBUILD_UPDATE_GOLDEN"):
        expected_file.write_text(actual)
    assert actual == expected_file.read_text()


def test_good_programs_check_clean() -> None:
    assert rendered(FIXTURES / "good_layers.tri") == ""


def test_every_checker_code_has_a_golden_case() -> None:
    """E0410 (example input) needs a target, not a program: test_check_api covers it."""
    mine = {code for code in CODES if re.fullmatch(r"E0[345]\d\d", code)} - {
        check_codes.EXAMPLE_INPUT
    }
    seen = set()
    for expected in FIXTURES.glob("*.expected"):
        seen |= set(re.findall(r": (E0[345]\d\d):", expected.read_text()))
    assert mine - seen == set()


def test_every_code_is_documented_with_an_example() -> None:
    """README promises docs/language.md lists every code: each registered code has a row in
    its tables (code, meaning, a non-empty example)."""
    import tribuild.driver.build  # noqa: F401  (registers the codes of every stage)
    import tribuild.queries.lower  # noqa: F401

    docs = (Path(__file__).parents[2] / "docs" / "language.md").read_text()
    rows = {
        m.group(1): m.group(3)
        for m in re.finditer(r"^\| (E\d{4}) \| ([^|]+) \| (.*) \|$", docs, re.M)
    }
    assert sorted(c for c in CODES if c not in rows) == []
    assert sorted(c for c, example in rows.items() if not example.strip()) == []


def test_a_loop_over_alike_blocks_checks_each_distinct_step_once() -> None:
    """The trace (what an editor's hover reads) records each step the checker ran: over 40
    alike blocks, a first block that changes the width and the step after it, which meets
    the state it leaves; the other 38 repeat that step and are skipped
    (``body._loop_state``). tests/fixtures/check/loops.tri shows the findings unchanged."""
    text = """layer Stage() {
    let blocks = [Linear(i == 0 ? 8 : 4, 4) for i in 0..40]

    fn forward(x: Tensor<float32, [N, 8]>) -> Tensor<float32, [N, 4]> {
        for b in blocks {
            x = b(x)
        }
        return x
    }
}
"""
    program = load_program({"stage.tri": text})
    (path, item_id, item), *_ = program.order
    sig, _ = signature_of(item, path, item_id)
    trace: list = []
    assert check_item(item, sig, path, item_id, program.env, None, trace) == ()
    steps = [format_value(value) for _, name, value in trace if name == "b"]
    assert len(steps) == 2 and steps[0] != steps[1], steps
    widths = [format_value(value) for _, name, value in trace if name == "x"]
    assert widths == [
        "Tensor<float32, [N, 8]>",
        "Tensor<float32, [N, 4]>",
        "Tensor<float32, [N, 4]>",
    ]
