"""The float twin of a generated module: a plain ``nn.Module`` with the float state_dict keys
(``conv.weight [16, 1, 3, 3]``, not the packed ``[16, 3]``) whose forward fake-quantizes each
ternary weight (BitNet b1.58 ternarization with the straight-through estimator) and computes
what the generated module computes. A user trains it in plain PyTorch, or loads a pretrained
float model into it, and hands its ``state_dict()`` to ``Model.from_float``.

Terms:
- *twin class* of a generated class ``C``: ``C.float``-named subclass of ``FloatModule`` that
  reuses ``C.forward`` (the generated code reads members by name, and the twin's members
  have the same names); made once per class (``float_class``).
- *twin layers*: ``FloatTernaryLinear``/``FloatTernaryConv2d`` (``nn.Linear``/``nn.Conv2d``
  with PyTorch's parameter names) and ``FloatMultiHeadAttention``; each also has the
  ``fused(x, bn, act, residual, kernel)`` of a ternary layer, computed step by step. Trit
  weights of a functional entry become float parameters, rounded to trits in ``trits``.
- *full-precision twin* (``float_module(quantize=False)``): the twin layers use their float
  weights as they are, no ternarization: the same architecture as a float baseline, to see
  what ternary weights cost (activations are still quantized where the source says so; trit
  weights are still rounded).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tribuild.runtime.epilogue import ACTIVATIONS, activation_name
from tribuild.runtime.kernel_files import class_file, generated_class
from tribuild.runtime.launch import unpacked_codes
from tribuild.runtime.model import FollowsDtypes
from tribuild.runtime.nn import MultiHeadAttention, TernaryConv2d, TernaryLayer, TernaryLinear
from tribuild.runtime.ternarize import nearest_trits_ste, ternarize_ste


class _Fused:
    """``fused`` as the generated code calls it, for a twin layer."""

    quantize = True  # fake-quantize the weight; False: a full-precision baseline

    def fused(
        self,
        x: torch.Tensor,
        bn: nn.Module | None = None,
        act: str | None = None,
        residual: torch.Tensor | None = None,
        kernel: Any = None,
    ) -> torch.Tensor:
        y = self(x)  # type: ignore[operator]
        y = bn(y) if bn is not None else y
        y = y + residual if residual is not None else y
        return ACTIVATIONS[activation_name(act)](y)


class FloatTernaryLinear(_Fused, nn.Linear):
    def __init__(self, layer: TernaryLinear):
        super().__init__(layer.in_features, layer.out_features, bias=layer.bias is not None)
        self.scale_mode = layer.scale_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = ternarize_ste(self.weight, self.scale_mode) if self.quantize else self.weight
        return F.linear(x, w, self.bias)


class FloatTernaryConv2d(_Fused, nn.Conv2d):
    def __init__(self, layer: TernaryConv2d):
        super().__init__(
            layer.in_channels,
            layer.out_channels,
            layer.kernel_size,
            stride=layer.stride,
            padding=layer.padding,
            groups=layer.groups,
            bias=layer.bias is not None,
        )
        self.scale_mode = layer.scale_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = ternarize_ste(self.weight, self.scale_mode) if self.quantize else self.weight
        return F.conv2d(x, w, self.bias, self.stride, self.padding, 1, self.groups)


class FloatMultiHeadAttention(nn.Module):
    quantize = True

    def __init__(self, layer: MultiHeadAttention):
        super().__init__()
        self.d, self.heads = layer.d, layer.heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * layer.d, layer.d))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * layer.d))
        self.out_proj = FloatTernaryLinear(layer.out_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        w = ternarize_ste(self.in_proj_weight, "tensor") if self.quantize else self.in_proj_weight
        qkv = F.linear(x, w, self.in_proj_bias)
        q, k, v = qkv.reshape(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v)
        out: torch.Tensor = self.out_proj(o.transpose(1, 2).reshape(n, t, d))
        return out


def _rebuild_twin(module_name: str, path: str, qualname: str) -> nn.Module:
    cls = float_class(generated_class(module_name, path, qualname))
    twin: nn.Module = cls.__new__(cls)
    return twin


class FloatModule(FollowsDtypes):
    """The base of twin classes."""

    GENERATED: type = nn.Module  # the generated class this one is the twin of

    def trits(self, name: str) -> torch.Tensor:
        return nearest_trits_ste(getattr(self, name))

    def __reduce_ex__(self, protocol: Any) -> tuple[object, ...]:
        cls = self.GENERATED
        where = (cls.__module__, class_file(cls), cls.__qualname__)
        state = self.__getstate__()  # type: ignore[no-untyped-call]  # torch's is unannotated
        return _rebuild_twin, where, state


def float_class(cls: Any) -> Any:
    """The twin class of the generated class ``cls`` (one per class)."""
    twin = cls.__dict__.get("_float_twin")
    if twin is None:
        twin = type(
            f"{cls.__name__}Float",
            (FloatModule,),
            {
                "GENERATED": cls,
                "forward": cls.forward,
                "input_dtypes": getattr(cls, "input_dtypes", ()),  # forward checks them
                "__module__": cls.__module__,
                "__qualname__": f"{cls.__qualname__}Float",
                "__doc__": f"The float twin of {cls.__name__} (tribuild.runtime.float_twin).",
            },
        )
        cls._float_twin = twin
    return twin


def _float_layer(layer: TernaryLayer) -> nn.Module:
    """The twin of a ternary layer, with the layer's latent weights (or ``scale · codes``)."""
    twin: nn.Module
    if isinstance(layer, TernaryLinear):
        twin = FloatTernaryLinear(layer)
    elif isinstance(layer, TernaryConv2d):
        twin = FloatTernaryConv2d(layer)
    elif isinstance(layer, MultiHeadAttention):
        twin = FloatMultiHeadAttention(layer)
    else:
        raise TypeError(f"no float twin for {type(layer).__name__}")
    with torch.no_grad():
        for name, _ in layer.TERNARY:
            layer.add_latent(name)
            getattr(twin, name).copy_(layer._parameters[f"latent_{name}"])
        for key, value in layer.state_dict().items():
            if "." in key or key.endswith("_scale") or key.startswith("latent_"):
                continue
            if key not in dict(layer.TERNARY):
                getattr(twin, key).copy_(value)
        if isinstance(layer, MultiHeadAttention):
            twin.out_proj = _float_layer(layer.out_proj)
    return twin


def float_twin(model: nn.Module, quantize: bool = True) -> nn.Module:
    """Turn a fresh instance of a generated class into its twin, in place, and return it;
    with ``quantize=False`` its ternary layers' weights stay float (see the module doc)."""
    from tribuild.runtime.model import Module

    for module in list(model.modules()):
        if isinstance(module, TernaryLayer):
            continue
        for child_name, child in list(module._modules.items()):
            if isinstance(child, TernaryLayer):
                module._modules[child_name] = _float_layer(child)
        if isinstance(module, Module):
            for name, shape in module.__dict__.get("trit_shapes", {}).items():
                latent = module._parameters.pop(f"latent_{name}", None)
                weight = (
                    latent if latent is not None else unpacked_codes(module.get_buffer(name), shape)
                )
                del module._buffers[name]
                module.register_parameter(name, nn.Parameter(weight.detach().clone()))
            module.__dict__.pop("trit_shapes", None)
            module.__class__ = float_class(type(module))
    for module in model.modules():
        if isinstance(module, (_Fused, FloatMultiHeadAttention)):
            module.quantize = quantize
    return model
