"""`tribuild check` end to end, in-process: exit codes, the first line of every diagnostic,
JSON output, and configuration errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tribuild.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = FIXTURES.parents[1]

# Each deliberately broken copy of the zoo: the first line of every diagnostic it must give.
BROKEN = {
    "data_dependent_if": ["mlp.tri:14:12: error[E0308]"],
    "missing_import": ["gated_conv.tri:3:6: error[E0204]"],
    "non_trit_literal": ["signs.tri:5:17: error[E0303]"],
    "residual_mismatch": ["resnet_blocks.tri:18:21: error[E0403]"],
    "syntax_error": ["resnet_blocks.tri:13:52: error[E0100]"],
    "unknown_name": ["mlp.tri:16:16: error[E0307]"],
    "wrong_channels": ["lenet.tri:19:57: error[E0401]"],
}


def _run(args, cwd, monkeypatch, capsys):
    monkeypatch.chdir(cwd)
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path):
    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(FIXTURES / "zoo_broken" / name, dest)
        return dest

    return copy


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_copy_gives_exactly_its_errors(case, project, monkeypatch, capsys):
    code, _, err = _run(["check"], project(case), monkeypatch, capsys)
    heads = [
        line.split(": ", 2)[0] + ": " + line.split(": ", 2)[1]
        for line in err.splitlines()
        if ": error[" in line and not line.startswith(" ")
    ]
    assert code == 1
    assert heads == BROKEN[case]


CHAIN = """\
layer Stack(blocks: [int]) {
    let fc = Linear(4, blocks[2])
    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, ?]> {
        return fc(x)
    }
}

layer Net(width: int = 4) {
    let s = Stack([1, 2])
    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, ?]> {
        return s(x)
    }
}
"""


def test_json_output_has_positions_and_the_instantiation_chain(tmp_path, monkeypatch, capsys):
    (tmp_path / "m.tri").write_text(CHAIN)
    code, out, _ = _run(["check", "--format", "json"], tmp_path, monkeypatch, capsys)
    report = json.loads(out)
    assert code == 1 and report["errors"] == 1
    (diag,) = report["diagnostics"]
    assert (diag["path"], diag["line"], diag["col"], diag["code"]) == ("m.tri", 2, 31, "E0503")
    assert diag["notes"] == ["in Net.s (Stack blocks=[1, 2])", "in Net (Net width=4)"]


def test_an_error_found_generically_is_reported_once(project, monkeypatch, capsys):
    code, out, _ = _run(
        ["check", "--format", "json"], project("wrong_channels"), monkeypatch, capsys
    )
    (diag,) = json.loads(out)["diagnostics"]
    assert diag["code"] == "E0401" and diag["notes"] == []


def test_the_zoo_checks_clean_and_the_second_run_reuses_everything(tmp_path, monkeypatch, capsys):
    shutil.copytree(REPO / "models", tmp_path / "models")
    shutil.copy(REPO / "Tribuild.toml", tmp_path)
    code, _, err = _run(["check", "--stats"], tmp_path, monkeypatch, capsys)
    assert code == 0 and "no errors" in err
    code, _, err = _run(["check", "--stats"], tmp_path, monkeypatch, capsys)
    assert code == 0 and "queries: 0 executed" in err and "store: loaded" in err


def test_a_bad_config_exits_2_naming_the_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "Tribuild.toml").write_text('[project]\nname = "x"\nsorces = ["."]\n')
    code, _, err = _run(["check"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "Tribuild.toml:3:1: error:" in err and "sources" in err


def test_a_target_naming_a_missing_layer_exits_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "m.tri").write_text("layer A(c: int = 2) -> Tensor<float32, [c]> {\n}\n")
    (tmp_path / "Tribuild.toml").write_text(
        '[project]\nname = "x"\n\n[targets.t]\nentry = "m.tri:Missing"\n'
    )
    code, _, err = _run(["check"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "Tribuild.toml:5:9: error: target `t` cannot be built" in err


def test_paths_that_cannot_be_checked_exit_2_naming_each(tmp_path, monkeypatch, capsys):
    """A typo in CI must not pass as "checked 0 files"."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "m.tri").write_text("let C: int = 2\n")
    (project / "Tribuild.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "elsewhere.tri").write_text("let D: int = 3\n")
    code, _, err = _run(
        ["check", "nope.tri", "Tribuild.toml", "../elsewhere.tri", "m.tri"],
        project,
        monkeypatch,
        capsys,
    )
    assert code == 2 and err.splitlines() == [
        "nope.tri: error: no such file or folder",
        "Tribuild.toml: error: is not a .tri file or a folder",
        f"../elsewhere.tri: error: is outside the project, whose root is {project}",
    ]
    code, _, err = _run(["check", "m.tri", "."], project, monkeypatch, capsys)
    assert code == 0 and "checked 1 file: no errors" in err


def test_arguments_that_do_not_fit_exit_2_at_the_args_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "m.tri").write_text(
        "layer A(c: int = 2) {\n    let fc = Linear(c, 2)\n    fn forward(x: Tensor<float32, "
        "[N, c]>) -> Tensor<float32, [N, 2]> {\n        return fc(x)\n    }\n}\n"
    )
    (tmp_path / "Tribuild.toml").write_text(
        '[project]\nname = "x"\n\n[targets.t]\nentry = "m.tri:A"\nargs = { d = 3 }\n'
    )
    code, _, err = _run(["check"], tmp_path, monkeypatch, capsys)
    assert (  # at the keyword the layer does not have (issue 37: not the whole table)
        code == 2
        and "Tribuild.toml:6:10: error: target `t` cannot be built: cannot "
        "instantiate A: keyword `d` is not a parameter of `A`"
        in err
    )


