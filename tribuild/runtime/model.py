"""The base class of generated modules: loading float weights, training, saving.

Terms:
- *float state_dict*: the state_dict of a plain PyTorch module with the same member
  structure, ternary layers holding float weights (``layer1.0.conv1.weight``); the one of
  ``Model.float_module()`` (``tribuild.runtime.float_twin``). *float shapes*: its keys and shapes
  (``float_shapes``).
- ``Module.from_float(state_dict, strict=True, prefix="", **args)``: a new, frozen instance
  in eval mode (``args``, if given, must be the construction arguments it was generated for,
  ``ARGS``) whose ternary weights are the BitNet b1.58 ternarization of the float ones,
  packed; every other entry loads as is (copied, in the module's dtype).
- *empty model* (``empty_model``) and ``fill``: the loaders' way to make a frozen instance
  without a float detour: the class constructed on the meta device with its ternary layers
  as shells (``tribuild.runtime.nn``, no latent weights, nothing initialized), then every
  tensor assigned. Neither the float weights PyTorch's initialization would make nor latent
  weights ever exist; ``from_float`` with ``strict=False`` and missing weights constructs
  the module in full instead, so the missing ones keep their initialization.
- *trit weights*: the trit-tensor parameters of a functional entry layer
  (``register_trits(name, shape)``): a packed uint8 buffer ``name`` of codes in {-1, 0, 1},
  no scale; ``trits(name)`` is the float32 codes, decoded once and cached. ``from_float``
  rounds the float values to the nearest trit (a trit tensor's float form is its values).
- *latent weights*: the float ``latent_<name>`` parameters the ternary layers and trit
  weights train (``tribuild.runtime.nn``; ``trits(name)`` is then the latent's nearest trits, with
  a straight-through gradient). A new module has them (PyTorch's initialization; for a trit
  weight, uniform on [-1.5, 1.5]); ``from_float`` and
  ``freeze()`` give a module without them, and ``qat(state_dict=None)`` gives them back (from
  the float ``state_dict`` when given, else ``scale · codes``, whose packing is kept until
  training changes it).
- *pickling*: a generated class is pickled as the path of its generated file and its name
  (``kernel_files.generated_class``), so ``torch.save(model)`` works whatever name the module
  was imported under; loading needs that file at the same path.
- ``generate(ids, max_new_tokens, temperature=0.0, top_k=None)``: for a language model
  (int64 ids ``[N, T]`` in, logits ``[N, T, vocab]`` out), ``ids`` with the new tokens
  appended, decoded with a KV cache (``tribuild.runtime.generate``).
- ``load_kernels(module_file, keys)``: the ``run`` functions of the generated kernel files
  ``kernels/<key>.py`` beside the generated module, as attributes of a namespace.
- ``ModuleList``: ``nn.ModuleList`` with the same items, keys and state_dict, whose
  ``[i]`` for an int ``i >= 0`` (how generated code reads a list member, ``self.stages[0]``)
  is one dict lookup; ``nn.ModuleList`` takes about 16k instructions (~4 µs) per index.
- *layout conversions* (the layout pass's ``layout`` nodes): ``channels_last(x)`` gives ``x``
  in channels-last memory format on the torch backend and ``x`` unchanged on the Triton
  backend, whose kernels read NCHW; ``nchw(x)`` gives ``x`` contiguous (NCHW). Both return
  ``x`` itself when it already has the format; values never change.
- ``wrong_input``: what a generated ``forward`` calls when its input's rank or fixed dims
  differ from the ``.tri`` signature's.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping
from typing import Any, Self, TypeVar, overload

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from tribuild.runtime.kernel_files import class_file, generated_class, load_kernels, register_class
from tribuild.runtime.launch import DENSE_BACKENDS, backend_for, unpacked_codes
from tribuild.runtime.nn import (
    TernaryLayer,
    building_shell,
    follow_latents,
    shell,
    warn_frozen_training,
    whole,
)
from tribuild.runtime.packing import pack, pack_ternary, packed_cols, unpack
from tribuild.runtime.ternarize import nearest_trits, nearest_trits_ste

__all__ = ["Module", "ModuleList", "channels_last", "load_kernels", "nchw", "wrong_input"]


def _ternary_entries(model: nn.Module) -> Iterator[tuple[str, TernaryLayer, str]]:
    """``(state_dict key, layer, weight name)`` of every ternary weight of ``model``."""
    for prefix, module in model.named_modules():
        if isinstance(module, TernaryLayer):
            for name, _ in module.TERNARY:
                yield (f"{prefix}.{name}" if prefix else name), module, name


def _trit_entries(model: nn.Module) -> Iterator[tuple[str, tuple[int, ...]]]:
    """``(state_dict key, shape)`` of every trit weight of ``model``."""
    for prefix, module in model.named_modules():
        for name, shape in module.__dict__.get("trit_shapes", {}).items():
            yield (f"{prefix}.{name}" if prefix else name), shape


def float_shapes(model: nn.Module) -> dict[str, tuple[int, ...]]:
    """The keys and shapes of ``model``'s float state_dict, in state_dict order."""
    ternary: dict[str, tuple[int, ...]] = {}
    packed_only: set[str] = set()
    for key, layer, name in _ternary_entries(model):
        ternary[key] = dict(layer.TERNARY)[name]
        base = key[: len(key) - len(name)]
        packed_only |= {f"{key}_scale", f"{base}latent_{name}"}
    for key, shape in _trit_entries(model):
        ternary[key] = shape
        owner, _, name = key.rpartition(".")
        packed_only.add(f"{owner}.latent_{name}" if owner else f"latent_{name}")
    return {
        key: ternary.get(key, tuple(value.shape))
        for key, value in model.state_dict().items()
        if key not in packed_only
    }


