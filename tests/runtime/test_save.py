"""tribuild.runtime.save: transformers' packed layout written as transformers' own
``pack_weights`` writes it, read back by the checkpoint loader; and the full-precision float twin
(``float_module(quantize=False)``) that examples/bitnet/train.py trains as its baseline."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
bitnet = pytest.importorskip("transformers.integrations.bitnet")

from tribuild.runtime.checkpoint import unpack_transformers  # noqa: E402
from tribuild.runtime.nn import TernaryConv2d, TernaryLinear  # noqa: E402
from tribuild.runtime.save import pack_transformers, packed_tensors  # noqa: E402


@pytest.mark.parametrize("rows", [1, 4, 5, 8, 13, 64])
def test_packing_is_transformers_pack_weights(rows):
    codes = torch.randint(-1, 2, (rows, 7), generator=torch.Generator().manual_seed(rows))
    ours = pack_transformers(codes)
    assert torch.equal(ours, bitnet.pack_weights(codes.clone()))
    assert torch.equal(unpack_transformers(ours, rows), codes.to(torch.int8))


def test_scales_are_written_as_the_divisor_and_floats_in_the_dtype_asked():
    torch.manual_seed(0)
    layer = TernaryLinear(8, 6, bias=True)
    tensors = packed_tensors(layer, torch.bfloat16)
    assert set(tensors) == {"weight", "weight_scale", "bias"}  # no latent weight
    torch.testing.assert_close(tensors["weight_scale"], 1 / layer.weight_scale)
    assert tensors["bias"].dtype == torch.bfloat16
    assert tensors["weight"].shape == (2, 8)


def test_weights_the_layout_cannot_hold_are_named():
    with pytest.raises(ValueError, match=r"weight: the packed layout holds ternary weights of two"):
        packed_tensors(TernaryConv2d(2, 4, 3))
    with pytest.raises(ValueError, match="scale='channel'"):
        packed_tensors(TernaryLinear(4, 4, scale="channel"))


def test_the_full_precision_twin_computes_with_its_float_weights():
    from tribuild.runtime.float_twin import float_twin
    from tribuild.runtime.model import Module

    class Net(Module):
        def __init__(self):
            super().__init__()
            self.fc = TernaryLinear(8, 4, bias=True)

        def forward(self, x):
            return self.fc(x)

    torch.manual_seed(0)
    x = torch.randn(3, 8)
    plain, quantized = float_twin(Net(), quantize=False), float_twin(Net())
    expected = torch.nn.functional.linear(x, plain.fc.weight, plain.fc.bias)
    assert torch.equal(plain(x), expected)
    assert not torch.allclose(
        quantized(x), torch.nn.functional.linear(x, quantized.fc.weight, quantized.fc.bias)
    )
