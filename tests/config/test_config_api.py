"""load_config edge cases, ConfigError's fields, find_project_root and the starter file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tribuild.config.load import (
    STARTER_TOML,
    Config,
    ConfigError,
    load_config,
    read_config,
    write_starter,
)
from tribuild.project import find_project_root

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "config"


def project(tmp_path: Path, toml: str) -> Path:
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "mlp.tri").write_text("layer MLP() {}\n")
    path = tmp_path / "Tribuild.toml"
    path.write_text(toml, encoding="utf-8")
    return path


def only_problem(path: Path | str):
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    [problem] = caught.value.problems
    return problem


def test_the_repository_config_loads() -> None:
    config = load_config(REPO / "Tribuild.toml")
    assert config.root == str(REPO)
    assert config.targets and all(t.entry_path.endswith(".tri") for t in config.targets)


def test_problem_fields() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(FIXTURES / "error_many.toml")
    by_key = {p.key: p for p in caught.value.problems}
    shape = by_key["targets.resnet18.input"]
    assert (shape.line, shape.column) == (14, 21)
    assert shape.expected == "a list of positive integers"
    assert shape.path == str(FIXTURES / "error_many.toml")
    unknown = by_key["project.job"]
    assert (unknown.line, unknown.column) == (6, 1)
    assert unknown.help.startswith("did you mean `jobs`?")
    lines = [(p.line, p.column) for p in caught.value.problems]
    assert lines == sorted(lines) and len(lines) == 7


@pytest.mark.parametrize(
    ("cpu_count", "jobs_line", "jobs"),
    [(5, "jobs = 0", 5), (None, "jobs = 0", 1), (5, "jobs = 3", 3), (7, "", 7)],
)
def test_jobs_resolution(tmp_path, monkeypatch, cpu_count, jobs_line, jobs) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cpu_count)
    path = project(tmp_path, f'[project]\nname = "p"\n{jobs_line}\n')
    assert load_config(path).jobs == jobs


def test_configs_compare_and_hash_by_value(tmp_path: Path) -> None:
    path = project(tmp_path, STARTER_TOML.replace("# args", "args"))
    first, second = load_config(path), load_config(path)
    assert first == second and hash(first) == hash(second)
    assert first.targets[0].args == (("hidden", 256),)


def test_missing_file_has_no_position(tmp_path: Path) -> None:
    problem = only_problem(tmp_path / "Tribuild.toml")
    assert problem.line is None
    expected = f"{tmp_path / 'Tribuild.toml'}: error: cannot read: No such file or directory"
    assert problem.render() == expected


def test_non_utf8_text_is_located(tmp_path: Path) -> None:
    path = tmp_path / "Tribuild.toml"
    path.write_bytes(b'[project]\nname = "caf\xe9"\n')
    problem = only_problem(path)
    assert (problem.line, problem.message) == (2, "invalid TOML: not UTF-8 text")


def test_a_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    path = project(tmp_path, "")
    path.write_bytes(b'\xef\xbb\xbf[project]\nname = "p"\nsources = ["models"]\n')
    assert load_config(path).name == "p"


def test_syntax_error_at_end_of_document_points_at_the_last_text(tmp_path: Path) -> None:
    path = project(tmp_path, '[project]\nname = "p"\ninput = [1,\n\n')
    problem = only_problem(path)
    assert (problem.line, problem.column) == (3, 12)
    assert problem.message == "invalid TOML: Invalid value"


def test_find_project_root(tmp_path: Path) -> None:
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "inner"
    deep = inner / "a" / "b"
    deep.mkdir(parents=True)
    (outer / "Tribuild.toml").write_text("")
    assert find_project_root(deep) == str(outer)
    (inner / "Tribuild.toml").write_text("")
    assert find_project_root(deep) == str(inner)
    assert find_project_root(inner) == str(inner)


def test_a_tribuild_toml_that_is_a_folder_is_found_and_reported(tmp_path: Path) -> None:
    (tmp_path / "Tribuild.toml").mkdir()
    assert find_project_root(tmp_path) == str(tmp_path)
    problem = only_problem(tmp_path / "Tribuild.toml")
    assert problem.render() == f"{tmp_path / 'Tribuild.toml'}: error: cannot read: Is a directory"


def test_find_project_root_without_any(tmp_path: Path) -> None:
    if any((folder / "Tribuild.toml").exists() for folder in [tmp_path, *tmp_path.parents]):
        pytest.skip("this machine has a Tribuild.toml above the temporary folder")
    assert find_project_root(tmp_path) is None


def test_starter_loads(tmp_path: Path) -> None:
    config = load_config(project(tmp_path, STARTER_TOML))
    assert config.name == "my-project"
    assert [(t.name, t.entry_path, t.entry_layer, t.input) for t in config.targets] == [
        ("mlp", "models/mlp.tri", "MLP", (1, 784))
    ]


@pytest.mark.parametrize("name", [None, 'odd "name" \\ with\ttab'])
def test_write_starter_names_the_project(tmp_path: Path, name: str | None) -> None:
    folder = tmp_path / "my zoo"
    (folder / "models").mkdir(parents=True)
    (folder / "models" / "mlp.tri").write_text("layer MLP() {}\n")  # init writes it beside
    written = write_starter(folder, name)
    assert written == str(folder / "Tribuild.toml")
    assert load_config(written).name == (name or "my zoo")


def test_write_starter_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / "Tribuild.toml").write_text("# mine\n")
    with pytest.raises(FileExistsError):
        write_starter(tmp_path)
    assert (tmp_path / "Tribuild.toml").read_text() == "# mine\n"


def test_config_is_frozen(tmp_path: Path) -> None:
    config: Config = load_config(project(tmp_path, '[project]\nname = "p"\n'))
    with pytest.raises(AttributeError):
        config.name = "q"  # type: ignore[misc]


@pytest.mark.parametrize(
    "fixture", sorted(p.name for p in FIXTURES.glob("*.toml") if p.name.startswith("ok"))
)
def test_a_known_table_is_validated_as_a_parsed_one(fixture, monkeypatch) -> None:
    """read_config with the table of the file's bytes: the same Config, no TOML parse."""
    import json
    import tomllib

    path = FIXTURES / fixture
    expected, data, table = read_config(path)
    known = json.loads(json.dumps(table))  # as the manifest keeps it
    monkeypatch.setattr(tomllib, "loads", lambda _: pytest.fail("parsed"))
    assert read_config(path, lambda d: known if d == data else None) == (expected, data, known)


def test_a_known_table_gives_the_same_located_problems(tmp_path) -> None:
    """A file system change since the table was recorded (an entry file deleted) is reported
    exactly as a fresh load reports it, at its line and column."""
    path = project(tmp_path, '[project]\nname = "p"\n\n[targets.m]\nentry = "models/mlp.tri:MLP"\n')
    _, data, table = read_config(path)
    os.unlink(tmp_path / "models" / "mlp.tri")
    with pytest.raises(ConfigError) as fresh:
        load_config(path)
    with pytest.raises(ConfigError) as known:
        read_config(path, lambda d: table)
    assert str(known.value) == str(fresh.value) and fresh.value.problems[0].line == 5


@pytest.mark.parametrize(
    "fixture", sorted(p.name for p in FIXTURES.glob("error_*.toml") if "syntax" not in p.name)
)
def test_every_problem_of_a_known_table_is_placed_as_in_a_fresh_load(fixture) -> None:
    import tomllib

    path = FIXTURES / fixture
    table = tomllib.loads(path.read_text(encoding="utf-8"))
    with pytest.raises(ConfigError) as fresh:
        load_config(path)
    with pytest.raises(ConfigError) as known:
        read_config(path, lambda d: table)
    assert str(known.value) == str(fresh.value)
