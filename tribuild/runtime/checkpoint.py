"""Loading a checkpoint folder of ``*.safetensors`` files into a generated module.

Terms:
- *float layout*: every tensor of the module's float state_dict (``Module.from_float``'s
  input), ternary weights as float master weights ``[out, in]``: what transformers'
  ``BitNetForCausalLM`` saves with online quantization.
- *packed layout*: a ternary weight as transformers' ``integrations.bitnet.pack_weights``
  writes it (uint8 ``[ceil(out / 4), in]``: stored row ``r`` holds rows ``r + i·R`` of the
  codes, ``R`` the stored row count, in bits ``2i .. 2i+1`` as ``code + 1``) beside
  ``<key>_scale``, the one-element ``weight_scale`` of transformers' ``BitLinear``, which
  divides the integer product (``y = (x_q · codes) / (s_x · weight_scale)``), so the
  ternary scale ``g`` (``W ≈ g · codes``) is ``1 / weight_scale``. Each ternary weight may
  come in either layout.
- *tied embeddings*: a folder whose ``config.json`` says ``tie_word_embeddings`` may leave
  out ``lm_head.weight``; it is then ``model.embed_tokens.weight``, the same parameter (one
  tensor in memory, as in transformers).
- *no float detour*: the module is made empty (``model.empty_model``: meta device, ternary
  layers without latent weights) and filled tensor by tensor (``model.fill``): a float
  ternary weight is read, ternarized and packed, and freed before the next is read; a packed
  one is re-packed byte-wise into ``tribuild.runtime.packing``'s layout. The loaded module
  holds packed bytes and scales for its ternary layers, nothing else, and is in eval mode.
  Other tensors come in the dtypes the module declares.
- Everything is checked before anything loads: missing, extra and mis-shaped tensors are
  each named with their shapes in one ``CheckpointError``, from the files' headers alone.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable, Container, Mapping
from pathlib import Path
from typing import NamedTuple

import torch

from tribuild.runtime.model import empty_model, fill
from tribuild.runtime.nn import TernaryLayer
from tribuild.runtime.packing import pack, pack_ternary
from tribuild.runtime.safetensors_io import FileError, entries

VALUES_PER_BYTE = 4
TIED = {"lm_head.weight": "model.embed_tokens.weight"}


class CheckpointError(ValueError):
    """A checkpoint folder that does not fit the module; the message names every problem."""


class Source(NamedTuple):
    """A tensor known by its dtype and shape before it is read (``read``)."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    read: Callable[[], torch.Tensor]
    map: Callable[..., torch.Tensor] | None = None  # safetensors_io.Entry.map, for a file


def folder_sources(folder: str | Path) -> tuple[dict[str, Source], dict[str, str]]:
    """The tensors of the folder's ``*.safetensors`` files by key, and the tied keys
    (``TIED``'s, where ``config.json`` ties them and the folder leaves the target out)."""
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{folder}: no *.safetensors files")
    sources: dict[str, Source] = {}
    for f in files:
        try:
            found = entries(f)
        except (FileError, OSError) as e:
            raise CheckpointError(str(e)) from None
        for key, entry in found.items():
            if key in sources:
                raise CheckpointError(f"{folder}: tensor {key} is in more than one file")
            sources[key] = Source(entry.dtype, entry.shape, entry.read, entry.map)
    tied: dict[str, str] = {}
    config = folder / "config.json"
    if config.exists() and json.loads(config.read_text()).get("tie_word_embeddings"):
        tied = {k: s for k, s in TIED.items() if k not in sources and s in sources}
    return sources, tied


