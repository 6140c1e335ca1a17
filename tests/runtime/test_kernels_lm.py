"""The generated BitNet LM through its Triton kernels (under ``TRITON_INTERPRET=1``, or on CUDA
with ``TRIBUILD_TEST_DEVICE=cuda``, tests/device.py) against the same module on the torch
path: logits of a whole prompt, and greedy decoding with the KV cache (one position per
step, so the linear kernels run their GEMV path)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tests.codegen.references import bitnet_lm  # noqa: E402
from tests.device import DEVICE, MODULE_BACKEND, on_device  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402

ARGS = {"vocab": 40, "dim": 32, "layers": 1, "heads": 2, "kv_heads": 1, "hidden": 24}


def test_decoding_through_the_kernels(tmp_path):
    generated = write_and_import(build(bitnet_lm.ENTRY, ARGS, "2"), tmp_path)
    torch.manual_seed(0)
    model = generated.Model.from_float(bitnet_lm.make(**ARGS).state_dict()).eval()
    ids = torch.randint(0, ARGS["vocab"], (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), force_backend("torch"):
        expected_logits = model(ids)
        expected = model.generate(ids, 4)
    model = model.to(DEVICE)
    with torch.no_grad(), force_backend(MODULE_BACKEND):
        logits = model(on_device(ids)).cpu()
        found = model.generate(on_device(ids), 4).cpu()
    error = (logits - expected_logits).abs().max() / expected_logits.abs().max()
    assert float(error) < 1e-4
    assert torch.equal(found, expected)
