"""A hostile environment: a full disk, a read-only output folder, two builds at once.

- *full disk*: the output folder on a tiny tmpfs (mounted when running as root and ``mount``
  works; else skipped, and the in-process case below still runs), filled up, then a build
  whose outputs change; in-process, ``os.replace`` raising ENOSPC halfway through the batch.
- *read-only*: the same tmpfs remounted read-only (root ignores ``chmod``, not a read-only
  mount).
Each must exit 1 or 2 with a one-line reason and no traceback, and leave every output with
its previous bytes (or, for the in-process case, its previous or new bytes), and the next
build with space must match a clean build.
- *concurrency*: three builds of one project started at once: all succeed, one or two say
  they wait for the lock, and the outputs match a clean build; a build started while
  `tribuild watch` runs says it waits and builds once watch stops.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time

import pytest

from tests.lines import IGNORED_SIGINT, Lines
from tests.reliability.project import (
    OUT,
    check_python,
    command,
    env,
    outputs,
    set_version,
    temp_files,
    tribuild,
)


@pytest.fixture
def tmpfs(project):
    folder = project / OUT
    folder.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], capture_output=True
        ).returncode
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


def _refused(project, before) -> None:
    set_version(project, "b")
    done = tribuild(project, "build", "-q")
    assert done.returncode in (1, 2), done.stderr
    assert "cannot write outputs" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert outputs(project) == before


def test_disk_full(project, tmpfs, references):
    assert tribuild(project, "build", "-q").returncode == 0
    before = outputs(project)
    filler = tmpfs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as err:
        assert err.errno == errno.ENOSPC
    finally:
        os.close(fd)
    before["filler"] = filler.read_bytes()
    _refused(project, before)
    assert temp_files(tmpfs) == []
    filler.unlink()
    assert tribuild(project, "build", "-q").returncode == 0
    assert outputs(project) == references["b"]


def test_read_only_output_folder(project, tmpfs, references):
    assert tribuild(project, "build", "-q").returncode == 0
    before = outputs(project)
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    _refused(project, before)
    subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
    assert tribuild(project, "build", "-q").returncode == 0
    assert outputs(project) == references["b"]


def test_enospc_halfway_through_the_renames(project, references, cli, monkeypatch):
    assert tribuild(project, "build", "-q").returncode == 0
    set_version(project, "b")
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), dst)
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    code, _, err = cli(["build", "-q"], project)
    assert code == 2 and "No space left on device" in err, err
    monkeypatch.setattr(os, "replace", real)
    files = outputs(project)
    for rel, data in files.items():
        assert data in (references["a"].get(rel), references["b"].get(rel)), rel
    check_python(files)
    assert temp_files(project / OUT) == []
    code, _, err = cli(["build", "-q"], project)
    assert code == 0 and outputs(project) == references["b"], err


def test_builds_at_once(project, references):
    set_version(project, "b")
    procs = [
        subprocess.Popen(
            command("build", "-j2"),
            cwd=project,
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert all(code == 0 for code, _ in results), results
    assert outputs(project) == references["b"]
    waited = [err for _, err in results if "waiting for another tribuild (pid" in err]
    assert len(waited) <= 2 and all("Traceback" not in err for _, err in results)


def test_watch_and_build_at_once(project, references):
    """`tribuild watch` holds the project lock from start to stop (``watch_loop``): a build
    started meanwhile says it waits, then builds once watch stops; nothing is lost."""
    watch = subprocess.Popen(
        command("watch", "--json"),
        cwd=project,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    build = None
    try:
        first = Lines(watch.stdout).next(120, "watch's first event")  # its first build is done
        assert first, "watch printed no event"
        time.sleep(1)  # a SIGINT while watch starts its threads hangs it (report of issue 8)
        set_version(project, "b")
        build = subprocess.Popen(
            command("build"),
            cwd=project,
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        build_err = Lines(build.stderr)
        waiting = build_err.next(120, "the build to say it waits")
        assert "waiting for another tribuild (pid" in waiting, waiting
    finally:
        watch.send_signal(signal.SIGINT)
        try:
            watch.wait(timeout=60)
        except subprocess.TimeoutExpired:
            watch.kill()
            if build is not None:
                build.kill()
            raise AssertionError("watch still running 60 s after SIGINT" + IGNORED_SIGINT) from None
        err = watch.stderr.read()
    assert "Traceback" not in err, err
    rest = build_err.rest(300, "the build to finish once watch stopped")
    assert build.wait(timeout=60) == 0
    build.stderr.close()
    assert "Traceback" not in rest, rest
    assert outputs(project) == references["b"]
