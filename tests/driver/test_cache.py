"""The cache folder: LRU eviction under the size limit, prune by age, clear, validate, and
the project lock."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from tribuild.driver import cache
from tribuild.driver.lock import Busy, project_lock
from tribuild.driver.session import salt
from tribuild.engine.store import disk as store


def _generation(folder: Path, sid: str, size: int, age_days: float) -> None:
    graph = folder / f"graph-{sid}.json"
    pack = folder / f"values-{sid}-abc.pack"
    graph.write_bytes(b"g" * size)
    pack.write_bytes(b"v" * size)
    stamp = time.time() - age_days * 86400
    os.utime(graph, (stamp, stamp))


@pytest.fixture
def folder(tmp_path) -> Path:
    current = store.salt_id(salt())
    _generation(tmp_path, current, 100, 30)  # current, however old
    _generation(tmp_path, "old", 100, 20)
    _generation(tmp_path, "older", 100, 40)
    _generation(tmp_path, "recent", 100, 1)
    return tmp_path


def _ids(folder: Path) -> set[str]:
    return {g.id for g in cache.generations(str(folder))}


def test_eviction_removes_least_recently_used_but_never_the_current(folder):
    current = store.salt_id(salt())
    assert [g.id for g in cache.evict(str(folder), 500)] == ["older", "old"]
    assert _ids(folder) == {current, "recent"}
    assert [g.id for g in cache.evict(str(folder), 1)] == ["recent"]
    assert _ids(folder) == {current}


def test_prune_by_age_and_clear(folder):
    current = store.salt_id(salt())
    assert sorted(g.id for g in cache.prune(str(folder), 10)) == ["old", "older"]
    assert _ids(folder) == {current, "recent"}
    assert cache.clear(str(folder), str(folder)) == 4 and _ids(folder) == set()


def test_clear_deletes_what_compile_model_kept_and_only_that(tmp_path):
    """A model manifest lists the module and kernels it vouches for (relative to the
    project root); clear deletes those in the cache's models folder, never a file elsewhere,
    even with the cache folder set to the project's own root."""
    kept = {
        "models/mlp_MLP_0123456789ab.py": "module",
        "models/kernels/k.py": "kernel",
        "models/mlp.tri": "the user's source",
        "notes.txt": "the user's",
    }
    for rel, text in kept.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    listed = ["models/mlp_MLP_0123456789ab.py", "models/kernels/k.py", "notes.txt"]
    (tmp_path / "model-mlp_MLP_0123456789ab.json").write_text(
        json.dumps({"outputs": [[rel, 1, 1] for rel in listed]})
    )  # notes.txt: not in models/
    (tmp_path / "explain.json").write_text("{}")
    assert cache.clear(str(tmp_path), str(tmp_path)) == 3
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "explain.json",
        "mlp.tri",
        "notes.txt",
    ]


def test_validate_deletes_a_corrupt_generation_and_the_next_build_recovers(mini, cli):
    assert cli(["build", "-q"], mini)[0] == 0
    cache_dir = mini / ".tribuild-cache"
    assert cli(["cache", "validate"], mini)[0] == 0
    pack = next(cache_dir.glob("values-*.pack"))
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0xFF
    pack.write_bytes(bytes(data))
    code, _, err = cli(["cache", "validate"], mini)
    assert code == 1 and "fails its checksum; deleted" in err
    assert not list(cache_dir.glob("graph-*.json"))
    (mini / "out" / "net.py").unlink()
    code, _, err = cli(["build", "-q"], mini)
    assert code == 0 and (mini / "out" / "net.py").exists()


def test_cache_command_usage_and_stats(mini, cli):
    assert cli(["cache", "prune"], mini)[0] == 2
    for days in ("-1", "nan", "inf", "soon"):
        code, _, err = cli(["cache", "prune", "--days", days], mini)
        assert code == 2 and "expected a number of days, 0 or more" in err
    cli(["build", "-q"], mini)
    code, out, _ = cli(["cache", "stats"], mini)
    assert code == 0 and "1 generation" in out and "current" in out and "of 512 MiB" in out
    assert cli(["cache", "clear"], mini)[0] == 0
    code, _, err = cli(["build"], mini)
    assert code == 0 and "no work to do" not in err


def test_the_lock_is_exclusive_and_a_second_holder_waits(tmp_path):
    waited = []
    with project_lock(str(tmp_path)):
        with pytest.raises(Busy, match=f"pid {os.getpid()}"):
            with project_lock(str(tmp_path), wait=False):
                pass
        holder = threading.Thread(target=lambda: _hold(tmp_path, waited))
        holder.start()
        time.sleep(0.2)
        assert waited == [
            f"waiting for another tribuild (pid {os.getpid()}) to finish with {tmp_path}"
        ]
    holder.join(10)
    assert waited[-1] == "got it"


def _hold(folder, waited):
    with project_lock(str(folder), waited.append):
        waited.append("got it")
