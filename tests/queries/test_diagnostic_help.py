"""What a user coming from Python or PyTorch, or mistyping a name, is told: one error at the
root cause, with the help that fixes it. Each case is a small project checked as
`tribuild check` does (every file's diagnostics)."""

from __future__ import annotations

from pathlib import Path

from tests.queries.test_fuzz_frontend import write_project
from tribuild.driver.sources import load_sources
from tribuild.engine import Database
from tribuild.queries.names import with_import_help
from tribuild.queries.report import file_diagnostics

NET = """layer Net(c: int = 4) {{
    let fc = Linear(c, c)
    {head}forward(x: Tensor<float32, [N, c]>) -> Tensor<float32, [N, c]> {{
        {body}
        return fc(x)
    }}
}}
"""


def checked(root: Path, files: dict[str, str]) -> list:
    entries = write_project(root, files)
    db = Database()
    closure = load_sources(db, str(root), entries)
    return [d for path in closure for d in file_diagnostics(db, path)]


def test_def_forward_gives_one_error_that_says_use_fn(tmp_path):
    diags = checked(tmp_path, {"a.tri": NET.format(head="def ", body="")})
    assert [(d.code, d.message) for d in diags] == [
        ("E0100", "use `fn` to define a function: `def` is Python's keyword")
    ]
    assert diags[0].help == "`fn forward(x: Tensor<...>) -> Tensor<...> { ... }`"


def test_def_at_the_top_level_gives_one_error(tmp_path):
    text = "def helper(x: Tensor<float32, [N]>) -> Tensor<float32, [N]> {\n    return relu(x)\n}\n"
    diags = checked(tmp_path, {"a.tri": text})
    assert [d.code for d in diags] == ["E0100"] and "use `fn`" in diags[0].message


def test_shape_of_a_tensor_hints_that_dims_are_named_values(tmp_path):
    diags = checked(tmp_path, {"a.tri": NET.format(head="fn ", body="let n = x.shape[0]")})
    assert [d.code for d in diags] == ["E0505"]
    assert diags[0].help == (
        "a tensor's dims are values under the names its type gives them: dim 0 is `N`, dim 1 is `c`"
    )


BLOCKS = """layer ConvBlock(c: int) {
    let conv = Conv2d(c, c, kernel=3, padding=1)
    fn forward(x: Tensor<float32, [N, c, H, W]>) -> Tensor<float32, [N, c, H, W]> {
        return conv(x)
    }
}
layer TransformerBlock(d: int) {
    let fc = Linear(d, d)
    fn forward(x: Tensor<float32, [N, T, d]>) -> Tensor<float32, [N, T, d]> {
        return fc(x)
    }
}
"""

MODEL = """layer Transform(d: int = 4) {
    let fc = Linear(d, d)
    fn forward(x: Tensor<float32, [N, T, d]>) -> Tensor<float32, [N, T, d]> {
        return fc(x)
    }
}
layer Model(d: int = 4) {
    let t = TransformerBlock(d)
    fn forward(x: Tensor<float32, [N, T, d]>) -> Tensor<float32, [N, T, d]> {
        return t(x)
    }
}
fn typed(b: ConvBlock) -> ConvBlock { return b }
"""

TYPO = """from "../blocks.tri" import ConvBlok

layer Net(c: int = 4, n: int = 2) {
    let a = ConvBlok(c)
    let seq = Sequential([ConvBlok(c) for i in 0..n])
    fn forward(x: Tensor<float32, [N, c, H, W]>) -> Tensor<float32, [N, c, H, W]> {
        let y = ConvBlok(c)
        return seq(a(x))
    }
}
fn typed(b: ConvBlok) -> ConvBlok { return b }
"""


def test_a_name_another_file_defines_suggests_its_import(tmp_path):
    files = {"blocks.tri": BLOCKS, "models/model.tri": MODEL}
    diags = with_import_help(Database(), [], ())  # nothing to improve: nothing read
    assert diags == []
    entries = write_project(tmp_path, files)
    db = Database()
    closure = load_sources(db, str(tmp_path), entries)
    raw = [d for path in closure for d in file_diagnostics(db, path)]
    helped = with_import_help(db, raw, closure)
    assert [(d.code, d.message, d.help) for d in helped] == [
        (
            "E0307",
            "unknown name `TransformerBlock`",
            'import it: from "../blocks.tri" import TransformerBlock',
        ),
        ("E0301", "unknown type `ConvBlock`", 'import it: from "../blocks.tri" import ConvBlock'),
        ("E0301", "unknown type `ConvBlock`", 'import it: from "../blocks.tri" import ConvBlock'),
    ]


def test_a_typo_in_an_import_list_is_its_only_error(tmp_path):
    diags = checked(tmp_path, {"blocks.tri": BLOCKS, "models/net.tri": TYPO})
    assert [(d.code, d.help) for d in diags] == [("E0203", "did you mean `ConvBlock`?")]


def test_build_and_check_print_the_import_help(tmp_path, monkeypatch):
    from tribuild.cli import main

    write_project(tmp_path, {"models/blocks.tri": BLOCKS, "models/model.tri": MODEL})
    (tmp_path / "Tribuild.toml").write_text(
        '[project]\nname = "p"\nsources = ["models"]\nout = "out"\n'
        '[targets.m]\nentry = "models/model.tri:Model"\ninput = [1, 2, 4]\n'
    )
    monkeypatch.chdir(tmp_path)
    # `check PATHS` reads the named file alone, but looks for the name in the whole project
    for args in (["check"], ["build"], ["check", "models/model.tri"]):
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            assert main(args) == 1
        assert 'help: import it: from "blocks.tri" import TransformerBlock' in err.getvalue(), args


def test_a_returned_member_output_of_the_wrong_width_labels_the_member(tmp_path):
    """Issue 37: E0309 at a `return` whose dims a member set points at the member's
    construction too, where the 11 is written."""
    text = """layer Net(hidden: int = 8) {
    let fc = Linear(4, hidden)
    let fc2 = Linear(hidden, 11)
    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 10]> {
        return fc2(fc(x))
    }
}
"""
    (diag,) = checked(tmp_path, {"a.tri": text})
    assert diag.code == "E0309"
    (member,) = diag.secondary
    assert member.message == "`fc2`, whose output is returned, is built here"
    assert (
        member.loc.item == diag.primary.loc.item and member.loc.span[0] < diag.primary.loc.span[0]
    )


def test_the_name_a_failed_import_meant_is_not_a_second_error(tmp_path):
    """Issue 37: `import Blok` (did you mean `Block`?) then a use of `Block`: one error."""
    diags = checked(
        tmp_path,
        {
            "lib.tri": "layer Block(c: int = 4) {\n    let fc = Linear(c, c)\n"
            "    fn forward(x: Tensor<float32, [N, c]>) -> Tensor<float32, [N, c]> {\n"
            "        return fc(x)\n    }\n}\n",
            "main.tri": 'from "lib.tri" import Blok\n'
            + NET.format(head="fn ", body="").replace("let fc = Linear(c, c)", "let fc = Block(c)"),
        },
    )
    assert [(d.code, d.help) for d in diags] == [("E0203", "did you mean `Block`?")]
