"""The ternary layers generated modules are built from: ``TernaryLinear``, ``TernaryConv2d``
and ``MultiHeadAttention`` (ternary projections).

Terms:
- *packed form*: each ternary weight ``W`` is stored as the uint8 buffer ``<name>`` (2-bit
  codes, ``tribuild.runtime.packing``) and the float32 buffer ``<name>_scale`` (``[1]``, or
  ``[out]`` with ``scale="channel"``); biases stay float parameters. ``TERNARY`` lists a
  layer's ternary weights as ``(name, shape)``. ``state_dict()``/``load_state_dict()``
  round-trip this form; ``tribuild.runtime.model.Module.from_float`` makes it from float weights.
- *kernel*: the ``run(x, packed, scale, bias, residual)`` function of a generated kernel file
  (``kernels/<key>.py``), which launches the Triton kernel (on CUDA, or under the Triton
  interpreter). A layer without one uses the generic launcher with its plain epilogue.
- *dense weight*: on the torch backend a layer computes with ``scale · codes`` as one float
  weight (``F.linear``/``F.conv2d`` with the bias, as hand-written PyTorch would), kept while
  the layer holds the same packed and scale tensors, and while all layers' dense weights fit
  the *dense budget* (``dense_cache_limit``: ``TRIBUILD_DENSE_CACHE_MB``, else a quarter of
  the machine's memory); past it a weight is made for its call and freed. It is the only
  float form of a ternary weight a frozen layer ever holds (the codes it is made from are
  unpacked for it and dropped). Edits in place drop it where they happen:
  ``load_state_dict`` (which copies into the buffers); re-packing a latent weight makes new
  tensors; any other in-place edit must call ``forget_dense()``, as with PyTorch's prepacked
  quantized layers. Reading the version counters on every call instead cost about 1% of
  MobileNetV2 at -O0 (two reads per layer, each a few cache misses after a large
  convolution). The accumulation then rounds
  slightly differently from the kernels' ``scale · (x · codes)``, within float32 rounding.
  Linear layers keep it *K-major* (``K_MAJOR``: the ``[N, K]`` view of a contiguous ``[K, N]``
  tensor), which PyTorch's one-thread CPU matrix product reads faster than the row-major
  ``[N, K]`` of a hand-written ``nn.Linear`` (about 3-20% on the MNIST MLP's layers). A fused
  activation and residual add then run in place on the product (``epilogue.IN_PLACE``) unless
  autograd is recording: the torch backend's share of fusion.
- *fused call* (``fused``): the layer's kernel with a folded BatchNorm (its eval-mode affine
  map merged into the per-channel scale and bias), an activation and a residual add in the
  epilogue. In training mode, or with a BatchNorm in training mode, the same result is
  computed step by step (batch statistics, autograd).
- *latent weight* (quantization-aware training): ``latent_<name>``, a float parameter of the
  weight's own shape. A new layer has one, initialized as PyTorch initializes the layer kind
  (``nn.Linear``/``nn.Conv2d``: Kaiming uniform; ``nn.MultiheadAttention``: Xavier uniform),
  with the packed form derived from it, so that ``parameters()`` holds every trainable weight
  and training from scratch works. In training mode the layer ternarizes it on the fly with
  the straight-through estimator; in eval mode it first re-packs it when it changed (same
  arithmetic as a frozen layer). ``freeze`` (``sync_latents`` then drop) leaves the packed form
  alone; a ``state_dict`` without ``latent_<name>`` loads as a frozen layer, one with it as a
  trainable one. A layer in training mode without latent weights warns once per process.
- *dtypes and devices*: ``.half()``, ``.to(dtype)`` and the like convert biases and latent
  weights; the scales stay float32 (the kernels' contract), and the torch backend casts biases
  to the input's dtype.
- *sharded training* (FSDP2's ``fully_shard``, docs/training.md): FSDP2 marks every module
  it manages (``_is_fsdp_managed_module``) and refills the same unsharded parameter at each
  all-gather without moving its version counter, so the re-packing stamp above cannot see a
  changed latent weight there: a managed layer re-packs at every eval-mode forward and every
  ``state_dict()``. Outside a forward its latent weights are sharded ``DTensor`` objects, packed
  from their full tensor (``whole``: an all-gather, so every rank calls ``state_dict()``).
- *meta device* (``with torch.device("meta")``): nothing is packed; ``to_empty`` then
  ``reset_parameters()`` (or ``load_state_dict``) fills the latent weights and packs them.
- *shell* (``shell()``): a layer constructed with empty packed buffers and scales and no
  latent weights, nothing initialized, for a loader to assign every tensor into
  (``load_state_dict(assign=True)``): loading never makes a float weight of a ternary layer.
- *tracing* (``torch.compile``, ``torch.export``, ONNX export): the caches above are Python
  state keyed by identity and version, which a traced graph cannot guard on; while
  ``torch.compiler.is_compiling()`` the weights are computed in the graph instead, from the
  packed form (or, with latent weights, from them), and nothing is cached.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Callable, Self

import torch
import torch.nn.functional as F
from torch import nn

from tribuild.runtime.epilogue import ACTIVATIONS, IN_PLACE, activation_name
from tribuild.runtime.launch import (
    DENSE_BACKENDS,
    backend_for,
    dense_conv2d,
    quantize_activations,
    ternary_conv2d,
    ternary_linear,
)
from tribuild.runtime.packing import pack_ternary, packed_cols, unpack
from tribuild.runtime.ternarize import dequantize, ternarize, ternarize_ste

Kernel = Callable[..., torch.Tensor]


_warned_frozen_training = False  # the no-latent-weights warning is given once per process
_shell = threading.local()  # ``shell()``'s flag: per thread, as construction is


@contextmanager
def shell() -> Iterator[None]:
    """Construct ternary layers as *shells* (see the module doc): packed buffers and scales
    left empty, no latent weights, nothing initialized. ``Module.from_float`` and
    ``checkpoint.load_tensors`` build under it (on the meta device) and then assign every
    tensor, so no float weight of a ternary layer is ever made."""
    previous = getattr(_shell, "on", False)
    _shell.on = True
    try:
        yield
    finally:
        _shell.on = previous


def building_shell() -> bool:
    """Whether layers constructed now are shells (``shell()``)."""
    return getattr(_shell, "on", False)


class _DenseBudget:
    """The bytes the dense weights of every layer may hold together (``dense_cache_limit``);
    a weight past it is made for its call and not kept. Each kept weight gives its bytes back
    when it is freed (a finalizer), however its layer drops it."""

    def __init__(self) -> None:
        self.limit: int | None = None  # read from the environment at the first admission
        self.held = 0
        self._lock = threading.Lock()

    def admit(self, weight: torch.Tensor) -> bool:
        size = weight.untyped_storage().nbytes()
        with self._lock:
            if self.limit is None:
                self.limit = _default_dense_limit()
            if self.held + size > self.limit:
                return False
            self.held += size
        weakref.finalize(weight, self._release, size)
        return True

    def _release(self, size: int) -> None:
        with self._lock:
            self.held -= size


def _default_dense_limit() -> int:
    """``TRIBUILD_DENSE_CACHE_MB`` when set, else a quarter of the machine's memory."""
    given = os.environ.get("TRIBUILD_DENSE_CACHE_MB")
    if given is not None:
        try:
            return int(float(given) * 2**20)
        except ValueError:
            raise ValueError(
                f"TRIBUILD_DENSE_CACHE_MB must be a number of megabytes, not {given!r}"
            ) from None
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): 2 GiB
        return 2 << 30


