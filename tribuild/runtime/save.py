"""Writing a generated module as a checkpoint folder that ``checkpoint.load_checkpoint`` reads.

Terms (``tribuild.runtime.checkpoint`` defines the layouts):
- ``save_checkpoint(model, folder, dtype=None)``: ``folder/model.safetensors`` with every
  ternary weight in the *packed layout* (transformers' ``pack_weights`` bytes and the
  ``weight_scale`` that divides the product, ``1 / g``), and every other tensor as the model
  holds it, or in ``dtype`` when given for floating tensors (``torch.bfloat16`` halves the
  float embedding and head, as BitNet checkpoints ship them); beside it ``config.json``
  with the generated class's ``ARGS``, for people: the loader reads only the tensors.
- The model is packed as ``freeze()`` packs it (its latent weights, if any, ternarized), and
  is not changed: a training model can be saved between steps.
- Only the packed layout's weights are written packed: a ternary weight of two dims with one
  scale (``scale="tensor"``); any other ternary weight is a ``ValueError`` naming it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from tribuild.runtime.checkpoint import VALUES_PER_BYTE
from tribuild.runtime.nn import TernaryLayer
from tribuild.runtime.packing import unpack


def pack_transformers(codes: torch.Tensor) -> torch.Tensor:
    """Codes ``[rows, ...]`` in {-1, 0, 1} as transformers' ``pack_weights`` stores them: uint8
    ``[ceil(rows / 4), ...]``, stored row ``r`` holding rows ``r + i·R`` in bits ``2i .. 2i+1``
    as ``code + 1`` (the inverse of ``checkpoint.unpack_transformers``)."""
    rows = codes.shape[0]
    stored = math.ceil(rows / VALUES_PER_BYTE)
    shifted = torch.zeros((stored * VALUES_PER_BYTE, *codes.shape[1:]), dtype=torch.int32)
    shifted[:rows] = codes.to(torch.int32) + 1  # padding rows stay 0 bits, as transformers'
    parts = shifted.reshape(VALUES_PER_BYTE, stored, *codes.shape[1:])
    packed = sum(parts[i] << (2 * i) for i in range(VALUES_PER_BYTE))
    assert isinstance(packed, torch.Tensor)
    return packed.to(torch.uint8)


def packed_tensors(
    model: torch.nn.Module, dtype: torch.dtype | None = None
) -> dict[str, torch.Tensor]:
    """The tensors ``save_checkpoint`` writes, by key (see the module doc)."""
    state = {  # state_dict() packs the latent weights, which are then left out
        k: v.detach()
        for k, v in model.state_dict().items()
        if not k.rpartition(".")[2].startswith("latent_")
    }
    out: dict[str, torch.Tensor] = {}
    for prefix, layer in model.named_modules():
        if not isinstance(layer, TernaryLayer):
            continue
        dot = f"{prefix}." if prefix else ""
        for name, shape in layer.TERNARY:
            key = dot + name
            if len(shape) != 2 or layer.scale_mode != "tensor":
                raise ValueError(
                    f"{key}: the packed layout holds ternary weights of two dims with one "
                    f"scale, not {list(shape)} with scale={layer.scale_mode!r}"
                )
            # int8 codes, dropped after: saving leaves the model no float copy of its weights
            codes = unpack(state.pop(key), shape)
            scale = state.pop(f"{key}_scale")
            out[key] = pack_transformers(codes.cpu())
            out[f"{key}_scale"] = (1.0 / scale.float().cpu()).reshape(1)
    for key, value in state.items():
        if dtype is not None and value.is_floating_point():
            value = value.to(dtype)
        out[key] = value.cpu().contiguous()
    return out


def save_checkpoint(
    model: torch.nn.Module, folder: str | Path, dtype: torch.dtype | None = None
) -> Path:
    """Write ``model`` to ``folder`` (made if needed); returns the safetensors file's path."""
    try:
        from safetensors.torch import save_file
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "saving safetensors checkpoints needs the `safetensors` package "
            "(pip install 'tribuild[lm]')"
        ) from e
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.safetensors"
    save_file(packed_tensors(model, dtype), str(path))
    config = {"tribuild_class": type(model).__name__, "args": getattr(model, "ARGS", {})}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return path
