"""Property: a build that takes some targets from the remote and compiles the others gives
exactly the bytes of a clean local build, whatever the split and ``--jobs``."""

from __future__ import annotations

import itertools
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.driver.remote.conftest import REPO, snapshot
from tribuild.config.load import load_config

TARGETS = [t.name for t in load_config(REPO / "Tribuild.toml").targets]
_runs = itertools.count()


@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    shared=st.lists(st.sampled_from(TARGETS), min_size=1, max_size=len(TARGETS) - 1, unique=True),
    jobs=st.sampled_from([1, 2]),
)
def test_mixed_build_gives_the_clean_build_bytes(
    shared, jobs, remote_env, clone, cli, zoo_reference
):
    remote_env.client().flushall()
    run = next(_runs)
    assert cli(["build", "-q", *shared], clone(f"writer{run}"))[0] == 0
    reader = clone(f"reader{run}")
    assert cli(["build", "-q", "--jobs", str(jobs)], reader)[0] == 0
    got = json.loads((reader / ".tribuild-cache" / "remote-stats.json").read_text())
    assert got["hits"] == len(shared) and got["misses"] == len(TARGETS) - len(shared)
    assert snapshot(reader) == zoo_reference
