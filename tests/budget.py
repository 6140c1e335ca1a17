"""How many examples a property test tries: its full count where the slow tests run too
(`make test-all`, CI: .ci/run), a quarter of it in `make test` (`-m "not slow"`), which
tests/conftest.py tells apart before any test module is imported.

Terms:
- *full*: the count a test is written with, the one CI runs.
- *default run*: `make test`, the inner loop of the whole suite; a property that holds for
  the full count is tried on a prefix-sized sample of the same strategy there.
"""

from __future__ import annotations

FULL = True  # set by tests/conftest.py's pytest_configure from the -m expression
DEFAULT_SHARE = 4  # the default run tries 1/4 of the examples (at least 2)


def examples(full: int) -> int:
    """``full`` where the slow tests run, else a quarter of it, at least 2 (the tests with a
    handful of examples build whole projects per example: seconds each)."""
    return full if FULL else max(full // DEFAULT_SHARE, min(full, 2))
