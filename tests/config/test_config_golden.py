"""Golden tests: every tests/fixtures/config/<case>.toml against <case>.expected.

``error_*`` cases must fail to load; their expected file is the exact rendered ConfigError.
``ok_*`` cases must load; their expected file lists the Config's fields, one per line, with
the fixture folder shown as ``<root>``. Regenerate with ``TRIBUILD_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tribuild.base.record import fields
from tribuild.config.load import Config, ConfigError, load_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "config"
CASES = sorted(path.stem for path in FIXTURES.glob("*.toml"))
CPU_COUNT = 6  # what os.cpu_count() reports during these tests, so that jobs = 0 is stable


def render_config(config: Config) -> str:
    lines = ["loaded"]
    for name in fields(Config):
        value = getattr(config, name)
        if name == "targets":
            lines += [f"target {target!r}" for target in value]
        else:
            lines.append(f"{name} = {value!r}".replace(str(FIXTURES), "<root>"))
    return "\n".join(lines) + "\n"


def outcome(case: str) -> str:
    try:
        return render_config(load_config(f"{case}.toml"))
    except ConfigError as error:
        return f"{error}\n"


@pytest.mark.parametrize("case", CASES)
def test_case_matches_golden(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES)  # errors then name the file as the user typed it: <case>.toml
    monkeypatch.setattr(os, "cpu_count", lambda: CPU_COUNT)
    actual = outcome(case)
    assert actual.startswith("loaded\n") == case.startswith("ok_"), actual
    golden = FIXTURES / f"{case}.expected"
    if os.environ.get("TRIBUILD_UPDATE_GOLDEN"):
        golden.write_text(actual, encoding="utf-8")
    assert actual == golden.read_text(encoding="utf-8")


def test_every_golden_has_its_case() -> None:
    goldens = sorted(path.stem for path in FIXTURES.glob("*.expected"))
    assert goldens == CASES
