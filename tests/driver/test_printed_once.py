"""A diagnostic of a file that several failing targets share is printed once, by `build`
(first failure or --keep-going) and by `watch` (its events carry each diagnostic once)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.driver.conftest import HERE
from tests.watch.conftest import Session

BROKEN = ("return relu(fc(x))", "return rleu(fc(x))")  # in lib/blocks.tri, reached by 3 targets


def _broken_mini(tmp_path: Path) -> Path:
    root = Path(shutil.copytree(HERE / "fixtures" / "mini", tmp_path / "mini"))
    blocks = root / "models" / "lib" / "blocks.tri"
    blocks.write_text(blocks.read_text().replace(*BROKEN))
    return root


def test_build_prints_a_shared_diagnostic_once(tmp_path, cli):
    root = _broken_mini(tmp_path)
    for args in (["build"], ["build", "--keep-going"]):
        code, _, err = cli(args, root)
        assert code == 1, err
        assert err.count("error[E0307]: unknown name `rleu`") == 1, err
        assert "3 of 4 targets failed (net, wide, twin)" in err, err


def test_watch_reports_a_shared_diagnostic_once(tmp_path):
    session = Session(_broken_mini(tmp_path))
    try:
        event = session.events.next("rebuild")
    finally:
        session.stop()
    assert sorted(event["failed"]) == ["net", "twin", "wide"]
    assert [d["code"] for d in event["diagnostics"]] == ["E0307"], event["diagnostics"]
