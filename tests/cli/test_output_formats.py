"""`check` and `build` for machines: JSON that fits the documented schemas (docs/schemas/),
SARIF 2.1.0 that fits the OASIS schema, and GitHub Actions annotations."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.schemas import validate, validate_sarif
from tribuild.cli import main
from tribuild.cli.formats import _escape

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MINI = FIXTURES.parent / "driver" / "fixtures" / "mini"


@pytest.fixture
def broken(tmp_path) -> Path:
    """A project with one error (an unknown name with a did-you-mean) and one with another in
    a second file."""
    return Path(shutil.copytree(FIXTURES / "zoo_broken" / "unknown_name", tmp_path / "p"))


def run(args, cwd, monkeypatch, capsys):
    monkeypatch.chdir(cwd)
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_check_json_fits_its_schema(broken, monkeypatch, capsys):
    code, out, _ = run(["check", "--format", "json"], broken, monkeypatch, capsys)
    data = json.loads(out)
    validate("check", data)
    assert code == 1 and data["errors"] == 1 and data["diagnostics"][0]["code"] == "E0307"


def test_check_sarif_fits_the_sarif_schema(broken, monkeypatch, capsys):
    code, out, _ = run(["check", "--format", "sarif"], broken, monkeypatch, capsys)
    log = json.loads(out)
    validate_sarif(log)
    (result,) = log["runs"][0]["results"]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert code == 1 and result["ruleId"] == "E0307" and result["level"] == "error"
    assert (region["startLine"], region["startColumn"]) == (16, 16)
    assert log["runs"][0]["tool"]["driver"]["rules"] == [{"id": "E0307", "name": "E0307"}]


def test_a_clean_project_gives_an_empty_sarif_log_that_fits(tmp_path, monkeypatch, capsys):
    project = shutil.copytree(MINI, tmp_path / "mini")
    code, out, _ = run(["check", "--format", "sarif"], project, monkeypatch, capsys)
    log = json.loads(out)
    validate_sarif(log)
    assert code == 0 and log["runs"][0]["results"] == []


def test_github_annotations(broken, monkeypatch, capsys):
    code, out, err = run(["check", "--format", "github"], broken, monkeypatch, capsys)
    assert code == 1 and out == (
        "::error file=mlp.tri,line=16,col=16,endLine=16,endColumn=19,title=E0307::"
        "unknown name `fc4`%0Ahelp: did you mean `fc3`?\n"
    )
    assert "1 error" in err
    assert _escape("a:b,c%\r\n", True) == "a%3Ab%2Cc%25%0D%0A"
    assert _escape("a:b,c", False) == "a:b,c"


def test_build_json_fits_its_schema_failed_and_built(broken, tmp_path, monkeypatch, capsys):
    code, out, _ = run(["build", "--format", "json"], broken, monkeypatch, capsys)
    data = json.loads(out)
    validate("build", data)
    assert code == 1 and not data["ok"] and data["targets"][0]["diagnostics"][0]["line"] == 16
    project = shutil.copytree(MINI, tmp_path / "mini")
    code, out, _ = run(["build", "--format", "json"], project, monkeypatch, capsys)
    data = json.loads(out)
    validate("build", data)
    assert code == 0 and data["ok"] and "mlp.py" in data["written"]
    code, out, _ = run(["build", "--format", "json"], project, monkeypatch, capsys)
    assert json.loads(out)["written"] == [] and "mlp.py" in json.loads(out)["unchanged"]


def test_build_github_prints_each_diagnostic_once(tmp_path, monkeypatch, capsys):
    """Two targets import one broken file: one annotation, not one per target."""
    project = Path(shutil.copytree(MINI, tmp_path / "mini"))
    blocks = project / "models" / "lib" / "blocks.tri"
    blocks.write_text(blocks.read_text().replace("relu(", "relu_(", 1))
    code, out, _ = run(["build", "--format", "github", "-k"], project, monkeypatch, capsys)
    assert code == 1 and out.count("::error ") == 1 and "blocks.tri" in out
