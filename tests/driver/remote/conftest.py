"""Fixtures of the remote cache's tests: a real ``redis-server`` per test, and clones of the
zoo that share it. Without ``redis-server`` on PATH every test here is skipped, and pytest's
summary (``-ra``) says how many and why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.driver.remote.server import REDIS_SERVER, SKIP_REASON, RedisServer

REPO = Path(__file__).resolve().parents[3]


def pytest_collection_modifyitems(config, items) -> None:
    if REDIS_SERVER is None:
        here = Path(__file__).parent
        for item in items:
            if here in Path(item.fspath).parents:
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


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
