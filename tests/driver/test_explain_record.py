"""The explanation record (``explain.json``): each distinct explanation stored once, merged
output by output across builds, and nothing read from a damaged file."""

from __future__ import annotations

import json

import pytest

from tribuild.driver import explain

A = ["target a:", "  target_build('a') ran", "    because it had never run"]
B = ["target b:", "  its queries were up to date"]
C = ["target b:", "  target_build('b') ran", "    because src/b.tri changed"]


def _record(cache, explanations):
    explain.record(str(cache), "/p", "/p/out", explanations)
    return json.loads((cache / explain.NAME).read_text())


def test_each_explanation_is_stored_once_and_replaced_per_output(tmp_path):
    data = _record(tmp_path, {"a.py": A, "kernels/a1.py": A, "b.py": B})
    assert sorted(data["why"]) == sorted([A, B])
    assert explain.load(str(tmp_path)) == {"out/a.py": A, "out/kernels/a1.py": A, "out/b.py": B}
    data = _record(tmp_path, {"b.py": C})
    assert sorted(data["why"]) == sorted([A, C])  # B is no output's any more
    assert explain.load(str(tmp_path)) == {"out/a.py": A, "out/kernels/a1.py": A, "out/b.py": C}


@pytest.mark.parametrize(
    "text, found",
    [
        ("", {}),
        ("[]", {}),
        ('{"out/a.py": ["flat, as before"]}', {}),
        (
            '{"why": [["x"], [1]], "outputs": {"out/a.py": 0, "out/b.py": 1, "out/c.py": 2, '
            '"out/d.py": true}}',
            {"out/a.py": ["x"]},
        ),
        ('{"why": "x", "outputs": {"out/a.py": 0}}', {}),
        ('{"why": [["x"]], "outputs": [0]}', {}),
    ],
)
def test_a_damaged_record_gives_only_what_is_whole(tmp_path, text, found):
    (tmp_path / explain.NAME).write_text(text)
    assert explain.load(str(tmp_path)) == found
