"""The no-op path: a fresh process with nothing changed answers from the manifest without
importing the engine, the compiler, argparse, torch, triton, networkx or rich; which command
lines it accepts; and what sends a build the full way."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tribuild.cli import parser
from tribuild.cli.build import DEFAULTS, Options
from tribuild.driver.noop.up_to_date import simple

# ``started``: what the interpreter had loaded before tribuild (site's own imports: an
# editable install's import finder loads pathlib and typing at every start-up); only what
# tribuild loads on top of that counts.
PROBE = """\
import json, sys
started = set(sys.modules)
from tribuild.cli import main
code = main(sys.argv[1:])
heavy = ("torch", "triton", "networkx", "rich", "argparse", "tribuild.engine",
         "tribuild.queries", "tribuild.lang", "tribuild.config.load", "tomllib")
slow = ("pathlib", "typing", "hashlib", "difflib", "tempfile", "dataclasses", "logging",
        "concurrent.futures", "argparse", "tomllib")   # stdlib modules a build can do without
print(json.dumps([code, [m for m in heavy if m in sys.modules],
                  [m for m in slow if m in sys.modules and m not in started]]))
"""


def _fresh(cwd, *args) -> tuple[int, list[str], str]:
    code, heavy, _, err = _probe(cwd, *args)
    return code, heavy, err


def _probe(cwd, *args) -> tuple[int, list[str], list[str], str]:
    run = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    code, heavy, slow = json.loads(run.stdout.splitlines()[-1])
    return code, heavy, slow, run.stderr


def test_a_fresh_no_op_imports_nothing_heavy(mini):
    code, heavy, _ = _fresh(mini, "build", "-q")
    assert code == 0 and "tribuild.engine" in heavy  # the first build does work
    for args in (("build",), ("build", "-j", "2", "-k"), ("build", "-q"), ("build", "-j0")):
        code, heavy, err = _fresh(mini, *args)
        assert (code, heavy) == (0, []), err
    code, heavy, err = _fresh(mini / "models", "build", "--jobs=3")  # from a subfolder
    assert (code, heavy, err) == (0, [], "tribuild: no work to do\n")


@pytest.mark.parametrize(
    "change",
    ["edit", "delete output", "delete outputs record", "other targets", "other level", "config"],
)
def test_what_sends_a_build_the_full_way(mini, cli, change):
    cli(["build", "-q"], mini)
    args = ["build"]
    if change == "edit":
        (mini / "models" / "mlp.tri").write_text((mini / "models" / "mlp.tri").read_text() + "\n")
    elif change == "delete output":
        os.unlink(mini / "out" / "mlp.d")
    elif change == "delete outputs record":  # what tells stale outputs from others'
        os.unlink(mini / "out" / ".tribuild-outputs.json")
    elif change == "other targets":
        args.append("mlp")
    elif change == "other level":
        args.append("-O3")
    else:
        toml = mini / "Tribuild.toml"
        toml.write_text(toml.read_text().replace('name = "mini"', 'name = "mini2"'))
    code, _, err = cli(args, mini)
    assert code == 0 and "no work to do" not in err
    assert cli(args, mini)[2] == "tribuild: no work to do\n"
    assert (mini / "out" / "mlp.d").exists() and (mini / "out" / ".tribuild-outputs.json").exists()


def test_an_output_deleted_while_the_build_ends_is_made_again_by_the_next(mini, cli, monkeypatch):
    """Someone deletes an output after it was written and before the manifest records it:
    the build still ends well, and the next one is not taken for a no-op."""
    from tribuild.driver import explain

    why_written = explain.why_written

    def deleting(db, keys, result, executed):
        os.unlink(mini / "out" / "mlp.py")
        return why_written(db, keys, result, executed)

    monkeypatch.setattr(explain, "why_written", deleting)
    assert cli(["build", "-q"], mini)[0] == 0
    monkeypatch.setattr(explain, "why_written", why_written)
    code, _, err = cli(["build"], mini)
    assert code == 0 and "no work to do" not in err and (mini / "out" / "mlp.py").exists()


def test_a_build_that_writes_nothing_leaves_the_manifest_true(mini, cli):
    """Dumps and --stop-after write no output: the next plain build is still a no-op."""
    cli(["build", "-q"], mini)
    for args in (["--dump-code"], ["--dump-ir"], ["--stop-after", "check"]):
        assert cli(["build", "-q", *args], mini)[0] == 0
        assert cli(["build"], mini)[2] == "tribuild: no work to do\n", args


def test_a_cache_folder_configured_elsewhere_is_found_past_a_stale_manifest(mini, cli):
    cli(["build", "-q"], mini)  # leaves a manifest in .tribuild-cache
    toml = mini / "Tribuild.toml"
    toml.write_text(toml.read_text() + '\n[cache]\ndir = "elsewhere"\n')
    assert "no work to do" not in cli(["build"], mini)[2]
    assert (mini / ".tribuild-cache" / "build-manifest.json").exists()
    assert (mini / "elsewhere" / "build-manifest.json").exists()
    code, heavy, err = _fresh(mini, "build")
    assert (code, err) == (0, "tribuild: no work to do\n") and heavy == ["tomllib"]
    (mini / "models" / "mlp.tri").write_text((mini / "models" / "mlp.tri").read_text() + "\n")
    assert "no work to do" not in cli(["build"], mini)[2]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_build_whose_store_save_fails_leaves_no_manifest(mini, jobs, monkeypatch):
    """The manifest is taken while the save's helper works but written only after the save:
    a build that fails there vouches for nothing, so the next one takes the full way."""
    from tribuild.driver import build as driver
    from tribuild.driver.build import Request, build
    from tribuild.driver.session import Project

    def full_disk(db, project):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(driver, "save_database", full_disk)
    with pytest.raises(OSError):
        build(Project.discover(str(mini)), Request(jobs=int(jobs)))
    assert (mini / "out" / "net.py").exists()
    assert not (mini / ".tribuild-cache" / "build-manifest.json").exists()


SIMPLE = [
    [],
    ["a", "b", "-j4", "--jobs", "2", "-O3", "-q"],
    ["--jobs=2", "-Os", "-k"],
    ["-k", "--quiet", "--keep-going", "-O", "0", "mlp"],
    ["-j", "7", "net", "wide"],
    ["-j0"],
    ["--jobs=0", "mlp"],
]


@pytest.mark.parametrize("line", SIMPLE)
def test_a_simple_line_gives_what_argparse_gives(line):
    """Every option, not only those a simple line may hold: the build's arguments made
    without argparse (``Options.of``) are argparse's namespace, key for key."""
    parsed = vars(parser().parse_args(["build", *line]))
    del parsed["command"]
    assert vars(Options.of(simple(line))) == parsed