def _shape(shape: tuple[int, ...] | torch.Size) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _rebuild(module_name: str, path: str, qualname: str) -> nn.Module:
    """An empty instance of a generated class, for pickle to fill with ``__setstate__``."""
    cls = generated_class(module_name, path, qualname)
    empty: nn.Module = cls.__new__(cls)
    return empty


M = TypeVar("M", bound=nn.Module)


class _NoFillsOnMeta(TorchFunctionMode):
    """Skips the fills of PyTorch's initialization (``normal_``, ``uniform_``, ``ones_``, ...)
    on meta tensors, which have nothing to fill: meta ``normal_`` runs a reference
    implementation that imports ``torch._dynamo``, seconds of a first load, and each meta
    ``fill_`` (a norm's ``ones_``) runs a Python one, a third of a cached load of 30 layers."""

    # nn.init's functions come here themselves (they dispatch on their tensor argument):
    # running one would reach the meta ``normal_`` of the device mode below this one
    SKIPPED = frozenset(
        {
            torch.Tensor.normal_,
            torch.Tensor.uniform_,
            torch.Tensor.fill_,
            torch.Tensor.zero_,
            nn.init.ones_,
            nn.init.zeros_,
            nn.init.constant_,
            nn.init.normal_,
            nn.init.uniform_,
            nn.init.kaiming_uniform_,
            nn.init.kaiming_normal_,
            nn.init.trunc_normal_,
            nn.init.xavier_uniform_,
            nn.init.xavier_normal_,
        }
    )

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func in self.SKIPPED:
            target = args[0] if args else kwargs.get("tensor")  # nn.init passes it by name
            if isinstance(target, torch.Tensor) and target.is_meta:
                return target
        return func(*args, **kwargs)


def empty_model(cls: type[M]) -> M:
    """An instance of the generated class ``cls`` on the meta device, its ternary layers
    shells (``nn.shell``): no storage, nothing initialized, for ``fill``."""
    with torch.device("meta"), shell(), _NoFillsOnMeta():
        return cls()


def fill(model: M, state: Mapping[str, torch.Tensor], copied: Collection[str] = ()) -> M:
    """``model`` (``empty_model``'s) with every tensor of its state_dict taken from ``state``
    (packed ternary weights, their scales, the other tensors) by assignment, on the default
    device, in eval mode. A float tensor is converted to the dtype the model declares; a key
    in ``copied`` is copied even when nothing converts it (the caller's tensor is not to be
    shared)."""
    device = torch.get_default_device()
    declared = model.state_dict()
    ready = {}
    for key, value in state.items():
        dtype = declared[key].dtype if value.is_floating_point() else value.dtype
        ready[key] = value.to(device=device, dtype=dtype, copy=key in copied)
    model.load_state_dict(ready, assign=True)
    return model.eval()


