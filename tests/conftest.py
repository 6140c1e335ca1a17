"""The test families `make test` leaves to `make test-all` (which CI runs: .ci/run), marked
``slow`` here by their path, beside the tests marked ``slow`` where they are defined.

They are the families whose cost is of their nature, not of a bug: training runs
(`tests/examples/test_train_*`), builds killed at every point (`tests/reliability/test_crash`),
processes under `torch.distributed` (`tests/runtime/test_distributed`), the Triton kernels
run through Triton's interpreter (`tests/runtime/test_kernels_*`), the shared cache against
a real Redis server (`tests/driver/remote/`), and the tuning choices shared through it, which
are both (`tests/runtime/test_autotune_remote.py`). Each of those is also run, for a change of its
own area, by naming it: `pytest tests/runtime/test_kernels_linear.py` ignores no marker.

Property tests try fewer examples in a run that leaves the slow tests out (tests/budget.py,
and the hypothesis profile ``default-run`` for those that name no count); CI's run has the
full counts.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

from tests import budget

SLOW_FAMILIES = (
    "tests/examples/test_train_",
    "tests/reliability/test_crash.py",
    "tests/runtime/test_distributed.py",
    "tests/runtime/test_kernels_",
    "tests/driver/remote/",
    "tests/runtime/test_autotune_remote.py",
)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The builds of the tests do without the CPU kernels' step (``driver.cpu_kernels``): a test of
# the driver then does not depend on the machine's C++ compiler (its warning where there is
# none, its error where ternary.cpp does not compile) nor wait for it. The step's own tests
# take the variable away (tests/driver/test_cpu_kernels_aot.py, remote/test_cpu_kernels.py).
os.environ.setdefault("TRIBUILD_CPU_KERNELS", "off")
# Nor do the tests' checkpoint loads write converted weights to the user's cache
# (``runtime.weight_cache``); its own tests point the variable at a temporary folder.
os.environ.setdefault("TRIBUILD_WEIGHT_CACHE", "off")


settings.register_profile("default-run", max_examples=25)


def pytest_configure(config):
    """Before test modules are imported (their ``@settings`` read ``budget.examples``): is
    this a run without the slow tests (`make test`)?"""
    if "not slow" in (config.getoption("markexpr") or ""):
        budget.FULL = False
        settings.load_profile("default-run")


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = os.path.relpath(str(item.path), ROOT).replace(os.sep, "/")
        if path.startswith(SLOW_FAMILIES):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _torch_threads_given_back():
    """A test that sets torch's thread count for the process (an example's or a benchmark's
    ``main`` run in-process) gives it back: a later test's reductions (a ternary scale's
    mean) would otherwise sum in another order than its subprocesses' do."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    if before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)
