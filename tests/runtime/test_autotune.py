"""Config sets, the tuning choice and its on-disk cache; and a launcher tuning for real
under the interpreter (the CPU bench stands in for ``gpu_ms``). No timing is asserted:
which config wins is the clock's business, that the choice is made once and kept is ours."""

import json

import pytest
import torch

from tribuild.runtime import autotune
from tribuild.runtime.autotune import AutotuneCache, KernelConfig, choose, config, configs

CPU = torch.device("cpu")
A, B = config(BLOCK_N=16, BLOCK_K=16), config(num_warps=8, BLOCK_N=32, BLOCK_K=16)


def counting_run():
    calls = []
    return calls, lambda cfg: calls.append(cfg)


@pytest.mark.parametrize("family", sorted(autotune.CONFIG_SETS))
def test_config_sets(family):
    assert len(configs(family)) == len(configs(family, tuned=False)) == 1
    tuned = configs(family, tuned=True)
    assert len(tuned) >= 3 and len(set(tuned)) == len(tuned)
    if family in ("gemm", "gemm_small", "conv2d"):  # tl.dot needs every block at least 16
        assert all(min(dict(c.meta).values()) >= 16 for c in tuned if not c.kernel)


def test_config_json_round_trip_and_launch_kwargs():
    assert KernelConfig.from_json(json.loads(json.dumps(B.to_json()))) == B
    assert B.launch_kwargs() == {"BLOCK_K": 16, "BLOCK_N": 32, "num_warps": 8, "num_stages": 2}
    assert "kernel" not in B.to_json()  # caches written before kernels were named still read
    named = config(kernel="decode", BLOCK_N=8, BLOCK_W=4, SPLIT_K=2)
    assert KernelConfig.from_json(json.loads(json.dumps(named.to_json()))) == named
    assert "kernel" not in named.launch_kwargs()


def test_a_failing_candidate_is_skipped_with_a_warning(tmp_path):
    """A config whose kernel does not compile on the device is left out of the choice."""
    calls = []

    def run(cfg):
        calls.append(cfg)
        if cfg == B:
            raise RuntimeError("out of resources: shared memory")

    cache = AutotuneCache(tmp_path / "c.json")
    with pytest.warns(RuntimeWarning, match="skipped .* for k: RuntimeError: out of resources"):
        assert choose("k", (A, B), run, CPU, cache) == A
    assert B in calls and cache.get("k|cpu-interpreter") == A


def test_every_candidate_failing_raises_the_error(tmp_path):
    def run(cfg):
        raise ValueError(f"cannot compile {cfg.num_warps}")

    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="cannot compile 8"):
        choose("k", (A, B), run, CPU, AutotuneCache(tmp_path / "c.json"))
    assert not (tmp_path / "c.json").exists()


def test_single_candidate_is_neither_timed_nor_cached(tmp_path):
    calls, run = counting_run()
    cache = AutotuneCache(tmp_path / "c.json")
    assert choose("k", (A,), run, CPU, cache) == A
    assert calls == [] and not cache.path.exists()


def test_choice_is_timed_once_then_read_back_by_a_fresh_process(tmp_path):
    calls, run = counting_run()
    best = choose("gemv|M~1", (A, B), run, CPU, AutotuneCache(tmp_path / "c.json"))
    assert best in (A, B) and set(calls) == {A, B}
    stored = json.loads((tmp_path / "c.json").read_text())
    assert stored == {"version": 1, "entries": {"gemv|M~1|cpu-interpreter": best.to_json()}}
    calls.clear()
    assert choose("gemv|M~1", (A, B), run, CPU, AutotuneCache(tmp_path / "c.json")) == best
    assert calls == []


def test_a_cached_config_outside_the_candidates_is_retuned(tmp_path):
    cache = AutotuneCache(tmp_path / "c.json")
    cache.put("k|cpu-interpreter", config(BLOCK_N=64, BLOCK_K=64))
    calls, run = counting_run()
    assert choose("k", (A, B), run, CPU, cache) in (A, B) and calls


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"version": 0, "entries": {}}',
        "[]",
        '{"version": 1, "entries": {"k|cpu-interpreter": {"meta": 3}}}',
    ],
)
def test_corrupt_cache_is_dropped_and_rewritten(tmp_path, text):
    path = tmp_path / "c.json"
    path.write_text(text)
    calls, run = counting_run()
    best = choose("k", (A, B), run, CPU, AutotuneCache(path))
    assert calls and json.loads(path.read_text())["entries"]["k|cpu-interpreter"] == best.to_json()


def test_writes_merge_with_other_processes_and_leave_no_temp_files(tmp_path):
    path = tmp_path / "c.json"
    mine, theirs = AutotuneCache(path), AutotuneCache(path)
    mine.get("x")  # loaded while empty
    theirs.put("b", B)
    mine.put("a", A)
    assert AutotuneCache(path).get("a") == A and AutotuneCache(path).get("b") == B
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]


def test_cache_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRIBUILD_AUTOTUNE_CACHE", str(tmp_path / "x.json"))
    assert autotune.cache_path() == tmp_path / "x.json"
    assert autotune.default_cache().path == tmp_path / "x.json"
    monkeypatch.delenv("TRIBUILD_AUTOTUNE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert autotune.cache_path() == tmp_path / "tribuild" / "autotune.json"
    assert autotune.default_cache().path == tmp_path / "tribuild" / "autotune.json"
    assert autotune.default_cache() is autotune.default_cache()


def test_a_config_read_back_is_replaced_by_a_later_put(tmp_path):
    cache = AutotuneCache(tmp_path / "c.json")
    cache.put("k", A)
    assert cache.get("k") == A and cache.get("k") == A  # the second read is the parsed one
    cache.put("k", B)
    assert cache.get("k") == B


@pytest.mark.parametrize(
    "rows,family,bucket",
    [
        (1, "gemv", 1),
        (4, "gemv", 4),
        (5, "gemm_small", 8),
        (16, "gemm_small", 16),
        (17, "gemm", 32),
    ],
)
def test_launcher_tunes_at_O3_per_shape_in_the_family_of_its_rows(rows, family, bucket):
    pytest.importorskip("triton")
    from tribuild.runtime.launch import force_backend, ternary_linear
    from tribuild.runtime.packing import pack_ternary

    packed, g = pack_ternary(torch.randn(8, 12))
    with force_backend("triton"):
        out = ternary_linear(torch.randn(rows, 12), packed, g, act="relu", tuned=True)
    assert out.shape == (rows, 8)
    ((key, value),) = json.loads(autotune.cache_path().read_text())["entries"].items()
    assert key.startswith(f"{family}[") and "ACT=relu" in key and f"M~{bucket},N=8,K=12" in key
    assert key.endswith("|cpu-interpreter")
    assert KernelConfig.from_json(value) in configs(family, tuned=True)
