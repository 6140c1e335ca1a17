"""``TernaryLayer.fused`` with a BatchNorm in eval mode: one with running statistics is folded
into the layer's scale and bias; one without them (``track_running_stats=False``) normalises
by the batch's statistics even in eval mode, so it is applied after the layer, not folded."""

import pytest
import torch
from torch import nn

from tribuild.runtime.launch import force_backend
from tribuild.runtime.nn import TernaryConv2d


def _layers(track: bool) -> tuple[TernaryConv2d, nn.BatchNorm2d]:
    torch.manual_seed(0)
    conv = TernaryConv2d(3, 4, 3, padding=1, bias=True).eval()
    bn = nn.BatchNorm2d(4, track_running_stats=track)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
        if track:
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    return conv, bn.eval()


@pytest.mark.parametrize("track", [True, False], ids=["running-stats", "batch-stats"])
def test_fused_equals_the_layers_applied_in_turn(track):
    conv, bn = _layers(track)
    x, residual = torch.randn(2, 3, 6, 6), torch.randn(2, 4, 6, 6)
    with force_backend("torch"), torch.no_grad():
        got = conv.fused(x, bn=bn, act="relu", residual=residual)
        want = torch.relu(bn(conv(x)) + residual)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
