"""A remote that is dead, hanging, killed mid-build, full or not Redis at all never fails a
build: it exits 0 with the bytes of a clean local build and one warning line."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.driver.remote.conftest import snapshot
from tests.driver.remote.server import RedisServer, free_port


def stats(folder: Path) -> dict:
    return json.loads((folder / ".tribuild-cache" / "remote-stats.json").read_text())


def _set_remote(monkeypatch, url: str, **toml) -> None:
    monkeypatch.setenv("TRIBUILD_REMOTE_CACHE", url)
    monkeypatch.delenv("TRIBUILD_CACHE_SECRET", raising=False)


def _with_timeouts(folder: Path, connect_ms: int, reply_ms: int) -> None:
    toml = folder / "Tribuild.toml"
    toml.write_text(
        toml.read_text().replace(
            "[cache]\n",
            f"[cache]\nremote_connect_timeout_ms = {connect_ms}\nremote_timeout_ms = {reply_ms}\n",
        )
    )


def test_nothing_listening(clone, cli, monkeypatch, zoo_reference):
    pytest.importorskip("redis")
    _set_remote(monkeypatch, f"redis://127.0.0.1:{free_port()}/0")
    folder = clone("dead")
    code, _, err = cli(["build"], folder)
    assert code == 0
    assert err.count("warning: remote cache") == 1 and "building locally" in err
    assert "ConnectionError" in err
    got = stats(folder)
    assert (got["errors"], got["hits"], got["entries_written"]) == (1, 0, 0)
    assert snapshot(folder) == zoo_reference
    code, out, _ = cli(["cache", "stats"], folder)  # it said `warning: warning:` (issue 37)
    assert code == 0 and "  warning: remote cache " in out and "warning: warning" not in out


def test_a_hanging_server_costs_one_timeout_per_build(
    redis_server, clone, cli, monkeypatch, zoo_reference
):
    _set_remote(monkeypatch, redis_server.url)
    folder = clone("hanging")
    _with_timeouts(folder, 200, 300)
    redis_server.pause()  # accepts connections (the kernel does), never answers
    try:
        code, _, err = cli(["build", "-q"], folder)
    finally:
        redis_server.resume()
    assert code == 0 and err.count("warning: remote cache") == 1 and "Timeout" in err
    got = stats(folder)
    assert got["errors"] == 1  # down after the first: no second wait
    assert got["seconds"] < 0.2 + 0.3 + 0.4  # the two timeouts, and slack for a busy machine
    assert snapshot(folder) == zoo_reference


class _Garbage:
    """A TCP server on loopback that answers every request with bytes that are not RESP."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    while conn.recv(65536):
                        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n\xff\xfe garbage\r\n")
                except OSError:
                    pass


def test_a_server_that_answers_garbage(clone, cli, monkeypatch, zoo_reference):
    pytest.importorskip("redis")
    garbage = _Garbage()
    _set_remote(monkeypatch, f"redis://127.0.0.1:{garbage.port}/0")
    folder = clone("garbage")
    code, _, err = cli(["build", "-q"], folder)
    garbage.sock.close()
    assert code == 0 and err.count("warning: remote cache") == 1
    assert stats(folder)["errors"] == 1 and snapshot(folder) == zoo_reference


def test_a_full_server(server_factory, clone, cli, monkeypatch, zoo_reference):
    # noeviction: writes are refused (OOM); the build goes on and says so once
    full = server_factory("full", "maxmemory-policy noeviction")
    try:
        _set_remote(monkeypatch, full.url)
        full.client().set("filler", b"x" * 2_000_000)
        full.client().config_set("maxmemory", "1mb")
        folder = clone("full")
        code, _, err = cli(["build", "-q"], folder)
        assert code == 0 and err.count("warning: remote cache") == 1 and "OutOfMemory" in err
        assert snapshot(folder) == zoo_reference
    finally:
        full.stop()
    # allkeys-lru: a server too small for the zoo evicts; every clone still builds the
    # same bytes, from whatever entries survived with their blobs
    lru = server_factory("lru", "maxmemory 1mb\nmaxmemory-policy allkeys-lru")
    try:
        _set_remote(monkeypatch, lru.url)
        for name in ("lru1", "lru2", "lru3"):
            folder = clone(name)
            assert cli(["build", "-q"], folder)[0] == 0
            assert snapshot(folder) == zoo_reference
    finally:
        lru.stop()


def _killed_builds(server: RedisServer, clone, count: int, seed: int, reference: dict) -> None:
    """``count`` builds of fresh clones, each as its own process, with the server killed by
    SIGKILL at a random point of each (then started again, empty, on the same port)."""
    rng = random.Random(seed)
    try:
        env = dict(os.environ, TRIBUILD_REMOTE_CACHE=server.url)
        env.pop("TRIBUILD_CACHE_SECRET", None)
        for index in range(count):
            folder = clone(f"killed{index}")
            delay = rng.uniform(0.0, 1.5)
            build = subprocess.Popen(
                [sys.executable, "-m", "tribuild", "build", "-q"],
                cwd=folder,
                env=env,
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(delay)
            server.kill()
            _, err = build.communicate(timeout=600)
            assert build.returncode == 0, err
            assert err.count("warning: remote cache") <= 1
            assert snapshot(folder) == reference, f"build {index} (server killed at {delay:.2f}s)"
            server.start(server.port)
            if index % 2:  # every other build starts with a warm remote
                subprocess.run(
                    [sys.executable, "-m", "tribuild", "build", "-q"],
                    cwd=clone(f"warm{index}"),
                    env=env,
                    check=True,
                    capture_output=True,
                )
    finally:
        server.stop()


def test_server_killed_during_builds(server_factory, clone, zoo_reference):
    """Three builds here; ``benchmarks/remote_cache.py`` runs twenty and records them."""
    _killed_builds(server_factory("killed"), clone, 3, seed=1, reference=zoo_reference)


def test_without_the_redis_package(redis_server, clone, cli, monkeypatch, zoo_reference):
    _set_remote(monkeypatch, redis_server.url)
    monkeypatch.setitem(sys.modules, "redis", None)  # what an install without the extra has
    folder = clone("no-package")
    code, _, err = cli(["build", "-q"], folder)
    assert code == 0 and err.count("warning: remote cache") == 1
    assert "pip install 'tribuild[remote]'" in err
    assert snapshot(folder) == zoo_reference
