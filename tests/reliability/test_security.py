"""Security: a shared cache never runs code, the project root and the output folder are never
left, and user text never becomes code in a generated module.

- *canary*: a file a payload would create (``touch CANARY``) if anything ran it; every test
  here checks it is absent.
- Crafted stores keep valid digests and checksums (``store_edit``), so what is refused is
  what they mean, not their damage.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from tests.reliability import store_edit
from tests.reliability.project import CACHE, OUT, outputs, set_version, tribuild
from tribuild.engine.store import codec


class _Pickled:
    def __reduce__(self):
        return (os.system, ("touch CANARY",))


def payloads(canary: Path) -> dict[str, bytes]:
    touch = f"touch {canary}"
    return {
        "class os.system": json.dumps({"$c": "os.system", "v": [touch]}).encode(),
        "class subprocess.Popen": json.dumps(
            {"$c": "subprocess.Popen", "v": [["sh", "-c", touch]]}
        ).encode(),
        "enum builtins.eval": json.dumps(
            {"$e": "builtins.eval", "v": f"__import__('os').system('{touch}')"}
        ).encode(),
        "pickle": pickle.dumps(_Pickled()).replace(b"touch CANARY", touch.encode()),
    }


def test_codec_never_resolves_unregistered_names(tmp_path):
    canary = tmp_path / "CANARY"
    for name, data in payloads(canary).items():
        with pytest.raises(codec.CodecError):
            codec.decode(data)
        assert not canary.exists(), name


@pytest.mark.parametrize(
    "payload", ["class os.system", "class subprocess.Popen", "enum builtins.eval", "pickle"]
)
def test_crafted_pack_entries_are_refused(project, references, payload):
    assert tribuild(project, "build", "-q").returncode == 0
    canary = project / "CANARY"
    assert store_edit.replace_entries(project / CACHE, payloads(canary)[payload]) > 10
    set_version(project, "b")
    done = tribuild(project, "build", "-q")
    assert done.returncode == 0, done.stderr
    assert outputs(project) == references["b"] and not canary.exists()
    assert "is not registered with the codec" in done.stderr or "not JSON" in done.stderr


def test_crafted_query_name_is_dropped(project, references):
    assert tribuild(project, "build", "-q").returncode == 0
    graph = store_edit.graph_file(project / CACHE)
    meta, ints = store_edit.read(graph)
    meta["queries"] = ["os.system"] + meta["queries"][1:]
    store_edit.write(graph, meta, ints)
    set_version(project, "b")
    done = tribuild(project, "build", "-q")
    assert done.returncode == 0 and outputs(project) == references["b"], done.stderr


def test_crafted_pack_name_cannot_leave_the_cache(project, references):
    assert tribuild(project, "build", "-q").returncode == 0
    graph = store_edit.graph_file(project / CACHE)
    meta, ints = store_edit.read(graph)
    store_edit.write(graph, meta | {"packs": [["../models/net.tri"] + meta["packs"][0][1:]]}, ints)
    set_version(project, "b")
    done = tribuild(project, "build", "-q")
    assert done.returncode == 0 and outputs(project) == references["b"], done.stderr
    assert "bad pack name" in done.stderr


def test_crafted_key_arguments_are_refused(project, references):
    assert tribuild(project, "build", "-q").returncode == 0
    canary = project / "CANARY"
    tagged = {"$c": "os.system", "v": [f"touch {canary}"]}
    assert store_edit.replace_tagged_args(project / CACHE, tagged) > 0
    set_version(project, "b")
    done = tribuild(project, "build", "-q")
    assert not canary.exists()
    assert done.returncode == 0 and outputs(project) == references["b"], done.stderr


# -- the project root ------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.tri").write_text(
        (
            Path(__file__).parents[1]
            / "driver"
            / "fixtures"
            / "mini"
            / "models"
            / "lib"
            / "blocks.tri"
        ).read_text()
    )
    return folder


def test_import_through_symlink_outside_root_is_refused(project, outside):
    (project / "models" / "lib" / "evil.tri").symlink_to(outside / "secret.tri")
    net = project / "models" / "net.tri"
    net.write_text(net.read_text().replace('import "lib/blocks.tri"', 'import "lib/evil.tri"'))
    done = tribuild(project, "build", "-q", "net")
    assert done.returncode == 1, done.stderr
    assert "leads outside the project root through a symbolic link" in done.stderr
    assert "Traceback" not in done.stderr


def test_import_through_symlinked_folder_outside_root_is_refused(project, outside):
    (project / "models" / "ext").symlink_to(outside, target_is_directory=True)
    net = project / "models" / "net.tri"
    net.write_text(net.read_text().replace('import "lib/blocks.tri"', 'import "ext/secret.tri"'))
    done = tribuild(project, "build", "-q", "net")
    assert done.returncode == 1 and "outside the project root" in done.stderr, done.stderr


@pytest.mark.parametrize("key", ["sources", "entry"])
def test_config_path_through_symlink_outside_root_is_refused(project, outside, key):
    (project / "ext").symlink_to(outside, target_is_directory=True)
    toml = project / "Tribuild.toml"
    text = toml.read_text()
    if key == "sources":
        text = text.replace('sources = ["models"]', 'sources = ["models", "ext"]')
    else:
        text = text.replace('entry = "models/mlp.tri:MLP"', 'entry = "ext/secret.tri:Dense"')
    toml.write_text(text)
    done = tribuild(project, "build", "-q")
    assert done.returncode == 2, done.stderr
    assert "leads outside the project root through a symbolic link" in done.stderr
    assert "Tribuild.toml:" in done.stderr and not (project / OUT).exists()


# -- the output folder -----------------------------------------------------------------------


def test_symlinked_kernel_folder_is_not_written_through(project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / OUT).mkdir()
    (project / OUT / "kernels").symlink_to(elsewhere, target_is_directory=True)
    done = tribuild(project, "build", "-q")
    assert done.returncode == 2 and "leads outside the output folder" in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []


def test_symlinked_output_folder_is_the_output_folder(project, tmp_path, references):
    """``out`` itself may be a link (the user's choice, like an absolute ``out``)."""
    real = tmp_path / "real-out"
    real.mkdir()
    (project / OUT).symlink_to(real, target_is_directory=True)
    assert tribuild(project, "build", "-q").returncode == 0
    assert outputs(project) == references["a"]


def test_output_symlink_at_an_output_path_is_replaced_not_followed(project, tmp_path, references):
    victim = tmp_path / "victim.py"
    victim.write_bytes(b"precious\n")
    (project / OUT).mkdir()
    (project / OUT / "net.py").symlink_to(victim)
    assert tribuild(project, "build", "-q").returncode == 0
    assert victim.read_bytes() == b"precious\n" and outputs(project) == references["a"]


def test_crafted_output_record_cannot_delete_outside(project, tmp_path, references):
    victim = tmp_path / "victim.py"
    victim.write_bytes(b"precious\n")
    (project / OUT).mkdir()
    from tribuild.driver.noop.manifest import digest

    record = {
        "version": 1,
        "targets": {
            "gone": {"../../victim.py": digest(b"precious\n"), str(victim): digest(b"precious\n")}
        },
    }
    (project / OUT / ".tribuild-outputs.json").write_text(json.dumps(record))
    done = tribuild(project, "build", "-q")
    assert done.returncode == 0, done.stderr
    assert victim.read_bytes() == b"precious\n" and outputs(project) == references["a"]


# -- generated code --------------------------------------------------------------------------

INJECTED = "x\"\"\" + __import__('os').system('touch CANARY') + '''\"\"\"'''.tri"


def test_file_names_that_are_code_are_refused_at_the_entry(project):
    """A target whose entry file's name is Python code: its quotes and parentheses cannot be
    named in a depfile (``base.depnames``), so the entry is refused with the file's name and
    position in Tribuild.toml, and nothing is written. (That the generated docstrings hold
    against such a name anyway: tests/codegen/test_names.py.)"""
    (project / "models" / INJECTED).write_text((project / "models" / "net.tri").read_text())
    (project / "Tribuild.toml").write_text(
        '[project]\nname = "evil"\nsources = ["models"]\nout = "out"\n\n[targets.net]\n'
        f'entry = {json.dumps("models/" + INJECTED + ":Net")}\n'
    )
    done = tribuild(project, "build", "-q")
    assert done.returncode == 2, done.stderr
    assert "Tribuild.toml:7:9: error: target `net` cannot be built" in done.stderr
    assert "no depfile can name" in done.stderr and "rename it" in done.stderr
    assert [rel for rel in outputs(project) if rel.endswith((".py", ".d"))] == []
    assert not (project / "CANARY").exists()


PWNED = "lib/x;touch${IFS}PWNED;.tri"  # issue 38: `;` ran `touch` through make


def test_a_semicolon_in_an_imported_name_runs_nothing_through_make(project, cli):
    """The docs' make rule over a module importing ``x;touch${IFS}PWNED;.tri``: the depfile
    escaped ``$`` but wrote ``;`` as it was, and make ran ``touch PWNED`` (with a file ``x``
    present) from the depfile's rule. Now the import is the error (file, line, column) and
    neither `compile --depfile` nor `build` writes a depfile."""
    from tests.integration.conftest import TRIBUILD, tool

    models = project / "models"
    (models / PWNED).write_text((models / "lib" / "blocks.tri").read_text())
    (models / "lib" / "x").write_text("")
    net = models / "net.tri"
    net.write_text(net.read_text().replace('"lib/blocks.tri"', f'"{PWNED}"'))
    (project / "Makefile").write_text(
        f"TRIBUILD := {TRIBUILD}\ngen/net.py: models/net.tri\n"
        "\t$(TRIBUILD) compile $< -o $@ --depfile $@.d\n-include gen/net.py.d\n"
    )
    for _ in range(2):  # the second run would read a depfile the first wrote
        made = tool("make", cwd=project)
        assert made.returncode == 2 and not (project / "PWNED").exists(), made.stderr
        net.touch()
    line = net.read_text().splitlines().index(f'import "{PWNED}"') + 1
    where = f"models/net.tri:{line}:8: error[E0204]: cannot read imported file `models/{PWNED}`"
    assert where in made.stderr and "its name holds `;`, which no depfile can name" in made.stderr
    assert not (project / "gen" / "net.py.d").exists()
    done = tribuild(project, "build", "-q", "net")
    assert done.returncode == 1 and where in done.stderr, done.stderr
    assert not (project / OUT / "net.d").exists() and not (project / "PWNED").exists()


def test_control_characters_in_file_names_are_refused(project):
    name = "evil\n\ttouch CANARY\n.tri"
    (project / "models" / "lib" / name).write_text(
        (project / "models" / "lib" / "blocks.tri").read_text()
    )
    net = project / "models" / "net.tri"
    net.write_text(net.read_text().replace('"lib/blocks.tri"', json.dumps("lib/" + name)))
    done = tribuild(project, "build", "-q", "net")
    assert done.returncode == 1 and "control character" in done.stderr, done.stderr
    assert not (project / OUT / "net.d").exists()


def test_diagnostics_escape_control_characters(project):
    """L7: diagnostics echoed raw ESC and BEL from file names and source lines, so a file
    could send escape sequences to the terminal of whoever built it."""
    (project / "models" / "bell\x07\x1b[2J.tri").write_text("layer Named() {}\n")
    bad = project / "models" / "bad.tri"
    bad.write_text("layer Bad() {\n    let a = Linear(4, 4) \x1b]0;owned\x07 oops\n}\n")
    done = tribuild(project, "check")
    assert done.returncode == 1, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr, repr(done.stderr)
    assert "bell\\x07\\x1b[2J.tri" in done.stderr and "\\x1b]0;owned\\x07" in done.stderr


def test_check_json_prints_one_object_on_a_configuration_error(project):
    """L7: `check --format json` printed nothing on stdout for a configuration error."""
    from tests.schemas import validate

    toml = project / "Tribuild.toml"
    toml.write_text(toml.read_text().replace('out = "out"', "out = 3"))
    done = tribuild(project, "check", "--format", "json")
    assert done.returncode == 2, done.stderr
    data = json.loads(done.stdout)
    validate("check", data)
    assert data["diagnostics"] == [] and data["errors"] == 1
    (problem,) = data["config_errors"]
    assert problem["path"].endswith("Tribuild.toml") and problem["line"] == 4, problem
