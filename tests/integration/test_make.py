"""tribuild under GNU make: `tribuild compile` pattern rules with included depfiles, and
`tribuild build` under ``make -j4`` taking its workers from make's jobserver."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.integration.conftest import TRIBUILD, tool

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is missing")

MAKEFILE = f"""\
TRIBUILD := {TRIBUILD}
MODULES := gen/net.py gen/mlp.py

all: $(MODULES) $(MODULES:.py=.copy)

gen/%.py: models/%.tri
\t$(TRIBUILD) compile $< -o $@ --depfile $@.d

gen/%.copy: gen/%.py
\tcp $< $@

zoo:
\t+$(TRIBUILD) build --jobs 8 --timing -q

-include $(MODULES:.py=.py.d)
"""


def make(mini, *args):
    run = tool("make", *args, cwd=mini)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout + run.stderr


def test_make_rebuilds_the_modules_an_imported_file_reaches(mini):
    (mini / "Makefile").write_text(MAKEFILE)
    first = make(mini, "-j4")
    assert "compile models/net.tri" in first and "compile models/mlp.tri" in first
    assert "make: Nothing to be done" in make(mini)
    blocks = mini / "models" / "lib" / "blocks.tri"
    blocks.write_text(blocks.read_text().replace("return relu(fc(x))", "return fc(x)"))
    out = make(mini)
    assert "compile models/net.tri" in out and "cp gen/net.py" in out
    assert "mlp" not in out
    assert "make: Nothing to be done" in make(mini)


def test_comment_edit_under_make_leaves_the_module_and_its_users_alone(mini):
    (mini / "Makefile").write_text(MAKEFILE)
    make(mini)
    module = mini / "gen" / "net.py"
    stamp = module.stat().st_mtime_ns
    blocks = mini / "models" / "lib" / "blocks.tri"
    blocks.write_text("# a comment\n" + blocks.read_text())
    out = make(mini)
    assert "compile models/net.tri" in out and "cp " not in out  # make re-stats the output
    assert module.stat().st_mtime_ns == stamp


def test_build_under_make_j4_takes_its_workers_from_the_jobserver(mini):
    (mini / "Makefile").write_text(MAKEFILE)
    out = make(mini, "-j4", "zoo")
    workers = re.search(
        r"workers: (\d+) at most at once beside this process, for 8 jobs "
        r"\(make's jobserver\)",
        out,
    )
    assert workers, out
    assert 1 <= int(workers.group(1)) <= 3  # make -j4 holds one token for the recipe
    assert sorted(p.name for p in (mini / "out").glob("*.py")) == [
        "mlp.py",
        "net.py",
        "twin.py",
        "wide.py",
    ]


def test_a_depfile_naming_files_with_colons_spaces_and_dollars_reads_right_in_make(mini):
    """Each of these must be escaped in a depfile: an unescaped colon in a prerequisite makes
    make read a pattern rule ("target pattern contains no '%'")."""
    odd = mini / "models" / "odd: a $b.tri"
    odd.write_text((mini / "models" / "mlp.tri").read_text())
    (mini / "Makefile").write_text(
        f"TRIBUILD := {TRIBUILD}\ngen/odd.py:\n"
        "\t$(TRIBUILD) compile 'models/odd: a $$b.tri' -o $@ --depfile $@.d\n"
        "-include gen/odd.py.d\n"
    )
    assert "compile 'models/odd: a $b.tri'" in make(mini)
    assert "'gen/odd.py' is up to date" in make(mini)
    odd.write_text(odd.read_text() + "\n# edited\n")
    assert "compile 'models/odd: a $b.tri'" in make(mini)


def test_make_settles_after_a_touch_with_compile_touch(mini):
    """Without restat, make reruns a compile whose module kept its bytes (and so its time) on
    every run; ``--touch`` gives the module a new time, so the next make has nothing to do."""
    (mini / "Makefile").write_text(MAKEFILE.replace("--depfile $@.d", "--depfile $@.d --touch"))
    make(mini)
    (mini / "models" / "net.tri").touch()
    out = make(mini)
    assert "compile models/net.tri" in out and "mlp" not in out
    assert "make: Nothing to be done" in make(mini)


def test_without_touch_make_reruns_an_unchanged_compile(mini):
    """The behaviour ``--touch`` exists for (so the test above cannot pass by accident)."""
    (mini / "Makefile").write_text(MAKEFILE)
    make(mini)
    (mini / "models" / "net.tri").touch()
    make(mini)
    assert "compile models/net.tri" in make(mini)
