"""A scripted sequence of edits under a running watch (real files, real watchdog observer):
after each step the outputs equal those of a clean `tribuild build` of the same sources,
byte for byte (where that build fails on a configuration error, the watch keeps the outputs
it had; where a target fails, that target's previous outputs stay), and the queries that
re-ran are the expected ones (fixtures/steps.json; ``TRIBUILD_UPDATE_GOLDEN=1`` records them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.watch.conftest import HERE, REPO, clean_build, save, snapshot
from tribuild.driver.outputs import RECORD

STEPS_FILE = HERE / "fixtures" / "steps.json"
STEPS = json.loads(STEPS_FILE.read_text())
UPDATE = os.environ.get("TRIBUILD_UPDATE_GOLDEN") == "1"


def _apply(root: Path, step: dict) -> None:
    path = root / step["file"]
    if step.get("delete"):
        path.unlink()
    elif step.get("restore"):
        save(path, (REPO / step["file"]).read_bytes(), step.get("atomic", False))
    elif "bytes" in step:
        save(path, bytes.fromhex(step["bytes"]), step.get("atomic", False))
    else:
        text = path.read_text()
        assert step["old"] in text, step["name"]
        save(path, text.replace(step["old"], step["new"], 1).encode(), step.get("atomic", False))


def test_each_step_gives_the_outputs_of_a_clean_build(project, watch, tmp_path, monkeypatch):
    session = watch()
    first = session.events.next("rebuild")
    assert first["ok"] and "target_build" in first["executed"]
    assert list(first["phases"]) == [
        "late",
        "read sources",
        "build units",
        "collect outputs",
        "debounce",
        "write outputs",
    ]
    for step in STEPS:
        before = snapshot(project / "out")
        _apply(project, step)
        if "problem" in step:
            assert step["problem"] in session.events.next("problem")["message"], step["name"]
        if "fixed" in step:  # a fixed Tribuild.toml is said to be, as fixed errors are
            assert session.events.next("config_fixed")["path"] == step["fixed"], step["name"]
        if step.get("rebuild", True):
            event = session.events.next("rebuild")
            assert event["failed"] == step.get("failed", []), step["name"]
            if UPDATE:
                step["ran"] = sorted(event["executed"])
            assert sorted(event["executed"]) == sorted(step["ran"]), step["name"]
        code, clean = clean_build(project, tmp_path / "clean", monkeypatch)
        watched = snapshot(project / "out")
        assert code == step.get("clean_exit", 1 if step.get("failed") else 0), step["name"]
        if code == 2:  # a configuration error: nothing is built or written
            assert not clean and watched == before, step["name"]
        elif code == 1:  # a failed target keeps its previous outputs and record
            clean.pop(RECORD)
            assert {rel: watched.get(rel) for rel in clean} == clean, step["name"]
        else:
            assert watched == clean, step["name"]
    if UPDATE:
        STEPS_FILE.write_text("[\n" + ",\n".join(" " + json.dumps(s) for s in STEPS) + "\n]\n")