_DENSE = _DenseBudget()


def dense_cache_limit(limit: int | None) -> int | None:
    """Set the bytes the torch backend's dense weights may hold in all (``0``: none kept,
    every product makes its weight; ``None``: the default again, ``TRIBUILD_DENSE_CACHE_MB``
    or a quarter of the machine's memory); returns the previous limit. Weights already kept
    stay until their layer drops them."""
    with _DENSE._lock:
        previous, _DENSE.limit = _DENSE.limit, limit
    return previous


def dense_cache_bytes() -> int:
    """The bytes the dense weights kept now hold."""
    return _DENSE.held


def warn_frozen_training(layer: nn.Module) -> None:
    global _warned_frozen_training
    if not _warned_frozen_training:
        _warned_frozen_training = True
        warnings.warn(
            f"{type(layer).__name__} is in training mode but has no trainable ternary weights "
            "(a frozen or from_float model): only biases, norms and float layers train. Call "
            "model.qat() before training, or model.eval() for inference.",
            UserWarning,
            stacklevel=3,
        )


def follow_latents(
    module: nn.Module,
    state_dict: Mapping[str, Any],
    prefix: str,
    weights: Iterable[tuple[str, tuple[int, ...]]],
) -> None:
    """Before ``module`` loads ``state_dict``: its latent weights follow it. A packed weight
    without its latent one (a frozen model's, or from_float's) drops the latent weight, one
    with it makes a latent weight to load into. ``weights``: (name, shape) of each weight."""
    for name, shape in weights:
        latent = f"latent_{name}"
        if prefix + name in state_dict and prefix + latent not in state_dict:
            module._parameters.pop(latent, None)
        elif prefix + latent in state_dict and module._parameters.get(latent) is None:
            module.register_parameter(latent, nn.Parameter(torch.empty(shape)))


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, or the full tensor of a ``DTensor`` (FSDP2's sharded parameter), gathered
    from every rank: a collective call, which every rank must make."""
    gather = getattr(tensor, "full_tensor", None)
    return tensor if gather is None else gather()


def _kernel_state(kernel: Kernel | None) -> Kernel | None | tuple[str, str]:
    """A kernel as pickle can keep it: the path of its generated file (its module is imported
    under a name only the process that loaded it knows)."""
    if kernel is None:
        return None
    return ("kernel file", kernel.__code__.co_filename)


def _kernel_from_state(state: Kernel | None | tuple[str, str]) -> Kernel | None:
    if isinstance(state, tuple):
        assert state[0] == "kernel file", state  # as ``_kernel_state`` writes it
        from tribuild.runtime.kernel_files import load_kernel_file

        return load_kernel_file(state[1])
    return state


class TernaryLayer(nn.Module):
    """Shared by the ternary layers: packed buffers, latent weights, folded epilogues."""

    TERNARY: tuple[tuple[str, tuple[int, ...]], ...] = ()
    K_MAJOR = (
        False  # dense weights as the [N, K] view of a contiguous [K, N] tensor (matrix products)
    )
    KERNEL_ATTRS: tuple[str, ...] = ("kernel",)  # attributes holding generated kernel functions
    # torch types a buffer as Optional (``register_buffer(name, None)``); these layers
    # register tensors only
    _buffers: dict[str, torch.Tensor]  # type: ignore[assignment]
    kernel: Kernel | None
    run: Callable[..., torch.Tensor]  # the subclass's: the product with a scale and epilogue

    def _ternary_weights(self, scale: str) -> None:
        """The packed buffers and scales of ``TERNARY``, and a latent weight for each (left
        uninitialized: ``reset_parameters`` fills them and derives the packed form); under
        ``shell()`` the buffers only, empty, and no latent weights."""
        self.scale_mode = scale
        empty = building_shell()
        make = torch.empty if empty else torch.zeros
        for name, shape in self.TERNARY:
            rows = shape[0]
            self.register_buffer(
                name, make(rows, packed_cols(math.prod(shape[1:])), dtype=torch.uint8)
            )
            scales = rows if scale == "channel" else 1
            self.register_buffer(
                f"{name}_scale", torch.empty(scales) if empty else torch.ones(scales)
            )
            if not empty:
                self.register_parameter(f"latent_{name}", nn.Parameter(torch.empty(shape)))
        self.has_latent = not empty
        # (what the fold depends on, the folded (scale, bias))
        self._folded: tuple[tuple[object, ...], tuple[torch.Tensor, torch.Tensor | None]] | None = (
            None
        )
        # name, or (name, id of a scale) -> (packed, scale, dtype, the dense weight)
        self._dense: dict[
            str | tuple[str, int], tuple[torch.Tensor, torch.Tensor, torch.dtype, torch.Tensor]
        ] = {}
        self._synced: dict[str, tuple[int, int]] = {}

    def _init_linear_like(self, name: str, bias: torch.Tensor | None) -> None:
        """``nn.Linear``'s and ``nn.Conv2d``'s ``reset_parameters``, on ``latent_<name>``."""
        latent = self._parameters[f"latent_{name}"]
        assert latent is not None  # ``_ternary_weights`` made it
        nn.init.kaiming_uniform_(latent, a=math.sqrt(5))
        if bias is not None:
            fan_in = math.prod(latent.shape[1:])
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            nn.init.uniform_(bias, -bound, bound)

    def sync_latents(self) -> None:
        """Re-pack every latent weight that changed since it was last packed (under FSDP2:
        every one, see *sharded training* in the module doc; on the meta device: none)."""
        sharded = self.__dict__.get("_is_fsdp_managed_module", False)
        for name, _ in self.TERNARY:
            latent = self._parameters.get(f"latent_{name}")
            if latent is None or latent.is_meta:
                continue
            stamp = (id(latent), latent._version)
            if not sharded and self._synced.get(name) == stamp:
                continue
            packed, scale = pack_ternary(whole(latent.detach()), self.scale_mode)
            with torch.no_grad():
                self._buffers[name] = packed
                self._buffers[f"{name}_scale"] = scale
            self._dense, self._folded = {}, None
            self._synced[name] = stamp

    def add_latent(self, name: str, value: torch.Tensor | None = None) -> None:
        """Give the ternary weight ``name`` a latent weight: ``value`` (a float weight of its
        shape), else ``scale · codes`` of the packed form (kept if it has one already)."""
        shape = dict(self.TERNARY)[name]
        scale = self._buffers[f"{name}_scale"]
        if value is None:
            if self._parameters.get(f"latent_{name}") is not None:
                return
            value = dequantize(unpack(self._buffers[name], shape), scale)
        elif tuple(value.shape) != tuple(shape):
            raise ValueError(
                f"the latent {name} of {type(self).__name__} has shape {list(shape)}, "
                f"not {list(value.shape)}"
            )
        latent = nn.Parameter(value.detach().to(device=scale.device, dtype=torch.float32).clone())
        self.register_parameter(f"latent_{name}", latent)
        self.has_latent = True
        self._synced.pop(name, None)

    def drop_latents(self) -> None:
        """Pack the latent weights (``sync_latents``) and remove them: a frozen layer."""
        self.sync_latents()
        for name, _ in self.TERNARY:
            self._parameters.pop(f"latent_{name}", None)
        self.has_latent = False
        self._synced = {}

    def dense_weight(
        self, name: str, dtype: torch.dtype, scale: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``scale · codes`` of the packed weight ``name`` in ``dtype`` (``scale``: the weight's own
        ``<name>_scale`` when None), cached per (name, scale) while the layer holds the same packed
        tensor and the dense cache's budget allows (see the module doc), else made for this call
        only. The own scale's entry is keyed by the name alone, so ``forward``'s lookup builds
        no key."""
        packed, own = self._buffers[name], self._buffers[f"{name}_scale"]
        if torch.compiler.is_compiling():
            return self._traced_weight(name, scale if scale is not None else own).to(dtype)
        key: str | tuple[str, int]
        if scale is None or scale is own:
            key, scale = name, own
        else:
            key = (name, id(scale))
        hit = self._dense.get(key)
        if hit is not None and hit[0] is packed and hit[1] is scale and hit[2] is dtype:
            return hit[3]
        # int8 codes for this product only: no float copy of the codes is kept beside it
        weight = dequantize(unpack(packed, dict(self.TERNARY)[name]), scale).to(dtype)
        if self.K_MAJOR:
            weight = weight.t().contiguous().t()
        self._dense = {
            k: v for k, v in self._dense.items() if name not in (k, k[0]) or v[0] is packed
        }
        if _DENSE.admit(weight):
            self._dense[key] = (packed, scale, dtype, weight)
        return weight

    def _traced_weight(self, name: str, scale: torch.Tensor) -> torch.Tensor:
        """``scale · codes`` computed in a traced graph (no cache): from the latent weight when
        the layer has one (the codes it would pack), else from the packed form."""
        latent = self._parameters.get(f"latent_{name}")
        if latent is not None:
            codes, own = ternarize(latent, self.scale_mode)
            if scale is self._buffers[f"{name}_scale"]:
                scale = own
            return dequantize(codes, scale)
        return dequantize(unpack(self._buffers[name], dict(self.TERNARY)[name]), scale)

    def forget_dense(self) -> None:
        """Drop the dense weights, after an in-place edit of a packed weight or scale (done
        already by ``load_state_dict`` and ``tribuild.runtime.model.Module.freeze``)."""
        self._dense = {}

    def _save_to_state_dict(
        self, destination: dict[str, Any], prefix: str, keep_vars: bool
    ) -> None:
        if self.has_latent and not torch.compiler.is_compiling():
            self.sync_latents()
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(
        self, state_dict: Mapping[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        follow_latents(self, state_dict, prefix, self.TERNARY)
        self.has_latent = any(
            self._parameters.get(f"latent_{n}") is not None for n, _ in self.TERNARY
        )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self.forget_dense()
        self._folded, self._synced = None, {}
        if self.has_latent:
            self.sync_latents()

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Self:
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]  # torch's is unannotated
        for name, _ in self.TERNARY:  # the scales stay float32 (see the module doc)
            scale = self._buffers[f"{name}_scale"]
            if scale.dtype != torch.float32:
                self._buffers[f"{name}_scale"] = scale.float()
        self._dense, self._folded = {}, None
        return self

    def __getstate__(self) -> dict[str, Any]:
        # torch's is unannotated: the module's __dict__, copied
        state: dict[str, Any] = super().__getstate__().copy()  # type: ignore[no-untyped-call]
        state["_dense"], state["_folded"], state["_synced"] = {}, None, {}
        for attr in self.KERNEL_ATTRS:
            state[attr] = _kernel_state(state.get(attr))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        for attr in self.KERNEL_ATTRS:
            state[attr] = _kernel_from_state(state.get(attr))
        super().__setstate__(state)  # type: ignore[no-untyped-call]  # torch's is unannotated

    @staticmethod
    def dense_epilogue(
        y: torch.Tensor, act: str | None, residual: torch.Tensor | None
    ) -> torch.Tensor:
        """``act(y + residual)`` of a fresh product ``y``: in place, unless autograd is
        recording."""
        act = act or "none"
        if torch.is_grad_enabled() or torch.compiler.is_compiling():
            return ACTIVATIONS[act](y if residual is None else y + residual)
        return IN_PLACE[act](y if residual is None else y.add_(residual))

    def weight_for_training(self, name: str) -> torch.Tensor | None:
        """The STE-ternarized latent weight while training, else None (a frozen layer in
        training mode warns, once per process)."""
        latent = self._parameters.get(f"latent_{name}")
        if not self.training:
            return None
        if latent is None:
            warn_frozen_training(self)
            return None
        return ternarize_ste(latent, self.scale_mode)

    def folded(
        self, scale: torch.Tensor, bias: torch.Tensor | None, bn: nn.BatchNorm2d | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(scale, bias)`` with ``bn``'s eval-mode affine map folded in, cached by version."""
        if bn is None:
            return scale, bias
        if torch.compiler.is_compiling():
            return _fold(scale, bias, bn)
        parts = (scale, bias, bn.weight, bn.bias, bn.running_mean, bn.running_var)
        key = tuple((id(t), t._version) if t is not None else None for t in parts) + (bn.eps,)
        if self._folded is None or self._folded[0] != key:
            with torch.no_grad():
                self._folded = (key, _fold(scale, bias, bn))
        return self._folded[1]

    def fused(
        self,
        x: torch.Tensor,
        bn: nn.BatchNorm2d | None = None,
        act: str | None = None,
        residual: torch.Tensor | None = None,
        kernel: Kernel | None = None,
        quantize: bool = False,
    ) -> torch.Tensor:
        """``act(bn(self(x)) + residual)`` as one kernel call where possible (see the module
        doc). With ``quantize`` (BitLinear fused at -O3) ``x`` is quantized first
        (``quantize_activations``), by ``kernel``, which must then be one generated so, when
        that kernel runs, and here otherwise."""
        step_by_step = self.training or (bn is not None and (bn.training or bn.running_var is None))
        kernel = kernel or self.kernel
        if quantize and (
            step_by_step
            or kernel is None
            or backend_for(x) == "torch"
            or (self.has_latent and torch.compiler.is_compiling())
        ):
            x = quantize_activations(x)
        if step_by_step:
            # a BatchNorm without running statistics normalises by the batch's: not foldable
            y = self.forward(x)
            y = bn(y) if bn is not None else y
            y = y + residual if residual is not None else y
            return ACTIVATIONS[activation_name(act)](y)
        if self.has_latent:
            if torch.compiler.is_compiling():
                return self._traced_fused(x, bn, act, residual)
            self.sync_latents()
        scale: torch.Tensor = self._buffers["weight_scale"]
        bias: torch.Tensor | None = self._parameters.get("bias")
        if bn is not None:
            scale, bias = self.folded(scale, bias, bn)
        return self.run(x, scale, bias, act, residual, kernel)

    def _traced_fused(
        self,
        x: torch.Tensor,
        bn: nn.BatchNorm2d | None,
        act: str | None,
        residual: torch.Tensor | None,
    ) -> torch.Tensor:
        """The eval-mode fused call of a layer with latent weights, in a traced graph."""
        y = self.forward(x)
        y = bn(y) if bn is not None else y
        y = y + residual if residual is not None else y
        return ACTIVATIONS[activation_name(act)](y)


def _fold(
    scale: torch.Tensor, bias: torch.Tensor | None, bn: nn.BatchNorm2d
) -> tuple[torch.Tensor, torch.Tensor]:
    """``bn``'s eval-mode affine map merged into a per-channel float32 ``(scale, bias)``."""
    mean, var = bn.running_mean, bn.running_var
    assert mean is not None and var is not None  # ``fused`` folds only a BatchNorm that has them
    inv = torch.rsqrt(var.float() + bn.eps)
    if bn.weight is not None:
        inv = inv * bn.weight.float()
    shift = -mean.float() if bias is None else bias.float() - mean.float()
    new_bias = shift * inv + (bn.bias.float() if bn.bias is not None else 0.0)
    return (scale.float() * inv).contiguous(), new_bias.contiguous()


def _same_dtype(bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor | None:
    """``bias`` in ``x``'s dtype (a folded bias is float32; the torch backend needs one dtype)."""
    return bias if bias is None or bias.dtype == x.dtype else bias.to(x.dtype)


class TernaryLinear(TernaryLayer):
    K_MAJOR = True
    weight: torch.Tensor  # the packed buffer

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = False,
        scale: str = "tensor",
        kernel: Kernel | None = None,
    ):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.TERNARY = (("weight", (out_features, in_features)),)
        self._ternary_weights(scale)
        self.bias = nn.Parameter(torch.empty(out_features)) if bias else None
        self.kernel = kernel
        if self.has_latent:  # not a shell
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """``nn.Linear``'s initialization of the latent weight and bias; the packed form follows."""
        self._init_linear_like("weight", self.bias)
        self.sync_latents()

    def run(
        self,
        x: torch.Tensor,
        scale: torch.Tensor,
        bias: torch.Tensor | None,
        act: str | None,
        residual: torch.Tensor | None,
        kernel: Kernel | None,
    ) -> torch.Tensor:
        if backend_for(x) == "torch":
            y = F.linear(x, self.dense_weight("weight", x.dtype, scale), _same_dtype(bias, x))
            return y if act is None and residual is None else self.dense_epilogue(y, act, residual)
        if kernel is not None:
            return kernel(x, self.weight, scale, bias, residual)
        return ternary_linear(x, self.weight, scale, bias, act, residual)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            w = self.weight_for_training("weight")
            if w is not None:
                return F.linear(x, w, self.bias)
        elif self.has_latent:
            if torch.compiler.is_compiling():
                return F.linear(x, self.dense_weight("weight", x.dtype), self.bias)
            self.sync_latents()
        if backend_for(x) == "torch":
            return F.linear(x, self.dense_weight("weight", x.dtype), self._parameters.get("bias"))
        return self.run(
            x, self._buffers["weight_scale"], self._parameters.get("bias"), None, None, self.kernel
        )

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}, scale={self.scale_mode!r}"
        )


class TernaryConv2d(TernaryLayer):
    weight: torch.Tensor  # the packed buffer

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
        bias: bool = False,
        scale: str = "tensor",
        kernel: Kernel | None = None,
    ):
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.groups = (
            kernel_size,
            stride,
            padding,
            groups,
        )
        self.TERNARY = (
            ("weight", (out_channels, in_channels // groups, kernel_size, kernel_size)),
        )
        self._ternary_weights(scale)
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.kernel = kernel
        if self.has_latent:  # not a shell
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """``nn.Conv2d``'s initialization of the latent weight and bias; the packed form follows."""
        self._init_linear_like("weight", self.bias)
        self.sync_latents()

    def _conv(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return dense_conv2d(x, w, bias, self.stride, self.padding, self.groups)

    def run(
        self,
        x: torch.Tensor,
        scale: torch.Tensor,
        bias: torch.Tensor | None,
        act: str | None,
        residual: torch.Tensor | None,
        kernel: Kernel | None,
    ) -> torch.Tensor:
        if backend_for(x) in DENSE_BACKENDS:
            y = self._conv(x, self.dense_weight("weight", x.dtype, scale), _same_dtype(bias, x))
            return y if act is None and residual is None else self.dense_epilogue(y, act, residual)
        if kernel is not None:
            return kernel(x, self.weight, scale, bias, residual)
        return ternary_conv2d(
            x,
            self.weight,
            scale,
            bias,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            groups=self.groups,
            act=act,
            residual=residual,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            w = self.weight_for_training("weight")
            if w is not None:
                return F.conv2d(x, w, self.bias, self.stride, self.padding, 1, self.groups)
        elif self.has_latent:
            if torch.compiler.is_compiling():
                return self._conv(x, self.dense_weight("weight", x.dtype), self.bias)
            self.sync_latents()
        if backend_for(x) in DENSE_BACKENDS:
            return self._conv(x, self.dense_weight("weight", x.dtype), self._parameters.get("bias"))
        return self.run(
            x, self._buffers["weight_scale"], self._parameters.get("bias"), None, None, self.kernel
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, groups={self.groups}, "
            f"bias={self.bias is not None}, scale={self.scale_mode!r}"
        )


class MultiHeadAttention(TernaryLayer):
    """Self-attention over ``[N, T, d]`` with PyTorch's parameter names
    (``nn.MultiheadAttention(d, heads, batch_first=True)``): the ternary ``in_proj_weight``
    ``[3d, d]`` (one scale for all of it) with the float ``in_proj_bias``, and ``out_proj``, a
    ``TernaryLinear(d, d, bias=True)``. Scaled dot-product attention, no mask."""

    K_MAJOR = True
    in_proj_weight: torch.Tensor  # the packed buffer and its scale
    in_proj_weight_scale: torch.Tensor

    def __init__(
        self, d: int, heads: int, kernels: tuple[Kernel | None, Kernel | None] = (None, None)
    ):
        super().__init__()
        self.d, self.heads = d, heads
        self.TERNARY = (("in_proj_weight", (3 * d, d)),)
        self._ternary_weights("tensor")
        self.in_proj_bias = nn.Parameter(torch.empty(3 * d))
        self.out_proj = TernaryLinear(d, d, bias=True, kernel=kernels[1])
        self.kernel = kernels[0]
        if self.has_latent:  # not a shell
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """``nn.MultiheadAttention``'s initialization: Xavier-uniform input projection, zero
        biases (the output projection keeps ``nn.Linear``'s weight)."""
        latent, out_bias = self._parameters["latent_in_proj_weight"], self.out_proj.bias
        assert latent is not None and out_bias is not None  # both made by ``__init__``
        nn.init.xavier_uniform_(latent)
        nn.init.zeros_(self.in_proj_bias)
        nn.init.zeros_(out_bias)
        self.sync_latents()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        w = self.weight_for_training("in_proj_weight") if self.training else None
        if not self.training and self.has_latent and not torch.compiler.is_compiling():
            self.sync_latents()
        if w is not None:
            qkv = F.linear(x, w, self.in_proj_bias)
        elif backend_for(x) in DENSE_BACKENDS or (
            self.has_latent and torch.compiler.is_compiling()
        ):
            qkv = F.linear(x, self.dense_weight("in_proj_weight", x.dtype), self.in_proj_bias)
        elif self.kernel is not None:
            qkv = self.kernel(
                x, self.in_proj_weight, self.in_proj_weight_scale, self.in_proj_bias, None
            )
        else:
            qkv = ternary_linear(
                x, self.in_proj_weight, self.in_proj_weight_scale, self.in_proj_bias
            )
        q, k, v = qkv.reshape(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v)
        out: torch.Tensor = self.out_proj(o.transpose(1, 2).reshape(n, t, d))
        return out
