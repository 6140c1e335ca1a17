"""benchmarks/compare.py: which figures regress, and its exit codes, on crafted reports."""

import json

import pytest

from benchmarks import compare

# (baseline, new, threshold, floor, regressed)
CASES = [
    ({"a.wall_s": 1.0}, {"a.wall_s": 1.19}, 1.2, 0.001, False),
    ({"a.wall_s": 1.0}, {"a.wall_s": 1.21}, 1.2, 0.001, True),
    ({"a.wall_s": 1.0}, {"a.wall_s": 1.21}, 1.5, 0.001, False),
    ({"a.wall_s": 1.0}, {"a.wall_s": 0.5}, 1.2, 0.001, False),
    # below the floor: 0.2 ms -> 0.5 ms is 2.5x but only 0.3 ms
    ({"a.wall_s": 0.0002}, {"a.wall_s": 0.0005}, 1.2, 0.001, False),
    ({"a.wall_s": 0.0002}, {"a.wall_s": 0.0005}, 1.2, 0.0, True),
    # the floor applies to times only
    ({"m.rss_bytes": 100.0}, {"m.rss_bytes": 130.0}, 1.2, 0.001, True),
    ({"r.O2.ratio": 1.0}, {"r.O2.ratio": 1.1}, 1.05, 0.001, True),
    ({"a.wall_s": 0.0}, {"a.wall_s": 0.0}, 1.2, 0.0, False),
]


@pytest.mark.parametrize("baseline, new, threshold, floor, regressed", CASES)
def test_threshold(baseline, new, threshold, floor, regressed):
    [row] = compare.compare(new, baseline, threshold, floor)
    assert row.regressed is regressed
    if baseline[row.name]:
        assert row.ratio == pytest.approx(new[row.name] / baseline[row.name])


def test_only_common_figures_matching_the_filter_are_compared():
    rows = compare.compare(
        {"a.cpu_s": 3.0, "a.wall_s": 3.0, "new_only.cpu_s": 1.0},
        {"a.cpu_s": 1.0, "a.wall_s": 1.0, "old_only.cpu_s": 1.0},
        only=r"\.cpu_s$",
    )
    assert [(r.name, r.regressed) for r in rows] == [("a.cpu_s", True)]


def _write(path, figures):
    path.write_text(json.dumps({"figures": figures}))
    return str(path)


@pytest.mark.parametrize(
    "new, expected", [({"a.wall_s": 1.0}, 0), ({"a.wall_s": 2.0}, 1), ({"b.wall_s": 2.0}, 2)]
)
def test_exit_codes(tmp_path, capsys, new, expected):
    base = _write(tmp_path / "base.json", {"a.wall_s": 1.0})
    assert compare.main([_write(tmp_path / "new.json", new), base]) == expected
    if expected == 1:
        assert "REGRESSED" in capsys.readouterr().out


def test_unreadable_report_is_a_usage_error(tmp_path):
    (tmp_path / "bad.json").write_text("{}")
    assert compare.main([str(tmp_path / "bad.json"), str(tmp_path / "bad.json")]) == 2
