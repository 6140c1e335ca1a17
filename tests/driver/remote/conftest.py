"""Fixtures of the remote cache's tests: a real ``redis-server`` per test, and clones of the
zoo that share it. Without ``redis-server`` on PATH every test that needs one is skipped,
and pytest's summary (``-ra``) says how many and why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.driver.remote.server import REDIS_SERVER, SKIP_REASON, RedisServer

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def server_factory(tmp_path):
    """``server_factory(name, extra_config)``: a started RedisServer, stopped after the test;
    the test is skipped when ``redis-server`` is not installed."""
    if REDIS_SERVER is None:
        pytest.skip(SKIP_REASON)
    started: list[RedisServer] = []

    def make(name: str, extra: str = "") -> RedisServer:
        started.append(RedisServer(tmp_path / name, extra).start())
        return started[-1]

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def redis_server(server_factory):
    return server_factory("redis")


@pytest.fixture
def remote_env(monkeypatch, redis_server):
    """Builds in this process use ``redis_server``, unsigned, reading and writing."""
    monkeypatch.setenv("TRIBUILD_REMOTE_CACHE", redis_server.url)
    for name in ("TRIBUILD_CACHE_SECRET", "TRIBUILD_REMOTE_READ", "TRIBUILD_REMOTE_WRITE"):
        monkeypatch.delenv(name, raising=False)
    return redis_server


@pytest.fixture
def clone(tmp_path):
    """``clone(name)``: a fresh copy of the zoo (no cache, no outputs) at tmp_path/name."""

    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(REPO / "models", dest / "models")
        shutil.copy(REPO / "Tribuild.toml", dest / "Tribuild.toml")
        return dest

    return make


def snapshot(folder: Path) -> dict[str, bytes]:
    """The outputs of a zoo clone: relative path -> bytes (the outputs record included)."""
    out = folder / "build" / "zoo"
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="session")
def zoo_reference(tmp_path_factory) -> dict[str, bytes]:
    """The outputs of a clean local build of the zoo, with no remote, in its own process."""
    import os
    import subprocess
    import sys

    dest = tmp_path_factory.mktemp("reference") / "zoo"
    shutil.copytree(REPO / "models", dest / "models")
    shutil.copy(REPO / "Tribuild.toml", dest / "Tribuild.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUILD_REMOTE")}
    subprocess.run(
        [sys.executable, "-m", "tribuild", "build", "-q"],
        cwd=dest,
        env=env,
        check=True,
        timeout=600,
    )
    return snapshot(dest)


def pytest_terminal_summary(terminalreporter) -> None:
    """One line saying how many tests needed a redis-server and were skipped for want of it."""
    skipped = [
        r
        for r in terminalreporter.stats.get("skipped", [])
        if isinstance(r.longrepr, tuple) and SKIP_REASON in str(r.longrepr[2])
    ]
    if skipped:
        terminalreporter.write_line(
            f"remote cache: {len(skipped)} tests skipped: {SKIP_REASON}", yellow=True
        )
