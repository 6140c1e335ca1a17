"""Reliability, round three (issue 38, "the rest"): each case an attack that once gave a wrong
or hidden answer, run against the real command line.

- *escaped*: a control character from a file or an argument reaches the terminal as ``\\x1b``,
  never raw (``base.printable``).
"""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest

from tests.reliability.project import CACHE, tribuild
from tests.schemas import validate, validate_sarif

ESC = "\x1b]0;owned\x07\x1b[2J"


def _add(project, text: str) -> None:
    toml = project / "Tribuild.toml"
    toml.write_text(toml.read_text() + text)


# -- Tribuild.toml -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sitecustomize", "usercustomize"])
def test_target_names_python_imports_at_start_are_refused(project, name):
    _add(project, f'\n[targets.{name}]\nentry = "models/mlp.tri:MLP"\n')
    done = tribuild(project, "build", "-q")
    assert done.returncode == 2 and f"would shadow the module `{name}`" in done.stderr
    assert not (project / "out" / f"{name}.py").exists()


@pytest.mark.parametrize(
    ("folder", "why"),
    [
        (".", "is the project root or holds it"),
        ("..", "is the project root or holds it"),
        ("models", "holds a source folder"),
        ("out", "is, holds or lies in the output folder"),
        ("out/cache", "is, holds or lies in the output folder"),
    ],
)
def test_a_cache_folder_that_would_overwrite_user_files_is_refused(project, folder, why):
    """`dir = "."` let `build` overwrite the user's build-manifest.json and `cache clear`
    delete a user's graph-1234.json."""
    mine = {"build-manifest.json": b"mine\n", "graph-1234.json": b"mine too\n"}
    for name, data in mine.items():
        (project / name).write_bytes(data)
    _add(project, f'\n[cache]\ndir = "{folder}"\n')
    for args in (("build", "-q"), ("cache", "clear")):
        done = tribuild(project, *args)
        assert done.returncode == 2 and f"cache folder `{folder}` {why}" in done.stderr
    assert {name: (project / name).read_bytes() for name in mine} == mine


# -- values: one rule for every way they come in --------------------------------------------


def test_an_argument_beyond_64_bits_or_infinite_is_refused_everywhere(project):
    huge = "99999999999999999999999"
    for value in (huge, "inf", "1e999", "nan"):
        done = tribuild(
            project, "compile", "models/mlp.tri", "-o", "x.py", "--arg", f"hidden={value}"
        )
        assert done.returncode == 2 and "expected a 64-bit integer, a finite float" in done.stderr
    _add(project, f'\n[targets.huge]\nentry = "models/mlp.tri:MLP"\nargs = {{ hidden = {huge} }}\n')
    done = tribuild(project, "build", "-q")
    assert done.returncode == 2 and f"found the integer {huge}" in done.stderr
    assert not (project / "x.py").exists() and not (project / "out").exists()


def test_a_constant_that_overflows_a_float_is_an_error_not_infinity(project):
    mlp = project / "models" / "mlp.tri"
    text = mlp.read_text()
    mlp.write_text(
        "let EPS: float = 1e308 * 10.0\n\n"
        + text.replace("Linear(hidden, 10)", "Linear(hidden, 10, bias=EPS > 0.0)")
    )
    done = tribuild(project, "build", "-q", "mlp")
    assert done.returncode == 1, done.stderr
    assert "`*` overflows a float: it would be infinity" in done.stderr
    assert not (project / "out" / "mlp.py").exists()


# -- sources --------------------------------------------------------------------------------


def test_two_byte_order_marks_show_the_real_error(project):
    """The second mark lexed as an unknown character and took the first item with it; the
    target said only "defines no layer"."""
    mlp = project / "models" / "mlp.tri"
    text = mlp.read_text()
    mlp.write_text("\ufeff\ufeff" + text[text.index("layer") :], encoding="utf-8")
    done = tribuild(project, "build", "-q", "mlp")
    assert done.returncode == 2, done.stderr
    assert "defines no layer `MLP`" in done.stderr
    assert (
        "its first syntax error, which may hide one: line 1, column 1: invalid character "
        "'\\ufeff' (a byte order mark: remove it)" in done.stderr
    )


