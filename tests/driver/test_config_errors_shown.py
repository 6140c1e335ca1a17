"""Mistakes in Tribuild.toml print as `.tri` errors do: the path relative to the project
root, the line with carets under the key or value, a help line; an entry naming no layer
gets a did-you-mean and the file's layers; an example input that does not fit the entry
layer (E0410) points at the `input` line."""

from __future__ import annotations

import json


def _edit(root, old: str, new: str) -> None:
    toml = root / "Tribuild.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))


def test_an_entry_naming_no_layer_shows_the_line_a_guess_and_the_layers(mini, cli):
    _edit(mini, 'entry = "models/mlp.tri:MLP"', 'entry = "models/mlp.tri:MPL"')
    for cwd in (mini, mini / "models"):  # relative to the project root from anywhere inside
        for command in ("check", "build"):
            code, _, err = cli([command], cwd)
            assert code == 2, err
            assert err.endswith(
                "Tribuild.toml:17:9: error: target `mlp` cannot be built: "
                "`models/mlp.tri` defines no layer `MPL`\n"
                "   |\n"
                '17 | entry = "models/mlp.tri:MPL"\n'
                "   |         ^^^^^^^^^^^^^^^^^^^^\n"
                "   = help: did you mean `MLP`? its layers: MLP\n"
            ), err


def test_a_configuration_error_shows_its_line_with_a_caret(mini, cli):
    _edit(mini, "opt_level = 2", "opt_level = 7")
    code, _, err = cli(["build"], mini / "models")
    assert code == 2
    lines = err.splitlines()
    assert lines[0].startswith("Tribuild.toml:5:13: error: expected 0, 1, 2, 3")
    assert lines[1:4] == ["  |", "5 | opt_level = 7", "  |             ^"]


def test_an_input_that_does_not_fit_points_at_the_input_line(mini, cli):
    _edit(mini, "input = [1, 784]", "input = [1, 785]")
    code, _, err = cli(["check"], mini)
    assert code == 1
    assert err.startswith(
        "Tribuild.toml:18:9: error[E0410]: the example input [1, 785] does not fit `x` of "
        "MLP hidden=16: expected Tensor<float32, [N, 784]>, dim 1 is 785, expected 784\n"
        "   |\n"
        "18 | input = [1, 785]\n"
        "   |         ^^^^^^^^ the example input of target `mlp`\n"
        "  --> models/mlp.tri:"
    ), err
    code, _, err = cli(["build", "mlp"], mini)
    assert code == 1 and "18 | input = [1, 785]" in err, err
    code, out, _ = cli(["check", "--format", "json"], mini)
    (diag,) = json.loads(out)["diagnostics"]
    assert (diag["path"], diag["line"], diag["col"], diag["end_col"]) == (
        "Tribuild.toml",
        18,
        9,
        17,
    )
    assert diag["secondary"][0]["path"] == "models/mlp.tri"


def test_one_bad_argument_is_one_error_at_its_value(mini, cli):
    """Issue 37: `width = 0` made every layer built with it err in `.tri` files and said
    nothing at the `args` line. It is one error, at the value, those errors as its notes,
    for `check` and `build` alike."""
    _edit(mini, "args = { width = 48 }", "args = { width = 0 }")
    for command in (["check"], ["build", "wide"]):
        code, _, err = cli(command, mini)
        assert code == 1, err
        assert err.count("error[") == 1, err
        assert "Tribuild.toml:14:18: error[E0506]: target `wide`: `width = 0` does not fit " in err
        assert "14 | args = { width = 0 }\n   |                  ^ " in err, err
        notes = [line for line in err.splitlines() if line.lstrip().startswith("= note: ")]
        assert len(notes) == 3 and all(": E0506: " in n for n in notes), err
        assert "remove it from `args` to use the layer's default" in err


def test_an_argument_of_the_wrong_type_is_pointed_at_not_its_table(mini, cli):
    _edit(mini, "args = { width = 48 }", 'args = { width = "big" }')
    code, _, err = cli(["check"], mini)
    assert code == 2
    assert "Tribuild.toml:14:18: error: target `wide` cannot be built: " in err, err
    assert '14 | args = { width = "big" }\n   |                  ^^^^^\n' in err, err


def test_every_mistake_of_the_targets_in_one_run(mini, cli):
    """A wrong entry name and a wrong input shape: `check` shows both, not the first."""
    _edit(mini, 'entry = "models/mlp.tri:MLP"', 'entry = "models/mlp.tri:MPL"')
    _edit(mini, "input = [2, 64]", "input = [2, 65]")
    code, _, err = cli(["check"], mini)
    assert code == 2
    assert "Tribuild.toml:10:9: error: the example input [2, 65] does not fit" in err, err
    assert "error: target `mlp` cannot be built: `models/mlp.tri` defines no layer `MPL`" in err