class FollowsDtypes(nn.Module):
    """What a generated class and its float twin share: ``input_dtypes``, the dtypes the
    entry's ``forward`` takes, one per input it checks: as declared in the ``.tri``
    signature (a class attribute of the generated entry), and after a move of the model
    (``.half()``, ``.to(torch.float64)``) what that move makes of them."""

    input_dtypes: tuple[torch.dtype, ...] = ()

    def _apply(self, fn: Any, recurse: bool = True) -> Self:
        out: Self = super()._apply(fn, recurse)  # type: ignore[no-untyped-call]  # torch's is unannotated
        if self.input_dtypes:  # what the move does to a float tensor of each declared dtype
            self.input_dtypes = tuple(fn(torch.empty(0, dtype=d)).dtype for d in self.input_dtypes)
        return out


class Module(FollowsDtypes):
    """The base of every generated class (see the module doc)."""

    ARGS: dict[str, Any] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "forward" in cls.__dict__:
            register_class(cls)

    def __reduce_ex__(self, protocol: Any) -> tuple[object, ...]:
        cls = type(self)
        state = self.__getstate__()  # type: ignore[no-untyped-call]  # torch's is unannotated
        return _rebuild, (cls.__module__, class_file(cls), cls.__qualname__), state

    @classmethod
    def from_float(
        cls,
        state_dict: Mapping[str, torch.Tensor],
        strict: bool = True,
        prefix: str = "",
        **args: Any,
    ) -> "Module":
        """A frozen instance, in eval mode, with the ternarized, packed weights of a float
        ``state_dict`` (the one of ``float_module()``, or of a pretrained model with the same
        structure). Built as an empty model (``empty_model``) and filled tensor by tensor: no
        float weight of a ternary layer is made beside the given ones; the other tensors are
        copied (the model never shares storage with ``state_dict``), in the model's dtypes.

        ``prefix`` is stripped from every key (``"model."``); keys without it are unexpected.
        Every problem is reported at once, in float shapes: missing and unexpected keys (both
        ignored with ``strict=False``: missing weights keep their initialization) and keys
        whose shape differs (always an error). ``args``, if given, must be the construction
        arguments the class was generated for (``ARGS``).
        """
        if args and args != cls.ARGS:
            raise ValueError(f"{cls.__name__} was generated for {cls.ARGS}, not {args}")
        model = empty_model(cls)
        expected = float_shapes(model)
        given = {k[len(prefix) :]: v for k, v in state_dict.items() if k.startswith(prefix)}
        problems = [
            f"  wrong shape: {prefix}{k} is {_shape(v.shape)}, expected {_shape(expected[k])}"
            for k, v in given.items()
            if k in expected and tuple(v.shape) != expected[k]
        ]
        if strict:
            problems += [
                f"  missing: {prefix}{k} {_shape(s)}" for k, s in expected.items() if k not in given
            ]
            problems += [
                f"  unexpected: {k} {_shape(v.shape)}"
                for k, v in state_dict.items()
                if not k.startswith(prefix) or k[len(prefix) :] not in expected
            ]
        if problems:
            raise ValueError(
                f"{cls.__name__}.from_float: the state_dict does not fit the model's float "
                "weights (shapes as in float_module()):\n"
                + "\n".join(problems)
                + "\n(strict=False loads what fits; prefix= strips a prefix from the keys)"
            )
        converted = {k: v for k, v in given.items() if k in expected}
        packed_keys = set()
        for key, layer, _ in _ternary_entries(model):
            if key in converted:
                packed, scale = pack_ternary(converted[key], layer.scale_mode)
                converted[key], converted[f"{key}_scale"] = packed, scale
                packed_keys |= {key, f"{key}_scale"}
        for key, _ in _trit_entries(model):
            if key in converted:
                trits = torch.clamp(torch.round(converted[key].float()), -1, 1)
                converted[key] = pack(trits.to(torch.int8))
                packed_keys.add(key)
        if len(converted) == len(model.state_dict()):  # every tensor given: fill the shell
            return fill(model, converted, copied=set(converted) - packed_keys)
        # strict=False with weights missing: they keep a full construction's initialization
        model = cls()
        model.load_state_dict(converted, strict=False)
        return model.freeze().eval()

    @classmethod
    def float_module(cls, quantize: bool = True) -> nn.Module:
        """A plain ``nn.Module`` with this model's float state_dict keys and a fake-quantized
        forward (``tribuild.runtime.float_twin``): train it in plain PyTorch, then ``from_float``
        its ``state_dict()``. Its weights are initialized as ``cls()``'s latent weights. With
        ``quantize=False`` its ternary weights stay float: a full-precision baseline."""
        from tribuild.runtime.float_twin import float_twin

        return float_twin(cls(), quantize)

    def generate(
        self,
        ids: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_k: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """A language model's ``ids`` with new tokens appended (``tribuild.runtime.generate``)."""
        from tribuild.runtime.generate import generate

        return generate(self, ids, max_new_tokens, temperature, top_k, generator)

    def register_trits(self, name: str, shape: tuple[int, ...]) -> None:
        """A trit weight: its latent weight drawn uniformly from [-1.5, 1.5], so that each
        trit is equally likely (a trit tensor has no scale to fit an initialization to), and
        its packed codes (on the meta device: an empty buffer of their shape)."""
        self.trit_shapes = {**getattr(self, "trit_shapes", {}), name: tuple(shape)}
        if building_shell():  # a loader assigns the packed codes; no latent weight
            self.register_buffer(
                name, torch.empty(shape[0], packed_cols(math.prod(shape[1:])), dtype=torch.uint8)
            )
            return
        latent = torch.empty(shape).uniform_(-1.5, 1.5)
        cols = packed_cols(math.prod(shape[1:]))
        self.register_buffer(name, torch.zeros(shape[0], cols, dtype=torch.uint8))
        self.register_parameter(f"latent_{name}", nn.Parameter(latent))
        self._pack_trits()

    def reset_parameters(self) -> None:
        """Draw this module's own trit weights again (``register_trits``) and pack them; the
        other members reset themselves (``to_empty`` after building on the meta device)."""
        with torch.no_grad():
            for name in self._trit_names():
                latent = self._parameters.get(f"latent_{name}")
                if latent is not None:
                    latent.uniform_(-1.5, 1.5)
        self._pack_trits()

    @property
    def _ddp_params_and_buffers_to_ignore(self) -> list[str]:
        """What ``DistributedDataParallel`` leaves alone (it reads this attribute): the packed
        form of every weight that has a latent one, derived on each rank from latent weights
        that DDP keeps equal, and replaced (not written in place) when re-packed."""
        names = []
        for prefix, module in self.named_modules():
            dot = f"{prefix}." if prefix else ""
            if isinstance(module, TernaryLayer):
                weights = [n for n, _ in module.TERNARY]
                packed = [[n, f"{n}_scale"] for n in weights]
            elif isinstance(module, Module):
                weights = list(module._trit_names())
                packed = [[n] for n in weights]
            else:
                continue
            for weight, keys in zip(weights, packed, strict=True):
                if module._parameters.get(f"latent_{weight}") is not None:
                    names += [dot + key for key in keys]
        return names

    def trits(self, name: str) -> torch.Tensor:
        """The trit weight ``name`` as float codes: the nearest trits of its latent weight
        (straight-through gradient) while it has one, else its packed codes."""
        latent = self._parameters.get(f"latent_{name}")
        if latent is not None:
            return nearest_trits_ste(latent)
        if self.training and torch.is_grad_enabled():
            warn_frozen_training(self)
        return unpacked_codes(getattr(self, name), self.trit_shapes[name])

    def _trit_names(self) -> Iterator[str]:
        return iter(self.__dict__.get("trit_shapes", {}))

    def _pack_trits(self) -> None:
        """Pack the nearest trits of each latent trit weight into its buffer."""
        with torch.no_grad():
            for name in self._trit_names():
                latent = self._parameters.get(f"latent_{name}")
                if latent is not None and not latent.is_meta:
                    self._buffers[name] = pack(nearest_trits(whole(latent)).to(torch.int8))

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:  # type: ignore[no-untyped-def]
        if not torch.compiler.is_compiling():
            self._pack_trits()
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        follow_latents(self, state_dict, prefix, self.__dict__.get("trit_shapes", {}).items())
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def qat(
        self, state_dict: Mapping[str, torch.Tensor] | None = None, prefix: str = ""
    ) -> "Module":
        """Make the ternary weights trainable (quantization-aware training): each gets a float
        latent weight, from the float ``state_dict`` when given (keys as ``from_float`` reads
        them, after ``prefix``), else the one it has, else ``scale · codes`` of its packed
        form (a trit weight's: its codes). Returns ``self``; train, then ``freeze()``."""
        entries = list(_ternary_entries(self))
        if state_dict is not None:
            keys = [key for key, _, _ in entries] + [key for key, _ in _trit_entries(self)]
            missing = [prefix + key for key in keys if prefix + key not in state_dict]
            if missing:
                raise ValueError(
                    f"{type(self).__name__}.qat: the state_dict has no float weight for "
                    + ", ".join(missing)
                )
        for key, layer, name in entries:
            layer.add_latent(name, None if state_dict is None else state_dict[prefix + key])
        for key, shape in _trit_entries(self):
            owner_name, _, name = key.rpartition(".")
            owner = self.get_submodule(owner_name)
            packed, latent = owner.get_buffer(name), f"latent_{name}"
            if state_dict is not None:
                value = state_dict[prefix + key]
            elif owner._parameters.get(latent) is None:
                value = unpack(packed, shape)  # not the cached float codes: nothing kept
            else:
                continue
            value = value.detach().to(device=packed.device, dtype=torch.float32).clone()
            owner.register_parameter(latent, nn.Parameter(value))
        return self

    def freeze(self) -> "Module":
        """Pack the latent weights into the packed buffers and drop them: the module then
        holds only what inference needs (``state_dict`` as ``from_float`` makes it). Returns
        ``self``. Under FSDP2 (``fully_shard``) the sharded parameters would come back at
        the next all-gather: freeze a plain model holding the full state_dict instead
        (docs/training.md)."""
        for module in self.modules():
            if module.__dict__.get("_is_fsdp_managed_module", False):
                raise RuntimeError(
                    f"{type(self).__name__}.freeze: the model is sharded by FSDP2 "
                    "(fully_shard), which would register its latent weights again at the next "
                    "all-gather. Load the full state_dict (torch.distributed.checkpoint."
                    "state_dict.get_model_state_dict with StateDictOptions(full_state_dict="
                    "True), on every rank) into a new Model() and freeze that; see "
                    "docs/training.md."
                )
        for module in self.modules():
            if isinstance(module, TernaryLayer):
                module.drop_latents()
            elif isinstance(module, Module):
                module._pack_trits()
                for name in module._trit_names():
                    module._parameters.pop(f"latent_{name}", None)
        return self

    def summary(self, print_it: bool = True) -> str | None:
        """Print a table of the layers: weight shapes, ternary and float parameter counts,
        packed bytes (``tribuild.runtime.summary``); ``print_it=False`` returns it instead."""
        from tribuild.runtime.summary import summary

        return summary(self, print_it)


class ModuleList(nn.ModuleList):
    @overload
    def __getitem__(self, idx: slice) -> nn.ModuleList: ...
    @overload
    def __getitem__(self, idx: int) -> nn.Module: ...
    def __getitem__(self, idx: int | slice) -> nn.Module | nn.ModuleList:
        if type(idx) is int and idx >= 0:
            module = self._modules.get(
                str(idx)
            )  # keys are "0", "1"... in order, as nn.ModuleList keeps them
            if module is not None:
                return module
        return super().__getitem__(idx)


def channels_last(x: torch.Tensor) -> torch.Tensor:
    if backend_for(x) not in DENSE_BACKENDS:
        return x
    return x.contiguous(memory_format=torch.channels_last)


def nchw(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous()


def wrong_input(layer: str, name: str, declared: str, x: object) -> None:
    """Raise the ValueError of a generated ``forward`` given an input ``x`` that does not fit
    the declared type of its parameter ``name``."""
    if isinstance(x, torch.Tensor):
        dtype = str(x.dtype).removeprefix("torch.")
        got = f"Tensor<{dtype}, {_shape(x.shape)}>"
    else:
        got = type(x).__name__
    raise ValueError(f"{layer}: input {name} must be {declared}, got {got}")
