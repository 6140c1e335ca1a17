"""200 rapid saves of one file under a running watch: one correct final state, no crash,
and never a half-written output (every output module parses at random moments)."""

from __future__ import annotations

import ast
import random
import threading
import time

from tests.watch.conftest import clean_build, save, snapshot

VARIANTS = [("h = relu(fc2(h))", "h = tanh(fc2(h))"), ("hidden1: int = 256", "hidden1: int = 64")]


def _parse_outputs(out, stop: threading.Event, seen: list) -> None:
    """Until ``stop``: parse every output module at random moments; record what failed."""
    rng = random.Random(1)
    while not stop.is_set():
        for path in sorted(out.rglob("*.py")):
            try:
                ast.parse(path.read_bytes())
            except FileNotFoundError:
                continue  # a stale kernel removed meanwhile
            except SyntaxError as err:
                seen.append(f"{path}: {err}")
            seen.append(None)
        time.sleep(rng.uniform(0, 0.01))


def test_200_rapid_saves_end_in_the_final_state(project, watch, tmp_path, monkeypatch):
    session = watch()
    assert session.events.next("rebuild")["ok"]
    stop, seen = threading.Event(), []
    checker = threading.Thread(target=_parse_outputs, args=(project / "out", stop, seen))
    checker.start()
    rng = random.Random(0)
    mlp = project / "models" / "mlp.tri"
    original = mlp.read_text()
    for i in range(200):
        text = original
        for old, new in VARIANTS:
            if rng.random() < 0.5:
                text = text.replace(old, new)
        save(mlp, f"# save {i}\n{text}".encode(), atomic=i % 2 == 0)
        time.sleep(rng.uniform(0, 0.003))
    code, clean = clean_build(project, tmp_path / "clean", monkeypatch)
    assert code == 0
    last = session.events.next("rebuild")
    while snapshot(project / "out") != clean:  # until the rebuild of the last save
        last = session.events.next("rebuild")
    stop.set()
    checker.join()
    assert session.thread.is_alive() and last["ok"]
    assert [s for s in seen if s is not None] == [] and seen