# -- the cache folder's files ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_remote_stats_that_is_no_regular_file_is_not_read(project, kind):
    """As a link to /dev/zero `cache stats` died with a MemoryError, as a FIFO it hung."""
    assert tribuild(project, "build", "-q").returncode == 0
    stats = project / CACHE / "remote-stats.json"
    if kind == "fifo":
        os.mkfifo(stats)
    else:
        stats.symlink_to("/dev/zero")
    done = tribuild(project, "cache", "stats", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "(last build)" not in done.stdout and "Error" not in done.stderr


# -- text that reaches the terminal ---------------------------------------------------------


def test_control_characters_in_arguments_are_refused_and_escaped(project):
    for args in (("build", f"net{ESC}"), ("-C", f"x{ESC}", "build"), ("explain", ESC)):
        done = tribuild(project, *args)
        assert done.returncode == 2, done.stderr
        assert "\x1b" not in done.stderr and "\x07" not in done.stderr, repr(done.stderr)
        assert "\\x1b" in done.stderr and "holds a control character" in done.stderr


def test_github_annotations_escape_control_characters(project):
    """A file's name reaches the annotation's ``file=`` and its message."""
    (project / "models" / f"bell{ESC}.tri").write_text("layer Named() {}\n")
    net = project / "models" / "net.tri"
    net.write_text(net.read_text().replace('"lib/blocks.tri"', f'"bell{ESC}.tri"'))
    for command in ("check", "build"):
        done = tribuild(project, command, "--format", "github")
        assert done.returncode == 1, done.stderr
        assert "::error file=models/" in done.stdout, done.stdout
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout, repr(done.stdout)
        assert "bell\\x1b]0;owned\\x07" in done.stdout


def test_the_remote_url_warning_is_escaped(project):
    """The URL can come from a repository's Tribuild.toml (TOML's \\u escapes hold ESC)."""
    _add(project, '\n[cache]\nremote = "redis://127.0.0.1:1/0\\u001b]0;owned\\u0007"\n')
    done = tribuild(project, "build", "-q")
    assert done.returncode == 0, done.stderr
    assert "warning: remote cache redis://127.0.0.1:1/0\\x1b]0;owned\\x07" in done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr


# -- machine-readable output on a configuration error ---------------------------------------


def test_every_format_prints_its_document_on_a_configuration_error(project):
    toml = project / "Tribuild.toml"
    toml.write_text(toml.read_text().replace('out = "out"', "out = 3"))
    done = tribuild(project, "build", "--format", "json")
    assert done.returncode == 2, done.stderr
    data = json.loads(done.stdout)
    validate("build", data)
    assert data["ok"] is False and data["opt_level"] is None and data["targets"] == []
    assert [p["line"] for p in data["config_errors"]] == [4]
    done = tribuild(project, "check", "--format", "sarif")
    assert done.returncode == 2, done.stderr
    sarif = json.loads(done.stdout)
    validate_sarif(sarif)
    (result,) = sarif["runs"][0]["results"]
    assert result["level"] == "error" and "out" in result["message"]["text"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    for command in ("check", "build"):
        done = tribuild(project, command, "--format", "github")
        assert done.returncode == 2, done.stderr
        assert done.stdout.startswith("::error file=Tribuild.toml,line=4,col=7,"), done.stdout


# -- a remote that is not Redis -------------------------------------------------------------


def _fake_server(reply: bytes) -> socket.socket:
    """A TCP server answering ``reply`` to whatever it reads (a slow, wrong server)."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                while conn.recv(65536):
                    conn.sendall(reply)
            except OSError:
                pass

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return server


@pytest.mark.parametrize(
    ("reply", "what"),
    [(b"+OK\r\n", "a string"), (b":5\r\n", "an integer"), (b"*1\r\n$1\r\nx\r\n", "an array")],
)
def test_a_server_that_is_not_redis_is_named_as_such(reply, what):
    pytest.importorskip("redis")
    from tribuild.remote.link import Link
    from tribuild.remote.options import RemoteSettings

    server = _fake_server(reply)
    try:
        port = server.getsockname()[1]
        link = Link(RemoteSettings(f"redis://127.0.0.1:{port}/0", True, True, 500, 500, "t:"))
        assert link.get_many(["a"]) == [None] and link.down
        line = link.warning_line()
        assert line is not None and "AttributeError" not in line, line
        assert (
            f"does not answer as Redis does: the client could not read its reply ({what} " in line
        )
        link.close()
    finally:
        server.close()
