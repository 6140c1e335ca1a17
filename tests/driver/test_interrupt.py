"""Ctrl-C during a build: one line, exit 130, no traceback from the build or its workers, and
the next build makes what a clean one makes. SIGTERM unwinds the same way, exits 143 and
gives make's job tokens back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from benchmarks.bench_build import write_synthetic
from tests.lines import IGNORED_SIGINT, Lines

from .conftest import snapshot

TRIBUILD = [sys.executable, "-c", "from tribuild.cli import entry; entry()"]


def test_an_interrupted_build_says_so_in_one_line_and_exits_130(tmp_path):
    project = tmp_path / "p"
    write_synthetic(project, files=8)
    build = subprocess.Popen(
        [*TRIBUILD, "build", "-j", "2"],
        cwd=project,
        text=True,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    err = Lines(build.stderr)
    try:
        first = err.next(120, "the build's first unit")  # it has started: "[1/8] ..."
        os.killpg(build.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        rest = err.rest(120, "the interrupted build to exit", IGNORED_SIGINT)
    finally:
        build.kill()
    assert first.startswith("[1/8]") and build.wait(timeout=120) == 130, first + rest
    assert rest.splitlines()[-1] == "tribuild: interrupted" and "Traceback" not in rest, rest
    again = subprocess.run(
        [*TRIBUILD, "build", "-q", "-j", "2"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    clean = tmp_path / "clean"
    write_synthetic(clean, files=8)
    subprocess.run([*TRIBUILD, "build", "-q", "-j", "1"], cwd=clean, check=True, timeout=300)
    assert again.returncode == 0 and snapshot(project / "out") == snapshot(clean / "out")


def test_a_terminated_build_gives_make_its_tokens_back_and_exits_143(tmp_path):
    project = tmp_path / "p"
    write_synthetic(project, files=8)
    fifo = str(tmp_path / "jobs")
    os.mkfifo(fifo)
    keeper = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # make's end: two free tokens
    os.write(keeper, b"ab")
    env = dict(os.environ, MAKEFLAGS=f" -j3 --jobserver-auth=fifo:{fifo}")
    build = subprocess.Popen(
        [*TRIBUILD, "build", "-j", "3"], cwd=project, text=True, stderr=subprocess.PIPE, env=env
    )
    first = build.stderr.readline()  # a unit has started: the workers hold tokens
    build.send_signal(signal.SIGTERM)  # as `kill PID`: the build's process only
    rest = build.stderr.read()
    assert first.startswith("[1/8]") and build.wait(timeout=120) == 143, first + rest
    assert rest.splitlines()[-1] == "tribuild: terminated" and "Traceback" not in rest, rest
    try:
        returned = os.read(keeper, 10)
    except BlockingIOError:  # none came back
        returned = b""
    finally:
        os.close(keeper)
    assert sorted(returned) == sorted(b"ab")
