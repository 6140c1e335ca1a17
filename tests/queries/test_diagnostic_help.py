"""What a user coming from Python or PyTorch, or mistyping a name, is told: one error at the
root cause, with the help that fixes it. Each case is a small project checked as
`tribuild check` does (every file's diagnostics)."""

from __future__ import annotations

from pathlib import Path

from tests.queries.test_fuzz_frontend import write_project
from tribuild.driver.sources import load_sources
from tribuild.engine import Database
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
