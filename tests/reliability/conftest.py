"""Fixtures of the reliability tests: a fresh small project, the reference outputs of each
version (one clean build per version per test process)."""

from __future__ import annotations

import pytest

from tests.reliability.project import VERSIONS, make_project, reference


@pytest.fixture(scope="session")
def references(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    folder = tmp_path_factory.mktemp("references")
    refs = {v: reference(folder, v) for v in VERSIONS}
    assert refs["a"] != refs["b"]
    return refs


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "project", "a")


@pytest.fixture
def cli(monkeypatch, capsys):
    """``cli(args, cwd) -> (exit code, stdout, stderr)``: the CLI run in this process."""
    from tribuild.cli import main

    def run(args, cwd):
        monkeypatch.chdir(cwd)
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run
