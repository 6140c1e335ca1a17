"""The small commands: init, compile, clean, graph, explain, and their exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest


def test_init_writes_a_project_that_builds_and_refuses_to_overwrite(tmp_path, cli):
    code, _, err = cli(["init"], tmp_path)
    assert code == 0 and "wrote Tribuild.toml\nwrote models/mlp.tri\nwrote .gitignore\n" in err
    assert "tribuild check" in err and "tribuild build" in err and "tribuild watch" in err
    assert "layer MLP(hidden: int = 256)" in (tmp_path / "models" / "mlp.tri").read_text()
    ignored = (tmp_path / ".gitignore").read_text().splitlines()
    assert "/build/" in ignored and "/.tribuild-cache/" in ignored
    code, _, err = cli(["init"], tmp_path)
    assert code == 2 and "nothing written" in err
    code, _, err = cli(["build", "-q"], tmp_path)
    assert code == 0 and (tmp_path / "build" / "mlp.py").exists()


def test_init_in_a_subfolder_keeps_a_gitignore_and_names_the_folder(tmp_path, cli):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / ".gitignore").write_text("*.pyc\n/build/")
    code, _, err = cli(["init", "p"], tmp_path)
    assert code == 0 and "wrote p/Tribuild.toml" in err and "tribuild -C p build" in err
    assert (tmp_path / "p" / ".gitignore").read_text().splitlines() == [
        "*.pyc",
        "/build/",
        "# written by tribuild: generated modules and the build cache",
        "/.tribuild-cache/",
    ]


def test_compile_one_file_with_arguments_and_a_depfile(mini, cli):
    code, _, err = cli(
        [
            "compile",
            "models/net.tri",
            "-o",
            "gen/n.py",
            "--arg",
            "width=12",
            "--depfile",
            "gen/n.d",
        ],
        mini,
    )
    assert code == 0, err
    assert "width=12" in (mini / "gen" / "n.py").read_text()
    assert (mini / "gen" / "n.d").read_text() == (
        "gen/n.py: \\\n models/lib/blocks.tri \\\n models/net.tri \\\n Tribuild.toml\n"
    )
    assert list((mini / "gen" / "kernels").glob("linear_12x*.py"))


def test_compile_in_a_build_folder_outside_any_project(tmp_path, cli):
    """make or ninja may run the rule in a folder of its own: without a Tribuild.toml above
    it, the project is the one around the source (here none either: the source's folder)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "m.tri").write_text(
        "layer M(n: int = 4) {\n    let fc = Linear(n, 2)\n"
        "    fn forward(x: Tensor<float32, [N, n]>) -> "
        "Tensor<float32, [N, 2]> {\n        return fc(x)\n    }\n}\n"
    )
    obj = tmp_path / "obj"
    obj.mkdir()
    code, _, err = cli(["compile", "../src/m.tri", "-o", "m.py", "--depfile", "m.d"], obj)
    assert code == 0, err
    assert (obj / "m.d").read_text() == "m.py: \\\n ../src/m.tri\n"
    assert "class M(" in (obj / "m.py").read_text()


def test_compile_removes_the_temporary_files_of_its_killed_runs_but_not_of_shared_kernels(
    mini, cli
):
    gen, litter = mini / "gen", ".n.py.abcd1234.tmp"
    (gen / "kernels").mkdir(parents=True)
    for path in (gen / litter, gen / ".n.d.efgh5678.tmp", gen / "kernels" / ".k.py.abcd1234.tmp"):
        path.write_text("partial")
    code, _, err = cli(
        ["compile", "models/net.tri", "-o", "gen/n.py", "--depfile", "gen/n.d"], mini
    )
    assert code == 0, err
    assert sorted(p.name for p in gen.glob(".*.tmp")) == []
    assert [p.name for p in (gen / "kernels").glob(".*.tmp")] == [".k.py.abcd1234.tmp"]


