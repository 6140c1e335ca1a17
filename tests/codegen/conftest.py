"""Codegen tests run generated modules with torch; kernel-file tests run the Triton kernels on
the CPU, so ``TRITON_INTERPRET=1`` is set here, before any kernel is defined (as in
tests/gpu). Module tests pin the torch backend. Without torch the runtime tests skip."""
import os

import pytest

os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture(autouse=True)
def _private_autotune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIBUILD_AUTOTUNE_CACHE", str(tmp_path / "autotune.json"))
