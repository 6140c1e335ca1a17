"""The per-token int8 activation-quantization kernel under TRITON_INTERPRET=1 (or on CUDA).

The kernel performs the same IEEE float32 operations as the PyTorch rule (correctly rounded
divisions, round half to even), so the results must be equal, not merely close.
"""

import pytest
import torch

pytest.importorskip("triton")

from tests.device import on_device  # noqa: E402
from tribuild.runtime.autotune import config  # noqa: E402
from tribuild.runtime.launch import force_backend, quantize_activations  # noqa: E402
from tribuild.runtime.ternarize import quantize_activations as quantize_reference  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("shape", [(1, 5), (3, 4, 300), (7, 64)])
def test_kernel_equals_the_rule(shape, dtype):
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(2)) * 3).to(dtype)
    x[0, ..., 0] = 0.0
    with force_backend("triton"):
        out = quantize_activations(on_device(x), configs=(config(BLOCK_K=128),)).cpu()
    assert out.dtype == dtype and out.shape == x.shape
    assert torch.equal(out, quantize_reference(x))


def test_ties_round_half_to_even_and_tiny_rows_clamp():
    x = torch.tensor(
        [
            [127.0, 0.5, 1.5, 2.5, -0.5, -3.5],  # s = 1: x · s are exact ties
            [1e-7, 0.0, -2e-7, 0.0, 0.0, 0.0],
        ]
    )  # max clamps at 1e-5
    with force_backend("triton"):
        out = quantize_activations(on_device(x), configs=(config(BLOCK_K=4),)).cpu()
    assert out[0].tolist() == [127.0, 0.0, 2.0, 2.0, 0.0, -4.0]
    assert torch.equal(out, quantize_reference(x))
