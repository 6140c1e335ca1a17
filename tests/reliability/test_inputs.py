"""Bad sources and bad configurations: a clear message, the right exit code, nothing half built.

Sources (``SOURCES``): each case puts one bad file or link in the sources folder (scanned by
`tribuild check`) and, where it can be named, imports it from the ``net`` target (built by
`tribuild build`). Both must exit 1 with an ``error[E...]`` line naming the file and no
traceback; the other targets still build. The 10 MB file is in the slow set.

Configurations (``CONFIGS``): every golden case of ``tests/fixtures/config`` (their messages
are checked there, byte for byte) plus the mistakes below, each written over a project that
was built once: `tribuild build` must exit 2 naming ``Tribuild.toml:LINE:COL`` and leave the
output folder exactly as it was (bytes and mtimes).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.reliability.project import OUT, REPO, tribuild

VALID = (
    "layer Extra() {\n"
    "    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {\n"
    "        return x\n    }\n}\n"
)


def _write(name: str, data: bytes):
    return lambda models: (models / name).write_bytes(data)


def _mkdir(models: Path) -> None:
    (models / "bad.tri").mkdir()


def _loop(models: Path) -> None:
    (models / "bad.tri").symlink_to("bad2.tri")
    (models / "bad2.tri").symlink_to("bad.tri")


def _folder_loop(models: Path) -> None:
    (models / "again").symlink_to(".", target_is_directory=True)
    (models / "up").symlink_to("..", target_is_directory=True)
    (models / "bad.tri").symlink_to("bad.tri")


SOURCES = {
    "not-utf8": _write("bad.tri", VALID.encode() + b"\xff\xfe\xc3("),
    "utf16": _write("bad.tri", VALID.encode("utf-16")),
    "nul-bytes": _write("bad.tri", VALID.encode().replace(b"Extra", b"Ex\x00tra")),
    "only-nul": _write("bad.tri", b"\x00" * 4096),
    "directory": _mkdir,
    "symlink-loop": _loop,
    "folder-loops": _folder_loop,
    "dangling-symlink": lambda models: (models / "bad.tri").symlink_to("nowhere.tri"),
}
SLOW_SOURCES = {
    "10MB-binary": _write("bad.tri", os.urandom(10 * 2**20)),
    "10MB-one-line": _write("bad.tri", b"layer " + b"A" * (10 * 2**20) + b" {}\n"),
}
DIAGNOSTIC = re.compile(r"models/bad\.tri:\d+:\d+: error\[E\d{4}\]")


def _bad_source(project: Path, case: str, make) -> None:
    make(project / "models")
    done = tribuild(project, "check")
    assert done.returncode == 1, (case, done.stderr)
    assert DIAGNOSTIC.search(done.stderr) and "Traceback" not in done.stderr, done.stderr
    net = project / "models" / "net.tri"
    net.write_text(
        net.read_text().replace(
            'import "lib/blocks.tri"', 'import "lib/blocks.tri"\nimport "bad.tri"'
        )
    )
    done = tribuild(project, "build", "-k")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert DIAGNOSTIC.search(done.stderr), done.stderr
    assert (project / OUT / "mlp.py").exists()  # the other targets still build


@pytest.mark.parametrize("case", sorted(SOURCES))
def test_bad_source(project, case):
    _bad_source(project, case, SOURCES[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SLOW_SOURCES))
def test_huge_source(project, case):
    _bad_source(project, case, SLOW_SOURCES[case])


# -- configurations ---------------------------------------------------------------------------

GOLDEN = sorted(p.name for p in (REPO / "tests" / "fixtures" / "config").glob("error_*.toml"))
CONFIGS = {
    "not-utf8": b'[project]\nname = "\xff"\n',
    "nul": b'[project]\nname = "a\x00b"\n',
    "truncated": b'[project]\nname = "mini"\n[targets.net]\nentry = "models/net.tri',
    "empty-target": b'[project]\nname = "mini"\n[targets.net]\n',
    "dotdot-out": b'[project]\nname = "mini"\nout = 3\n',
    "target-dotdot": b'[project]\nname = "mini"\n[targets.".."]\nentry = "models/net.tri:Net"\n',
    "target-slash": b'[project]\nname = "mini"\n[targets."a/b"]\nentry = "models/net.tri:Net"\n',
    "entry-absolute": b'[project]\nname = "mini"\n[targets.net]\nentry = "/etc/passwd.tri:Net"\n',
    "inf-size": b'[project]\nname = "mini"\n[cache]\nmax_size_mb = 1e400\n',
    "args-table": (
        b'[project]\nname = "mini"\n[targets.net]\nentry = "models/net.tri:Net"\n'
        b"args = { width = { a = 1 } }\n"
    ),
}
LOCATED = re.compile(r"Tribuild\.toml:\d+:\d+: error: ")


@pytest.fixture(scope="module")
def built_once(tmp_path_factory):
    from tests.reliability.project import make_project

    root = make_project(tmp_path_factory.mktemp("config") / "project")
    assert tribuild(root, "build", "-q").returncode == 0
    return root


def _state(root: Path) -> dict:
    return {
        p.relative_to(root / OUT).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted((root / OUT).rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("case", GOLDEN + sorted(CONFIGS))
def test_bad_config_builds_nothing(built_once, case):
    toml = built_once / "Tribuild.toml"
    good = toml.read_bytes()
    before = _state(built_once)
    bad = CONFIGS.get(case) or (REPO / "tests" / "fixtures" / "config" / case).read_bytes()
    try:
        toml.write_bytes(bad)
        done = tribuild(built_once, "build")
    finally:
        toml.write_bytes(good)
    assert done.returncode == 2, (case, done.stderr)
    assert LOCATED.search(done.stderr) and "Traceback" not in done.stderr, done.stderr
    assert _state(built_once) == before
