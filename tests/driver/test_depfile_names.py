"""Depfile names read back through the real GNU make and ninja.

Terms:
- *generated names*: every ASCII character but NUL, ``/``, letters and digits (and a few
  non-ASCII ones, and a byte that is not UTF-8) in five shapes: inside a name, first, last,
  doubled, and in a folder's name as well as the file's.
- *read back*: what the tool took the depfile to say. make: a rule's recipe writes ``$^``
  (a prerequisite) or ``$@`` (the target) to a file with ``$(file ...)``, no shell between.
  ninja: with ``deps = gcc``, ``ninja -t deps`` lists what it recorded; without, ``-d
  explain`` names the input newer than the output (and a target the depfile does not name
  is "expected depfile ... to mention").
- Every name ``depnames.unwritable`` accepts must read back as exactly itself in both tools,
  as a prerequisite and as the target; every one it refuses makes ``escape`` raise. The
  refusals are needed: for each refused character a witness name, written as it is or with
  a backslash before the character, reads back as something else in make or in ninja.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import BIN
from tribuild.base.depnames import Unwritable, escape, unwritable
from tribuild.driver.depfile import render

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is missing")

# ninja: the pip package's (the dev extra), and the system's when it is another build
NINJAS = sorted(
    {
        os.path.realpath(n)
        for n in (shutil.which("ninja", path=str(BIN)), shutil.which("ninja"))
        if n
    }
)
OTHERS = ["é", "\u00a0", "中", "\U0001f600", "\udcff"]  # the last: the byte 0xff, not UTF-8
CHARACTERS = [chr(c) for c in range(1, 0x80) if not chr(c).isalnum() and chr(c) != "/"] + OTHERS


def shapes(c: str) -> list[str]:
    return [f"a{c}b", f"{c}b", f"a{c}", f"a{c}{c}b", f"d{c}/e{c}f"]


NAMES = sorted(
    {name for c in CHARACTERS for name in shapes(c)}
    | {
        "a b c",
        "a#b:c d$e",
        "a$(x)b",
        "a${x}b",
        "a$$b",
        "x\"y'z",
        "copy (2).tri",
        "lib(x.o",
        "~b/a",
        "a~b",
        "models/odd: a $b #1 'q' é.tri",
    }
)
WRITABLE = [n for n in NAMES if unwritable(n) is None]
REFUSED = [n for n in NAMES if unwritable(n) is not None]

# refused character -> a name whose plain writings make or ninja reads as something else
WITNESSES = {
    ";": "a;b",
    "=": "a=b",
    "|": "a|b",
    "%": "a%b",  # as a target: a pattern rule
    "*": "a*b",  # matches the decoy axb too
    "?": "a?b",
    "[": "a[x]b",
    "\\": "a\\ b",
    "<": "a<b",
    ">": "a>b",
    "^": "a^b",
    "`": "a`b",
    '"': 'a"b',  # ninja 1.11
    "'": "a'b",  # ninja 1.11
    "&": "a&b",  # ninja 1.11
    "(": "lib(x.o)",
    "~ first": "~",  # the home folder
    ": last": "x:",
    "space last": "a ",
    "tab": "a\tb",
}
OLD_NINJA_ONLY = {'"', "'", "&"}  # ninja 1.12 and later read these as they are


def _version(ninja: str) -> tuple[int, ...]:
    text = subprocess.run([ninja, "--version"], capture_output=True, text=True).stdout
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


DECOYS = ["axb", "aXb"]


def _create(folder: Path, name: str) -> None:
    path = os.path.join(os.fsencode(folder), os.fsencode(name))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb"):
        pass
    os.utime(path, (1_500_000_000, 1_500_000_000))  # past: make warns of the future


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, timeout=120)


def _text(data: bytes) -> str:
    return os.fsdecode(data)


def make_read_back(folder: Path, depfiles: list[tuple[str, str]]) -> dict:
    """make's reading of each ``(prerequisite, target)`` rule text pair: for rule i, the
    prerequisite read from ``p{i}.d`` (target ``p{i}``, which make builds) and the target
    read from ``t{i}.d`` (built as a prerequisite of ``all``)."""
    pre, tgt = folder / "pre", folder / "tgt"
    for side in (pre, tgt):
        side.mkdir(parents=True)
        for decoy in DECOYS:
            _create(side, decoy)
    _create(tgt, "dep")
    goals = []
    for i, (prerequisite, target) in enumerate(depfiles):
        _create(pre, prerequisite)
        (pre / f"p{i}.d").write_bytes(
            os.fsencode(render(f"p{i}", (prerequisite,)) + f"\t$(file >p{i}.got,$^)\n")
        )
        (tgt / f"t{i}.d").write_bytes(
            os.fsencode(render(target, ("dep",)) + f"\t$(file >t{i}.got,$@)\n")
        )
        goals.append(escape(target))
    count = len(depfiles)
    (pre / "Makefile").write_text(
        "all: " + " ".join(f"p{i}" for i in range(count)) + "\n"
        "-include " + " ".join(f"p{i}.d" for i in range(count)) + "\n"
    )
    (tgt / "Makefile").write_bytes(
        os.fsencode("all: " + " ".join(goals) + "\n-include ")
        + b" ".join(f"t{i}.d".encode() for i in range(count))
        + b"\n"
    )
    out = {}
    for side, key in ((pre, "p"), (tgt, "t")):
        run = _run("make", "-s", "-k", cwd=side)
        out[key + "stderr"] = _text(run.stderr)
        for i in range(count):
            got = side / f"{key}{i}.got"
            out[key, i] = _text(got.read_bytes()).removesuffix("\n") if got.exists() else None
    return out


def _ninja_path(name: str) -> str:
    """``name`` as a path in build.ninja (not a depfile: ninja's own ``$`` escapes)."""
    return name.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def ninja_read_back(ninja: str, folder: Path, depfiles: list[tuple[str, str]]) -> dict:
    """ninja's reading, as ``make_read_back``'s: with ``deps = gcc`` from ``-t deps``,
    without it from ``-d explain`` (one folder each, and each side)."""
    out = {}
    for mode in ("gcc", "depfile"):
        for key in "pt":
            side = folder / f"{mode}-{key}"
            side.mkdir(parents=True)
            _create(side, "dep")
            lines = ["rule r", "  command = :", "  depfile = $d"]
            lines += ["  deps = gcc"] if mode == "gcc" else []
            for i, (prerequisite, target) in enumerate(depfiles):
                if key == "p":
                    output, text = f"p{i}", render(f"p{i}", (prerequisite,))
                    _create(side, prerequisite)
                else:
                    output, text = target, render(target, ("dep",))
                (side / f"{i}.d").write_bytes(os.fsencode(text))
                lines += [f"build {_ninja_path(output)}: r", f"  d = {i}.d"]
                _create(side, output)  # older than its inputs: each edge runs
                os.utime(os.path.join(os.fsencode(side), os.fsencode(output)), (10**9, 10**9))
            (side / "build.ninja").write_bytes(os.fsencode("\n".join(lines) + "\n"))
            dry = ["-n"] if mode == "depfile" else []
            run = _run(ninja, "-d", "explain", *dry, cwd=side)
            text = _text(run.stdout + run.stderr)
            out[mode, key, "log"] = text
            if mode == "gcc":
                listed = _text(_run(ninja, "-t", "deps", cwd=side).stdout)
                blocks = re.findall(r"^(.*): #deps \d+, .*\n((?:    .*\n)*)", listed, re.M)
                found = {o: [d[4:] for d in deps.splitlines()] for o, deps in blocks}
            else:
                found = dict(re.findall(r"output (.*) older than most recent input (.*) \(", text))
            for i, (_, target) in enumerate(depfiles):
                out[mode, key, i] = found.get(f"p{i}" if key == "p" else target)
    return out


def test_every_generated_name_is_either_escaped_or_refused():
    assert len(WRITABLE) > 80 and len(REFUSED) > 150  # the generator is not a no-op
    for name in REFUSED:
        with pytest.raises(Unwritable):
            render("out", (name,))
    for c in ";=|%*?[\\<>^`\t\n\x1b":
        assert unwritable(f"a{c}b") is not None, repr(c)


def test_make_reads_every_writable_name_back_exactly(tmp_path):
    pairs = [(name, name) for name in WRITABLE]
    got = make_read_back(tmp_path, pairs)
    assert got["pstderr"] == "" and got["tstderr"] == "", got["pstderr"] + got["tstderr"]
    wrong = [
        (name, got["p", i], got["t", i])
        for i, name in enumerate(WRITABLE)
        if got["p", i] != name or got["t", i] != name
    ]
    assert wrong == []
    assert not (tmp_path / "pre" / "PWNED").exists()


@pytest.mark.parametrize("ninja", NINJAS)
def test_ninja_reads_every_writable_name_back_exactly(tmp_path, ninja):
    pairs = [(name, name) for name in WRITABLE]
    got = ninja_read_back(ninja, tmp_path, pairs)
    for key in "pt":
        log = got["depfile", key, "log"]
        assert "expected depfile" not in log and "warning" not in log, log
    wrong = [
        (name, [got[mode, key, i] for mode in ("gcc", "depfile") for key in "pt"])
        for i, name in enumerate(WRITABLE)
        if [got[mode, key, i] for mode in ("gcc", "depfile") for key in "pt"]
        != [[name], ["dep"], name, "dep"]
    ]
    assert wrong == []


def _plain_writings(name: str, c: str) -> list[str]:
    """The ways a depfile might write ``name`` if ``c`` needed nothing, or a backslash."""
    base = name.replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")
    ours = base.replace(":", "\\:")
    return sorted({ours, ours.replace(c, "\\" + c), base})


@pytest.mark.parametrize("refused", sorted(WITNESSES))
def test_each_refusal_is_needed(tmp_path, refused):
    """For every refused character, no plain writing of its witness reads back in make and
    every ninja here (as a prerequisite and as a target)."""
    ninjas = NINJAS
    if refused in OLD_NINJA_ONLY:
        ninjas = [n for n in NINJAS if _version(n) < (1, 12)]
        if not ninjas:
            pytest.skip(f"{refused!r} is read as it is by ninja 1.12 and later; no older one here")
    name = WITNESSES[refused]
    assert unwritable(name) is not None, name
    c = refused[0]
    for k, text in enumerate(_plain_writings(name, c)):
        folder = tmp_path / str(k)
        assert not _read_written(folder, name, text, ninjas), (refused, name, text)


def _read_written(folder: Path, name: str, text: str, ninjas: list[str]) -> bool:
    """Whether the depfile line ``text`` (for a file named ``name``) reads back as ``name``
    in make and ninja, as a prerequisite and as a target, with nothing run and no warning."""
    folder.mkdir()
    for decoy in DECOYS:
        _create(folder, decoy)
    _create(folder, name)
    _create(folder, "dep")
    data = os.fsencode(text)
    (folder / "p.d").write_bytes(b"out: " + data + b"\n\t$(file >p.got,$^)\n")
    (folder / "Makefile").write_bytes(b"-include p.d\n")
    made = _run("make", "-s", cwd=folder)
    got = folder / "p.got"
    make_ok = made.returncode == 0 and not made.stderr and got.exists()
    make_ok = make_ok and got.read_bytes() == os.fsencode(name) + b"\n"
    (folder / "t.d").write_bytes(data + b": dep\n\t$(file >t.got,$@)\n")
    (folder / "Makefile").write_bytes(b"-include t.d\n")
    made = _run("make", "-s", cwd=folder)
    got = folder / "t.got"
    make_ok = make_ok and made.returncode == 0 and not made.stderr and got.exists()
    make_ok = make_ok and got.read_bytes() == os.fsencode(name) + b"\n"
    (folder / "n.d").write_bytes(b"out: " + data + b"\n")
    rule = "rule r\n  command = :\n  depfile = n.d\n  deps = gcc\nbuild out: r\n"
    (folder / "build.ninja").write_text(rule)
    for ninja in ninjas:
        (folder / ".ninja_deps").unlink(missing_ok=True)
        (folder / ".ninja_log").unlink(missing_ok=True)
        ran = _run(ninja, cwd=folder)
        listed = _run(ninja, "-t", "deps", "out", cwd=folder).stdout.split(b"\n")
        deps = [line[4:] for line in listed if line.startswith(b"    ")]
        make_ok = make_ok and ran.returncode == 0 and deps == [os.fsencode(name)]
    return make_ok


# -- the paths tribuild writes: refused before anything is written, or read back ----------


def test_an_output_folder_no_depfile_can_name_is_a_configuration_error(mini, cli):
    toml = mini / "Tribuild.toml"
    toml.write_text(toml.read_text().replace('out = "out"', 'out = "o=ut"'))
    code, _, err = cli(["build", "-q"], mini)
    assert code == 2 and "Tribuild.toml:4:7: error: output folder `o=ut` cannot be" in err, err
    assert "no depfile can name (make reads the line as a variable assignment" in err
    assert not (mini / "o=ut").exists()


def test_compile_refuses_a_module_or_a_path_no_depfile_can_name(mini, cli, tmp_path):
    code, _, err = cli(["compile", "models/net.tri", "-o", "a|b.py", "--depfile", "a.d"], mini)
    assert code == 2 and "a|b.py: error: -o names a path the depfile cannot name" in err, err
    assert not (mini / "a|b.py").exists() and not (mini / "a.d").exists()
    code, _, _ = cli(["compile", "models/net.tri", "-o", "a|b.py"], mini)  # no depfile: fine
    assert code == 0 and (mini / "a|b.py").exists()
    # a project reached through a folder name no depfile can hold, from a build folder outside
    odd = Path(shutil.copytree(mini, tmp_path / "x;y" / "mini"))
    build = tmp_path / "build"
    build.mkdir()
    source = "../x;y/mini/models/net.tri"
    code, _, err = cli(["compile", source, "-o", "net.py", "--depfile", "net.d"], build)
    assert code == 2 and "the depfile cannot name `../x;y/mini/models/lib/blocks.tri`" in err
    assert sorted(p.name for p in build.iterdir()) == [] and odd.is_dir()


ODD = "odd a $b #1 é+x.tri"  # escaped `$`, space and `#`, UTF-8 (an import cannot hold `:`)


def _odd_project(mini: Path) -> Path:
    models = mini / "models"
    (models / "lib" / ODD).write_text((models / "lib" / "blocks.tri").read_text())
    net = models / "net.tri"
    net.write_text(net.read_text().replace('"lib/blocks.tri"', f'"lib/{ODD}"'))
    return models / "lib" / ODD


def test_build_depfiles_name_an_odd_import_as_make_reads_it(mini, cli):
    from tests.integration.conftest import tool

    odd = _odd_project(mini)
    assert cli(["build", "-q", "net"], mini)[0] == 0
    (mini / "Makefile").write_text("out/net.py:\n\ttouch $@\n-include out/net.d\n")
    assert "is up to date" in tool("make", cwd=mini).stdout
    os.utime(odd, (3_000_000_000, 3_000_000_000))
    made = tool("make", cwd=mini)
    assert made.returncode == 0 and "touch out/net.py" in made.stdout, made.stderr


@pytest.mark.parametrize("ninja", NINJAS)
def test_compile_depfiles_name_an_odd_import_as_ninja_and_make_read_it(mini, ninja):
    from tests.integration.conftest import TRIBUILD, tool

    odd = _odd_project(mini)
    (mini / "build.ninja").write_text(
        f"rule tri\n  command = {TRIBUILD} compile $in -o $out --depfile $out.d\n"
        "  depfile = $out.d\n  deps = gcc\nbuild gen/net.py: tri models/net.tri\n"
    )
    (mini / "Makefile").write_text(
        f"TRIBUILD := {TRIBUILD}\ngen/m.py: models/net.tri\n"
        "\t$(TRIBUILD) compile $< -o $@ --depfile $@.d\n-include gen/m.py.d\n"
    )
    for tool_args, again in (((ninja,), "no work to do"), (("make",), "is up to date")):
        first = tool(*tool_args, cwd=mini)
        assert first.returncode == 0, first.stdout + first.stderr
        assert again in tool(*tool_args, cwd=mini).stdout
    recorded = tool(ninja, "-t", "deps", "gen/net.py", cwd=mini).stdout
    assert f"    models/lib/{ODD}\n" in recorded
    odd.write_text(odd.read_text() + "\n# edited\n")
    for tool_args in ((ninja,), ("make",)):
        assert "compile models/net.tri" in tool(*tool_args, cwd=mini).stdout
