"""Codegen tests run generated modules with torch; kernel-file tests run the Triton kernels on
the CPU (or on CUDA with TRIBUILD_TEST_DEVICE=cuda), so ``TRITON_INTERPRET`` is set here,
before any kernel is defined (as in tests/runtime; see tests/device.py). Module tests pin the
torch backend on the CPU. Without torch the runtime tests skip."""

import pytest

from tests.device import configure

configure()


@pytest.fixture(autouse=True)
def _private_autotune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIBUILD_AUTOTUNE_CACHE", str(tmp_path / "autotune.json"))
