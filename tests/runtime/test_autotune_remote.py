"""Tuning choices shared through the remote cache, under Triton's interpreter against a real
redis-server: a launcher tunes once, a process with an empty local tuning cache takes the
choice from the remote without timing anything, and a badly signed choice is retuned."""

from __future__ import annotations

import json

import pytest
import torch

from tests.driver.remote.server import REDIS_SERVER, SKIP_REASON, RedisServer
from tribuild.runtime import autotune
from tribuild.runtime.autotune import KernelConfig, configs

pytestmark = pytest.mark.skipif(REDIS_SERVER is None, reason=SKIP_REASON)


@pytest.fixture
def server(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    running = RedisServer(tmp_path / "redis").start()
    monkeypatch.setenv("TRIBUILD_REMOTE_CACHE", running.url)
    for name in ("TRIBUILD_CACHE_SECRET", "TRIBUILD_REMOTE_READ", "TRIBUILD_REMOTE_WRITE"):
        monkeypatch.delenv(name, raising=False)
    yield running
    running.stop()


def _launch() -> None:
    from tribuild.runtime.launch import force_backend, ternary_linear
    from tribuild.runtime.packing import pack_ternary

    packed, g = pack_ternary(torch.randn(8, 12, generator=torch.Generator().manual_seed(0)))
    with force_backend("triton"):
        out = ternary_linear(torch.randn(4, 12), packed, g, act="relu", tuned=True)
    assert out.shape == (4, 8)


def _fresh_local_cache(monkeypatch, tmp_path, name: str) -> None:
    monkeypatch.setenv("TRIBUILD_AUTOTUNE_CACHE", str(tmp_path / name))


def test_a_choice_tuned_once_is_taken_from_the_remote(server, tmp_path, monkeypatch):
    _launch()  # tunes: every candidate is timed under the interpreter
    ((key, value),) = json.loads(autotune.cache_path().read_text())["entries"].items()
    assert key.endswith("|cpu-interpreter")
    (remote_key,) = server.client().keys("tribuild:autotune:*")
    import triton

    assert f"triton={triton.__version__}".encode() in server.client().get(remote_key)
    # another machine: an empty local tuning cache, and timing would fail the test
    _fresh_local_cache(monkeypatch, tmp_path, "other.json")
    monkeypatch.setattr(autotune, "bench", lambda *a: pytest.fail("timed instead of shared"))
    _launch()
    assert json.loads(autotune.cache_path().read_text())["entries"] == {key: value}
    assert KernelConfig.from_json(value) in configs("gemv", tuned=True)


def test_a_badly_signed_choice_is_retuned(server, tmp_path, monkeypatch):
    monkeypatch.setenv("TRIBUILD_CACHE_SECRET", "one")
    _launch()
    timed = []
    real = autotune.bench
    monkeypatch.setattr(autotune, "bench", lambda fn, dev: timed.append(1) or real(fn, dev))
    monkeypatch.setenv("TRIBUILD_CACHE_SECRET", "another")
    _fresh_local_cache(monkeypatch, tmp_path, "other.json")
    _launch()
    assert timed  # refused, so tuned here again
