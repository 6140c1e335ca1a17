"""The ternary layers' dense weights on the torch backend (``tribuild.runtime.nn``): kept while the
layer holds the same packed and scale tensors, and dropped by every way of changing them:
``load_state_dict`` (in place), ``Module.freeze`` (in place), ``forget_dense`` after any other
in-place edit, replacing a buffer, converting the module."""

import pytest
import torch
import torch.nn.functional as F

from tribuild.runtime.launch import force_backend
from tribuild.runtime.model import Module
from tribuild.runtime.nn import TernaryConv2d, TernaryLinear
from tribuild.runtime.packing import pack_ternary, unpack


def conv() -> TernaryConv2d:
    return TernaryConv2d(3, 4, 3, padding=1, bias=True).eval()


def linear() -> TernaryLinear:
    return TernaryLinear(6, 5, bias=True, scale="channel").eval()


def float_weights(layer, seed: int) -> dict[str, torch.Tensor]:
    """A float ``weight`` and ``bias`` for ``layer``, packed as ``load_state_dict`` takes them."""
    gen = torch.Generator().manual_seed(seed)
    shape = dict(layer.TERNARY)["weight"]
    packed, scale = pack_ternary(torch.randn(shape, generator=gen), layer.scale_mode)
    return {"weight": packed, "weight_scale": scale, "bias": torch.randn(shape[0], generator=gen)}


def expected(layer, x: torch.Tensor) -> torch.Tensor:
    """The layer's output computed from its current buffers, without any cache."""
    w = unpack(layer.weight, dict(layer.TERNARY)["weight"]).float()
    w = (w * layer.weight_scale.reshape(-1, *([1] * (w.dim() - 1)))).to(x.dtype)
    if isinstance(layer, TernaryConv2d):
        return F.conv2d(x, w, layer.bias, layer.stride, layer.padding, 1, layer.groups)
    return F.linear(x, w, layer.bias)


CASES = [(conv, (2, 3, 5, 5)), (linear, (3, 6))]


@pytest.fixture(autouse=True)
def _torch_backend():
    with force_backend("torch"), torch.no_grad():
        yield


@pytest.mark.parametrize("make, shape", CASES)
def test_the_dense_weight_is_computed_once(make, shape):
    layer = make()
    layer.load_state_dict(float_weights(layer, 0))
    first = layer.dense_weight("weight", torch.float32)
    layer(torch.randn(shape))
    assert layer.dense_weight("weight", torch.float32) is first
    assert (
        layer.dense_weight("weight", torch.float32, layer.weight_scale) is first
    )  # the own scale, one entry
    other = layer.dense_weight("weight", torch.float32, layer.weight_scale * 2)
    assert torch.equal(other, first * 2)


@pytest.mark.parametrize("make, shape", CASES)
def test_load_state_dict_replaces_the_weights_in_place(make, shape):
    layer, x = make(), torch.randn(shape)
    layer.load_state_dict(float_weights(layer, 0))
    before, packed = layer(x), layer.weight
    layer.load_state_dict(float_weights(layer, 1))
    assert layer.weight is packed  # copied in place: same tensor, new values
    after = layer(x)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, expected(layer, x))


@pytest.mark.parametrize("make, shape", CASES)
def test_other_in_place_edits_take_forget_dense(make, shape):
    layer, x = make(), torch.randn(shape)
    layer.load_state_dict(float_weights(layer, 0))
    layer(x)
    layer.weight_scale.mul_(3)
    layer.weight.copy_(float_weights(layer, 2)["weight"])
    layer.forget_dense()
    torch.testing.assert_close(layer(x), expected(layer, x))


@pytest.mark.parametrize("make, shape", CASES)
def test_replaced_and_converted_buffers_are_noticed(make, shape):
    layer, x = make(), torch.randn(shape)
    layer.load_state_dict(float_weights(layer, 0))
    layer(x)
    layer.weight = float_weights(layer, 3)["weight"]  # a new buffer tensor
    torch.testing.assert_close(layer(x), expected(layer, x))
    layer.double()  # a new bias tensor, float64 (the scale stays float32)
    assert layer.weight_scale.dtype == torch.float32 and layer.bias.dtype == torch.float64
    torch.testing.assert_close(layer(x.double()), expected(layer, x.double()))


def test_freeze_drops_the_dense_weights():
    class Net(Module):
        def __init__(self):
            super().__init__()
            self.fc = TernaryLinear(6, 5)

        def forward(self, x):
            return self.fc(x)

    net, x = Net().eval(), torch.randn(3, 6)
    net.load_state_dict({f"fc.{k}": v for k, v in float_weights(net.fc, 0).items() if k != "bias"})
    net(x)
    net.qat({"fc.weight": torch.randn(5, 6, generator=torch.Generator().manual_seed(4))})
    net.freeze()
    torch.testing.assert_close(net(x), expected(net.fc, x))
