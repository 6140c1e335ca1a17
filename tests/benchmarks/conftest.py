"""The benchmark suite's smoke run is marked ``bench_smoke`` and runs only when asked for
(``-m bench_smoke``): it takes ~30 s of timing work that the default test run should not pay."""

import pytest


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "bench_smoke: the benchmark suite's --quick run (select with -m bench_smoke)"
    )


def pytest_collection_modifyitems(config, items):
    if "bench_smoke" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="benchmark smoke run: select it with -m bench_smoke")
    for item in items:
        if "bench_smoke" in item.keywords:
            item.add_marker(skip)
