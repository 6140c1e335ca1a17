"""The base class of generated modules, and how they find their kernel files.

Terms:
- *float state_dict*: the state_dict of a plain PyTorch module with the same member
  structure, ternary layers holding float weights (``layer1.0.conv1.weight``).
- ``Module.from_float(state_dict, **args)``: a new instance (``args``, if given, must be the
  construction arguments it was generated for, ``ARGS``) whose ternary weights are the BitNet
  b1.58 ternarization of the float ones, packed; every other entry loads as is.
- *trit weights*: the trit-tensor parameters of a functional entry layer
  (``register_trits(name, shape)``): a packed uint8 buffer ``name`` of codes in {-1, 0, 1},
  no scale; ``trits(name)`` is the float32 codes, decoded once and cached. ``from_float``
  rounds the float values to the nearest trit (a trit tensor's float form is its values).
- ``qat(state_dict=None)``: quantization-aware training: each ternary weight gets a float
  ``latent_<name>`` parameter (from the float ``state_dict`` when given, else the current
  ``scale · codes``) that training mode ternarizes on the fly; ``freeze()`` packs the latent
  weights back into the packed buffers and drops them.
- ``load_kernels(module_file, keys)``: the ``run`` functions of the generated kernel files
  ``kernels/<key>.py`` beside the generated module, as attributes of a namespace.
- ``ModuleList``: ``nn.ModuleList`` with the same items, keys and state_dict, whose
  ``[i]`` for an int ``i >= 0`` (how generated code reads a list member, ``self.stages[0]``)
  is one dict lookup; ``nn.ModuleList`` takes about 16k instructions (~4 µs) per index.
- *layout conversions* (the layout pass's ``layout`` nodes): ``channels_last(x)`` gives ``x``
  in channels-last memory format on the torch backend and ``x`` unchanged on the Triton
  backend, whose kernels read NCHW; ``nchw(x)`` gives ``x`` contiguous (NCHW). Both return
  ``x`` itself when it already has the format; values never change.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from tribuild.gpu.launch import backend_for, unpacked_codes
from tribuild.gpu.nn import TernaryLayer
from tribuild.gpu.packing import pack, pack_ternary, packed_cols, unpack
from tribuild.gpu.ternarize import dequantize, ternarize


def _ternary_entries(model: nn.Module):
    """``(state_dict key, layer, weight name)`` of every ternary weight of ``model``."""
    for prefix, module in model.named_modules():
        if isinstance(module, TernaryLayer):
            for name, _ in module.TERNARY:
                yield (f"{prefix}.{name}" if prefix else name), module, name


class Module(nn.Module):
    ARGS: dict = {}

    @classmethod
    def from_float(cls, state_dict: dict[str, torch.Tensor], **args) -> "Module":
        if args and args != cls.ARGS:
            raise ValueError(f"{cls.__name__} was generated for {cls.ARGS}, not {args}")
        model = cls()
        converted = dict(state_dict)
        for key, layer, _ in _ternary_entries(model):
            packed, scale = pack_ternary(converted[key], layer.scale_mode)
            converted[key], converted[f"{key}_scale"] = packed, scale
        for prefix, module in model.named_modules():
            for name in getattr(module, "trit_shapes", {}):
                key = f"{prefix}.{name}" if prefix else name
                converted[key] = pack(
                    torch.clamp(torch.round(converted[key].float()), -1, 1).to(torch.int8)
                )
        model.load_state_dict(converted)
        return model

    def register_trits(self, name: str, shape: tuple[int, ...]) -> None:
        self.register_buffer(
            name, torch.zeros(shape[0], packed_cols(math.prod(shape[1:])), dtype=torch.uint8)
        )
        self.trit_shapes = {**getattr(self, "trit_shapes", {}), name: tuple(shape)}

    def trits(self, name: str) -> torch.Tensor:
        return unpacked_codes(getattr(self, name), self.trit_shapes[name])

    def qat(self, state_dict: dict[str, torch.Tensor] | None = None) -> "Module":
        for key, layer, name in _ternary_entries(self):
            shape = dict(layer.TERNARY)[name]
            if state_dict is not None:
                latent = state_dict[key].detach().float().clone()
            else:
                latent = dequantize(
                    unpack(getattr(layer, name), shape), getattr(layer, f"{name}_scale")
                )
            layer.register_parameter(
                f"latent_{name}", nn.Parameter(latent.to(getattr(layer, f"{name}_scale").device))
            )
        return self

    def freeze(self) -> "Module":
        for _, layer, name in _ternary_entries(self):
            latent = getattr(layer, f"latent_{name}", None)
            if latent is None:
                continue
            codes, scale = ternarize(latent.detach(), layer.scale_mode)
            getattr(layer, name).copy_(pack(codes))
            getattr(layer, f"{name}_scale").copy_(scale)
            layer.forget_dense()
            delattr(layer, f"latent_{name}")
        return self


class ModuleList(nn.ModuleList):
    def __getitem__(self, idx):
        if type(idx) is int and idx >= 0:
            module = self._modules.get(
                str(idx)
            )  # keys are "0", "1"... in order, as nn.ModuleList keeps them
            if module is not None:
                return module
        return super().__getitem__(idx)


def load_kernels(module_file: str, keys: tuple[str, ...]) -> SimpleNamespace:
    folder = Path(module_file).resolve().parent / "kernels"
    runs = {}
    for key in keys:
        path = folder / f"{key}.py"
        name = f"tribuild_kernels.{key}"
        module = sys.modules.get(name)
        if module is None or Path(module.__file__).resolve() != path:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[name] = module
        runs[key] = module.run
    return SimpleNamespace(**runs)


def channels_last(x: torch.Tensor) -> torch.Tensor:
    if backend_for(x) != "torch":
        return x
    return x.contiguous(memory_format=torch.channels_last)


def nchw(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous()