def test_the_build_options_are_declared_once():
    """argparse's defaults for `build` are ``DEFAULTS``; a name that is not an option is
    refused rather than carried."""
    assert vars(Options()) == DEFAULTS
    assert {k: v for k, v in vars(parser().parse_args(["build"])).items() if k != "command"} == (
        DEFAULTS
    )
    with pytest.raises(TypeError, match="not an option"):
        Options(timming=True)


def test_what_is_not_a_simple_line():
    assert simple(["a", "-q", "b"]).targets == ["a", "b"]  # argparse would refuse "b"
    for args in (
        ["--timing"],
        ["-j"],
        ["-j-1"],
        ["-O9"],
        ["--explain"],
        ["-"],
        ["--dump-ast"],
        ["-kq"],
        ["--qui"],
        ["--"],
    ):
        assert simple(args) is None, args


def test_a_build_with_work_runs_without_argparse(mini):
    code, heavy, _ = _fresh(mini, "build", "-q", "-j", "1")
    assert code == 0 and "tribuild.engine" in heavy and "argparse" not in heavy


def test_a_rebuild_after_an_edit_imports_no_slow_stdlib_module(mini, cli):
    """The one-body-edit path (the issue's 150 ms goal): pathlib alone costs ~3 ms."""
    cli(["build", "-q"], mini)
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("relu(", "relu6(", 1))
    code, heavy, slow, err = _probe(mini, "build", "-q")
    assert code == 0 and "tribuild.engine" in heavy, err
    assert slow == []


def test_a_build_that_reports_errors_imports_no_slow_stdlib_module(mini, cli):
    """Rendering diagnostics (the path of someone fixing errors) imports no typing either;
    difflib it may: the unknown name gets a did-you-mean line."""
    cli(["build", "-q"], mini)
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("fc1(x)", "fc1(w)"))
    code, _, slow, err = _probe(mini, "build", "-q")
    assert code == 1 and "error[" in err
    assert [m for m in slow if m != "difflib"] == []


def test_the_manifest_spares_parsing_an_unchanged_config(mini, cli, monkeypatch):
    """A build after one that succeeded validates the table the manifest recorded for the
    same bytes of Tribuild.toml; other bytes are parsed."""
    import tomllib

    parsed = []
    real = tomllib.loads
    monkeypatch.setattr(tomllib, "loads", lambda text: parsed.append(text) or real(text))
    cli(["build", "-q"], mini)
    assert len(parsed) == 1
    mlp = mini / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text() + "\n")
    code, _, err = cli(["build"], mini)
    assert code == 0 and "no work to do" not in err and len(parsed) == 1
    toml = mini / "Tribuild.toml"
    toml.write_text(toml.read_text() + "# a comment\n")
    assert cli(["build", "-q"], mini)[0] == 0 and len(parsed) == 2