def test_usage_error_exits_2(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(["check", "--format", "yaml"])
    assert exc.value.code == 2


def test_an_unwritable_cache_folder_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    (tmp_path / "m.tri").write_text(CHAIN)
    (tmp_path / "blocker").write_text("a file where the cache folder should be\n")
    (tmp_path / "Tribuild.toml").write_text('[project]\nname = "x"\n\n[cache]\ndir = "blocker"\n')
    code, _, err = _run(["check"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "Traceback" not in err and "tribuild: error:" in err and "blocker" in err


def test_bitnet_lm_targets_that_do_not_fit_name_the_rule_and_the_instance(
    tmp_path, monkeypatch, capsys
):
    """models/bitnet_lm.tri built with 3 key/value heads for 4 query heads, and with an odd
    head width (60 / 4 = 15): each error at its line, with the instance chain."""
    (tmp_path / "models").mkdir()
    shutil.copy(REPO / "models" / "bitnet_lm.tri", tmp_path / "models")
    entry = 'entry = "models/bitnet_lm.tri:BitNetLM"\ninput = [1, 8]\n'
    (tmp_path / "Tribuild.toml").write_text(
        '[project]\nname = "lm"\nsources = ["models"]\nout = "out"\n\n'
        f"[targets.groups]\n{entry}"
        "args = { vocab = 50, dim = 64, layers = 2, heads = 4, kv_heads = 3, hidden = 96 }\n\n"
        f"[targets.odd]\n{entry}"
        "args = { vocab = 50, dim = 60, layers = 1, heads = 4, kv_heads = 2, hidden = 96 }\n"
    )
    code, _, out = _run(["check"], tmp_path, monkeypatch, capsys)  # diagnostics go to stderr
    assert code == 1
    firsts = sorted(line for line in out.splitlines() if ": error[" in line)
    assert firsts == [
        "models/bitnet_lm.tri:68:17: error[E0407]: rope: rotary embeddings rotate pairs of the "
        "last dim, which is odd (15)",
        "models/bitnet_lm.tri:69:17: error[E0407]: rope: rotary embeddings rotate pairs of the "
        "last dim, which is odd (15)",
        "models/bitnet_lm.tri:72:35: error[E0407]: attention: 3 key/value heads do not divide 4 "
        "query heads",
    ]
    assert "in BitNetLM.model.layers[0].self_attn (BitNetAttention dim=64 heads=4 kv_heads=3" in out
