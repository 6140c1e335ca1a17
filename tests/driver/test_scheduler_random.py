"""The pool on random query graphs (a property): units whose queries read each other's,
units that raise or kill their worker, 2-4 jobs. Every unit gets an outcome, a failing unit
reports its error, the others have the values of a run in order, and the run ends (each
trial runs in a forked child under an alarm: a hang fails it). 12 graphs by
default; ``TRIBUILD_SCHEDULER_SEEDS=N`` runs N (500 passed when this test was written)."""

from __future__ import annotations

import os
import random
import signal
import time
import traceback

import pytest

from tribuild.driver.pool.scheduler import run_units
from tribuild.driver.pool.units import Unit
from tribuild.driver.progress import Quiet
from tribuild.engine import Database, derived, input_query

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
SEEDS = int(os.environ.get("TRIBUILD_SCHEDULER_SEEDS", "12"))
_STATE: dict = {}  # the trial's graph, its log file and the pid of its main process


@input_query
def number(db, name): ...


@derived
def work(db, name, fate):
    """``name``'s number plus its dependencies' values; ``fate`` "boom" raises, "dies"
    kills a worker (in the trial's own process, where that would end the trial, it raises)."""
    value = number(db, name) + sum(work(db, d, "ok") for d in _STATE["deps"][name])
    if fate == "dies" and os.getpid() != _STATE["main"]:
        os._exit(3)
    if fate != "ok":
        raise ValueError(f"{name} fails")
    time.sleep(random.random() * 0.003)
    with open(_STATE["log"], "a") as log:
        log.write(f"{name}\n")
    return value


def _trial(seed: int, log: str) -> None:
    rnd = random.Random(seed)
    names = [f"u{i}" for i in range(rnd.randint(2, 20))]
    deps = {n: tuple(rnd.sample(names[:i], min(i, rnd.randint(0, 2)))) for i, n in enumerate(names)}
    fates = {n: rnd.choices(["ok", "boom", "dies"], [86, 8, 6])[0] for n in names}
    _STATE.update(deps=deps, log=log, main=os.getpid())
    open(log, "w").close()
    db = Database()
    for i, name in enumerate(names):
        db.set(number, name, i)
    units = [Unit(n, work, (n, fates[n]), cost=rnd.random()) for n in names]
    outcomes, _, _ = run_units(db, units, rnd.randint(2, 4), Quiet())
    assert set(outcomes) == set(names)
    want: dict[str, int] = {}
    for name in names:  # in order: a unit's dependencies come before it
        want[name] = int(name[1:]) + sum(want[d] for d in deps[name])
        got = outcomes[name]
        if fates[name] != "ok":
            assert got.value is None and got.error, (name, got)
        else:
            assert got.error is None and got.value == want[name], (name, got)
    with open(log) as f:
        built = set(f.read().split())
    assert {n for n in names if fates[n] == "ok"} <= built


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_unit_graphs(seed, tmp_path):
    pid = os.fork()
    if pid == 0:
        signal.alarm(30)  # a hang kills the trial
        code = 1
        try:
            _trial(seed, str(tmp_path / "built.log"))
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"seed {seed} failed (see stderr)"