def test_compile_usage_errors(mini, cli):
    cases = [
        (["compile", "models/nope.tri", "-o", "x.py"], "no such file"),
        (["compile", "models/lib/blocks.tri", "-o", "x.py"], "cannot build `Dense`"),
        (["compile", "models/net.tri", "-o", "x.py", "--target", "Zed"], "no layer `Zed`"),
        (["compile", "models/net.tri", "-o", "x.py", "--arg", "width"], "name=value"),
        (["compile", "models/net.tri"], "-o"),
        (
            ["compile", "models/net.tri", "-o", "models/net.tri"],
            "-o names the source, which it would overwrite",
        ),
        (
            ["compile", "models/net.tri", "-o", "x.py", "--depfile", "./x.py"],
            "--depfile names the -o output",
        ),
    ]
    for args, message in cases:
        code, _, err = cli(args, mini)
        assert code == 2 and message in err, (args, err)
    (mini.parent / "outside.tri").write_text((mini / "models" / "mlp.tri").read_text())
    code, _, err = cli(["compile", "../outside.tri", "-o", "x.py"], mini)
    assert (
        code == 2
        and f"{mini.parent / 'outside.tri'}: error: is outside the project, whose root is {mini}"
        in err
    )
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("fc1(x)", "fc1(w)"))
    code, _, err = cli(["compile", "models/mlp.tri", "-o", "x.py"], mini)
    assert code == 1 and "error[" in err and not (mini / "x.py").exists()


def test_clean_removes_only_what_tribuild_wrote(mini, cli):
    cli(["build", "-q"], mini)
    (mini / "out" / "mine.txt").write_text("keep me")
    code, _, err = cli(["clean"], mini)
    assert code == 0 and sorted(p.name for p in (mini / "out").rglob("*")) == ["mine.txt"]
    code, _, err = cli(["build"], mini)
    assert code == 0 and "no work to do" not in err and (mini / "out" / "net.py").exists()


def test_graph_and_explain(mini, cli):
    cli(["build", "-q"], mini)
    code, out, _ = cli(["graph", "--format", "json"], mini)
    graph = json.loads(out)
    assert code == 0 and ["models/net.tri", "models/lib/blocks.tri"] in graph["edges"]
    assert ["target:mlp", "models/mlp.tri"] in graph["edges"]
    code, out, _ = cli(["graph", "--queries"], mini)
    assert code == 0 and out.startswith("digraph") and "target_build" in out
    blocks = mini / "models" / "lib" / "blocks.tri"
    blocks.write_text(blocks.read_text().replace("return relu(fc(x))", "return fc(x)"))
    cli(["build", "-q"], mini)
    code, out, _ = cli(["explain", "out/wide.py"], mini)
    assert code == 0 and "the text of models/lib/blocks.tri [source_text]" in out.splitlines()[-1]
    assert "the class generated for `Dense(64, 48)` in models/lib/blocks.tri" in out
    assert "InstanceKey" not in out
    code, _, err = cli(["explain", "out/nothing.py"], mini)
    assert code == 1 and "out/nothing.py is not an output of this project" in err
    assert f"written under out{os.sep}" in err
    shutil.rmtree(mini / ".tribuild-cache")  # the record of why goes with the cache
    cli(["build", "-q"], mini)  # and the outputs are up to date
    code, _, err = cli(["explain", "out/wide.py"], mini)
    assert code == 1 and "out/wide.py (target wide) has not been written since" in err


def test_a_reader_that_stops_early_ends_the_command_quietly():
    """`tribuild graph | head`: a write to the closed standard output is not reported as a
    file system error (exit 2); the process exits 141 (128 + SIGPIPE) without a word."""
    from tribuild import cli

    def writes_to_a_closed_pipe(args):
        raise BrokenPipeError(32, "Broken pipe")

    with pytest.raises(BrokenPipeError):
        cli._run(writes_to_a_closed_pipe, None)
    probe = (
        "from tribuild import cli\n"
        "def main(argv):\n    raise BrokenPipeError(32, 'Broken pipe')\n"
        "cli.main = main\ncli.entry()\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60)
    assert (run.returncode, run.stderr) == (141, b"")