def read_folder(folder: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's ``*.safetensors`` files, by key (tied ones included)."""
    sources, tied = folder_sources(folder)
    tensors = {key: source.read() for key, source in sources.items()}
    return tensors | {key: tensors[source] for key, source in tied.items()}


def unpack_transformers(packed: torch.Tensor, rows: int) -> torch.Tensor:
    """The int8 codes ``[rows, ...]`` of a weight packed by transformers' ``pack_weights``."""
    offsets = torch.cat([(packed >> (2 * i)) & 3 for i in range(VALUES_PER_BYTE)], dim=0)
    return offsets[:rows].view(torch.int8) - 1  # bytes throughout: a load's time is its passes


def load_checkpoint(
    cls: type[torch.nn.Module],
    folder: str | Path,
    int8_floats: bool = False,
    cache: bool = True,
) -> torch.nn.Module:
    """A new instance of ``cls`` (a generated module's class) with the folder's weights, in
    eval mode (see the module doc); with ``int8_floats``, its large float layers in 8 bits
    (``int8.quantize_floats``: to run, not to save), but for the embeddings, which read the
    file's own rows (``int8.MappedEmbedding``). With ``cache`` (and ``$TRIBUILD_WEIGHT_CACHE``
    not ``off``), the first load of a folder writes its conversion to the weight cache and a
    later load of the same files maps it instead of converting (``weight_cache``)."""
    # Making a model's hundreds of modules allocates enough objects to start the cyclic
    # collector's full passes over everything torch holds: 40% of a cached load of 30 layers,
    # and the load makes no garbage worth them.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _load_checkpoint(cls, Path(folder), int8_floats, cache)
    finally:
        if paused:
            gc.enable()


def _load_checkpoint(
    cls: type[torch.nn.Module], folder: Path, int8_floats: bool, cache: bool
) -> torch.nn.Module:
    from tribuild.runtime import weight_cache

    sources, tied = folder_sources(folder)
    model = empty_model(cls)
    ternary = _ternary(model)
    slot = weight_cache.Slot.of(model, folder, ternary, int8_floats) if cache else None
    hit = slot.lookup() if slot is not None else None
    cached = hit.ternary if hit is not None else {}
    lazy = hit.lazy if hit is not None else frozenset()
    model = _load(model, sources, tied, str(folder), cached=cached, lazy=lazy)
    replaced: set[str] = set()
    if int8_floats:
        from tribuild.runtime.int8 import (
            Int8Embedding,
            Int8Linear,
            MappedEmbedding,
            quantize_floats,
        )

        mapped = {  # embeddings stay exact, read from the file a row at a time
            # copy-on-write: a write to the module's table changes its own copy of a page (a
            # read-only map made it a segfault), never the file
            name: source.map(populate=False, private=True)
            for name, module in model.named_modules()
            if isinstance(module, torch.nn.Embedding)
            and (source := sources.get(f"{name}.weight")) is not None
            and source.map is not None
            and source.dtype.is_floating_point
        }
        quantize_floats(model, mapped=mapped, rows=hit.rows if hit is not None else None)
        replaced = {  # their float weights are dropped: a later load need not read them
            f"{name}.weight"
            for name, module in model.named_modules()
            if isinstance(module, (Int8Linear, Int8Embedding, MappedEmbedding))
        }
    if slot is not None and hit is not None:
        slot.adopt(model, hit)
    elif slot is not None:
        slot.store(model, replaced)
    return model


def load_tensors(
    cls: type[torch.nn.Module], tensors: Mapping[str, torch.Tensor], where: str = "checkpoint"
) -> torch.nn.Module:
    """A new instance of ``cls`` with ``tensors`` in the float or packed layout (see the
    module doc), in eval mode; the tensors are not shared with it."""
    sources = {k: Source(v.dtype, tuple(v.shape), _given(v)) for k, v in tensors.items()}
    return _load(empty_model(cls), sources, {}, where, copied=True)


def _given(value: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: value


def _ternary(model: torch.nn.Module) -> dict[str, tuple[tuple[int, ...], str]]:
    """Each ternary weight's state_dict key, its shape and its scale mode."""
    ternary = {}
    for prefix, module in model.named_modules():
        if isinstance(module, TernaryLayer):
            for name, shape in module.TERNARY:
                ternary[f"{prefix}.{name}" if prefix else name] = (tuple(shape), module.scale_mode)
    return ternary


def _load(
    model: torch.nn.Module,
    sources: dict[str, Source],
    tied: dict[str, str],
    where: str,
    copied: bool = False,
    cached: Mapping[str, torch.Tensor] | None = None,
    lazy: Container[str] = (),
) -> torch.nn.Module:
    """``model`` (``empty_model``'s) filled from ``sources``; ``cached``: packed weights and
    scales converted before (``weight_cache``), taken as they are; ``lazy``: keys mapped
    unread, for tensors the caller drops (``weight_cache``'s *lazy*)."""
    cls = type(model)
    cached = cached or {}
    state = model.state_dict()
    ternary = _ternary(model)
    expected = {k: tuple(v.shape) for k, v in state.items() if not _is_scale(k, ternary)}
    for key, (shape, _) in ternary.items():
        expected[key] = shape
    given = {**sources, **{key: sources[source] for key, source in tied.items()}}
    problems = _check(expected, ternary, given)
    scales = {f"{k}_scale" for k in ternary if k in given and given[k].dtype == torch.uint8}
    extra = sorted(set(sources) - set(expected) - scales)
    problems += [f"unexpected {k} {list(sources[k].shape)}" for k in extra]
    if problems:
        raise CheckpointError(
            f"{where} does not fit {cls.__name__} {getattr(cls, 'ARGS', {})}:\n  "
            + "\n  ".join(problems)
        )
    converted: dict[str, torch.Tensor] = {}
    # float ternary weights are mapped from their files (or read), ternarized and packed one by
    # one, |w| in a buffer made once for the largest: no fresh allocation per weight, whose
    # pages would be faulted in each time
    floats = [
        given[k]
        for k in ternary
        if k in given and k not in cached and given[k].dtype != torch.uint8
    ]
    largest = max((math.prod(s.shape) * 4 for s in floats), default=0)
    abs_buffer = torch.empty(largest, dtype=torch.uint8)
    for key, shape in expected.items():
        if key in tied:
            continue
        source = given[key]
        if key in cached:  # converted by an earlier load (weight_cache), mapped
            converted[key], converted[f"{key}_scale"] = cached[key], cached[f"{key}_scale"]
        elif key in lazy and source.map is not None and source.dtype == state[key].dtype:
            # dropped unread by the caller; copy-on-write, so that one a module kept after all
            # would be an ordinary tensor (writable, the file's values)
            converted[key] = source.map(populate=False, private=True)
        elif key not in ternary:
            value = source.read()
            if value.is_floating_point():  # the module's dtype, converted while it is read
                value = value.to(state[key].dtype)
            converted[key] = value
        elif source.dtype == torch.uint8:
            try:
                converted[key] = pack(unpack_transformers(source.read(), shape[0]))
            except ValueError:  # a 2-bit field of 0b11: not a code pack_weights writes
                raise CheckpointError(f"{where}: {key} holds 2-bit values outside 0..2") from None
            scale = sources[f"{key}_scale"].read()
            converted[f"{key}_scale"] = (1.0 / scale.float()).reshape(1)
        else:
            weight = source.map() if source.map is not None else source.read()
            mode = ternary[key][1]
            converted[key], converted[f"{key}_scale"] = pack_ternary(weight, mode, abs_buffer)
            del weight  # unmapped: its pages leave the process before the next weight's come
    for key, source_key in tied.items():
        converted[key] = converted[source_key]
    keep = {k for k in converted if k not in ternary and not _is_scale(k, ternary)}
    model = fill(model, converted, copied=keep if copied else set())
    for key, source_key in tied.items():  # one parameter, as transformers ties them
        owner, _, name = key.rpartition(".")
        setattr(model.get_submodule(owner), name, model.get_parameter(source_key))
    return model


def _check(
    expected: dict[str, tuple[int, ...]],
    ternary: dict[str, tuple[tuple[int, ...], str]],
    given: Mapping[str, Source],
) -> list[str]:
    """Every way ``given`` fails to fit ``expected`` (see the module doc), from shapes alone."""
    problems: list[str] = []
    for key, shape in expected.items():
        source = given.get(key)
        if source is None:
            problems.append(f"missing {key} {list(shape)}")
        elif key in ternary and source.dtype == torch.uint8:
            packed_shape = (math.ceil(shape[0] / VALUES_PER_BYTE), *shape[1:])
            scale = given.get(f"{key}_scale")
            if source.shape != packed_shape:
                problems.append(
                    f"{key}: packed shape {list(source.shape)}, expected {list(packed_shape)} "
                    f"(a weight of shape {list(shape)}, four rows per byte)"
                )
            elif scale is None:
                problems.append(f"missing {key}_scale [1] (the scale of the packed {key})")
            elif math.prod(scale.shape) != 1:
                problems.append(f"{key}_scale: shape {list(scale.shape)}, expected [1]")
            elif ternary[key][1] != "tensor":
                problems.append(f"{key}: a packed weight has one scale, the layer one per row")
        elif source.shape != shape:
            problems.append(f"{key}: shape {list(source.shape)}, expected {list(shape)}")
    return problems


def _is_scale(key: str, ternary: Container[str]) -> bool:
    return key.endswith("_scale") and key[: -len("_scale")] in ternary
