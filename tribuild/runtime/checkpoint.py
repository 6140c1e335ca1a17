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
  out ``lm_head.weight``; it is then ``model.embed_tokens.weight``.
- Everything is checked before anything loads: missing, extra and mis-shaped tensors are
  each named with their shapes in one ``CheckpointError``, and the module is only made once
  the whole checkpoint fits it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from tribuild.runtime.nn import TernaryLayer
from tribuild.runtime.packing import pack, pack_ternary

VALUES_PER_BYTE = 4
TIED = {"lm_head.weight": "model.embed_tokens.weight"}


class CheckpointError(ValueError):
    """A checkpoint folder that does not fit the module; the message names every problem."""


def read_folder(folder: str | Path) -> dict[str, torch.Tensor]:
    """Every tensor of the folder's ``*.safetensors`` files, by key."""
    try:
        from safetensors.torch import load_file
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "loading safetensors checkpoints needs the `safetensors` package "
            "(pip install 'tribuild[lm]')"
        ) from e
    folder = Path(folder)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{folder}: no *.safetensors files")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        for key, value in load_file(str(f)).items():
            if key in tensors:
                raise CheckpointError(f"{folder}: tensor {key} is in more than one file")
            tensors[key] = value
    config = folder / "config.json"
    if config.exists() and json.loads(config.read_text()).get("tie_word_embeddings"):
        for key, source in TIED.items():
            if key not in tensors and source in tensors:
                tensors[key] = tensors[source]
    return tensors


def unpack_transformers(packed: torch.Tensor, rows: int) -> torch.Tensor:
    """The int8 codes ``[rows, ...]`` of a weight packed by transformers' ``pack_weights``."""
    parts = [((packed.to(torch.int16) >> (2 * i)) & 3) - 1 for i in range(VALUES_PER_BYTE)]
    return torch.cat(parts, dim=0)[:rows].to(torch.int8)


def load_checkpoint(cls: type[torch.nn.Module], folder: str | Path) -> torch.nn.Module:
    """A new ``cls()`` (a generated module's class) with the folder's weights."""
    return load_tensors(cls, read_folder(folder), str(folder))


def load_tensors(
    cls: type[torch.nn.Module], tensors: dict[str, torch.Tensor], where: str = "checkpoint"
) -> torch.nn.Module:
    """A new ``cls()`` with ``tensors`` in the float or packed layout (see the module doc)."""
    model = cls()
    freeze = getattr(model, "freeze", None)  # a generated module's (nn.Module's getattr types
    if callable(freeze):  # any other attribute as a Tensor)
        freeze()  # inference form: packed buffers only, no latent training weights
    state = model.state_dict()
    ternary = {}
    for prefix, module in model.named_modules():
        if isinstance(module, TernaryLayer):
            for name, shape in module.TERNARY:
                ternary[f"{prefix}.{name}" if prefix else name] = (tuple(shape), module.scale_mode)
    expected = {k: tuple(v.shape) for k, v in state.items() if not _is_scale(k, ternary)}
    for key, (shape, _) in ternary.items():
        expected[key] = shape
    problems: list[str] = []
    used: set[str] = set()
    converted: dict[str, torch.Tensor] = {}
    for key, shape in expected.items():
        value = tensors.get(key)
        if value is None:
            problems.append(f"missing {key} {list(shape)}")
            continue
        used.add(key)
        if key not in ternary:
            if tuple(value.shape) != shape:
                problems.append(f"{key}: shape {list(value.shape)}, expected {list(shape)}")
            else:
                converted[key] = value
            continue
        if value.dtype == torch.uint8:
            packed_shape = (math.ceil(shape[0] / VALUES_PER_BYTE), *shape[1:])
            scale = tensors.get(f"{key}_scale")
            if tuple(value.shape) != packed_shape:
                problems.append(
                    f"{key}: packed shape {list(value.shape)}, expected {list(packed_shape)} "
                    f"(a weight of shape {list(shape)}, four rows per byte)"
                )
            elif scale is None:
                problems.append(f"missing {key}_scale [1] (the scale of the packed {key})")
            elif scale.numel() != 1:
                problems.append(f"{key}_scale: shape {list(scale.shape)}, expected [1]")
            else:
                used.add(f"{key}_scale")
                codes = unpack_transformers(value, shape[0])
                if ternary[key][1] != "tensor":
                    problems.append(f"{key}: a packed weight has one scale, the layer one per row")
                    continue
                converted[key] = pack(codes)
                converted[f"{key}_scale"] = (1.0 / scale.float()).reshape(1)
        elif tuple(value.shape) != shape:
            problems.append(f"{key}: shape {list(value.shape)}, expected {list(shape)}")
        else:
            converted[key], converted[f"{key}_scale"] = pack_ternary(value, ternary[key][1])
    extra = sorted(set(tensors) - used)
    problems += [f"unexpected {k} {list(tensors[k].shape)}" for k in extra]
    if problems:
        raise CheckpointError(
            f"{where} does not fit {cls.__name__} {getattr(cls, 'ARGS', {})}:\n  "
            + "\n  ".join(problems)
        )
    model.load_state_dict(converted)
    return model


def _is_scale(key: str, ternary: dict) -> bool:
    return key.endswith("_scale") and key[: -len("_scale")] in ternary
