"""Runs tribuild.runtime's Triton kernels on the CPU, or on CUDA with TRIBUILD_TEST_DEVICE=cuda
(tests/device.py): ``TRITON_INTERPRET`` must be set before any ``@triton.jit`` kernel is
defined, so it is set here, at import, before test modules import the kernels. Without torch
installed the folder is skipped; modules that need triton skip themselves. Every test gets
its own autotune cache file.
"""

import importlib.util

import pytest

from tests.device import configure

configure()

if importlib.util.find_spec("torch") is None:
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(autouse=True)
def _private_autotune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIBUILD_AUTOTUNE_CACHE", str(tmp_path / "autotune.json"))
