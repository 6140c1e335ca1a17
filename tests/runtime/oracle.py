"""The tests' float64 oracle: the layer's meaning written out from the formulas, sharing no
code with tribuild.runtime. ``y = act(F(x, scale · codes) + bias + residual)`` with F a matmul
or a convolution, and every activation from its textbook definition.
"""

import math

import torch
import torch.nn.functional as F

ACTS = {
    "none": lambda y: y,
    "relu": lambda y: y.clamp(min=0),
    "relu6": lambda y: y.clamp(0, 6),
    "silu": lambda y: y / (1 + torch.exp(-y)),
    "gelu": lambda y: 0.5 * y * (1 + torch.erf(y / math.sqrt(2))),
    "sigmoid": lambda y: 1 / (1 + torch.exp(-y)),
}


def _weight(codes, scale):
    return codes.double() * scale.double().reshape(-1, *([1] * (codes.dim() - 1)))


def linear(x, codes, scale, bias=None, act="none", residual=None):
    y = x.double() @ _weight(codes, scale).T
    return _finish(y, bias, act, residual, (-1,))


def quantized(x):
    """BitNet's per-token absmax quantization of ``x`` in float64: ``q / s`` with the float32
    scale ``s = 127 / max|x|`` and ``q = clamp(round(x · s), -128, 127)`` (the float32 product,
    as the kernels and the torch path compute it), not rounded to ``x``'s dtype."""
    xf = x.float()
    s = 127.0 / xf.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5)
    q = (xf * s).round().clamp(-128, 127)
    return q.double() / s.double()


def conv2d(x, codes, scale, bias=None, act="none", residual=None, stride=1, padding=0, groups=1):
    y = F.conv2d(x.double(), _weight(codes, scale), None, stride, padding, 1, groups)
    return _finish(y, bias, act, residual, (1, -1, 1, 1))


def _finish(y, bias, act, residual, bias_shape):
    if bias is not None:
        y = y + bias.double().reshape(bias_shape)
    if residual is not None:
        y = y + residual.double()
    return ACTS[act](y)


# float32: both sides accumulate K <= ~150 products in float32 (error ~ sqrt(K) · 6e-8 · |term|);
# 1e-4 leaves room while still catching a wrong code, scale or mask (errors of order 0.1-1).
# float16: inputs are exact in both, accumulation is float32, and the result is rounded once
# to float16 (at most 2**-11 ≈ 4.9e-4 relative); 1e-3 is twice that, far below a real error.
TOLERANCES = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.float16: dict(rtol=1e-3, atol=1e-3)}


def assert_matches(out, ref):
    torch.testing.assert_close(out.double().cpu(), ref.cpu(), **TOLERANCES[out.dtype])
