"""The llama.cpp side of the CPU benchmark, run by the bench venv's Python (numpy, ``gguf``,
``llama_cpp``; never torch): ``python llama_side.py write SPEC OUT`` writes the GGUF file of
the checkpoint folder, ``python llama_side.py run SPEC OUT`` measures llama.cpp on it.

Terms:
- *GGUF file*: what llama.cpp's ``convert_hf_to_gguf.py --outtype tq2_0`` writes for a
  ``BitNetForCausalLM`` folder, written here with the ``gguf`` package from the same
  safetensors: architecture ``bitnet``, each projection ternarized as the converter's
  ``BitnetModel.weight_quant`` does (``absmean · codes``) and quantized to TQ2_0 by
  ``gguf.quants`` (blocks of 256 weights: 2-bit codes and an f16 block scale, which here is
  the absmean), the token embedding in F16 (the converter's choice for TQ types; llama.cpp's
  ``bitnet`` graph reads it as the output matrix too), norms in F32. Tensor names come from
  gguf's own map of transformers' names; that map knows BitNet's two sub-norms only by
  1bitLLM's names (``inner_attn_ln``, ``ffn_layernorm``), so those are asked for by them.
  The tokenizer is ``none`` with the vocab size: the benchmark feeds token ids.
- *safetensors*: read with numpy (an 8-byte header length, a JSON header, raw little-endian
  data), float32 tensors only: the checkpoint folder's.
- *llama.cpp runtime*: llama.cpp's C API through llama_cpp's ctypes bindings, no Python
  object of llama-cpp-python's in between: a model loaded with the default parameters
  (mapped), one context of ``capacity`` positions with ``threads`` threads for decoding and
  for batches, batches of ``llama_batch_get_one`` (logits of the last position only), the
  memory cleared for a fresh sequence.
"""

from __future__ import annotations

import ctypes
import json
import struct
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import protocol  # noqa: E402

SUB_NORMS = {
    "self_attn.attn_sub_norm": "self_attn.inner_attn_ln",
    "mlp.ffn_sub_norm": "mlp.ffn_layernorm",
}


def read_safetensors(path: Path) -> dict[str, Any]:
    import numpy as np

    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    out = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            raise SystemExit(f"{path}: {key} is {entry['dtype']}; the GGUF writer reads F32")
        start, end = entry["data_offsets"]
        out[key] = data[start:end].view(np.float32).reshape(entry["shape"])
    return out


def weight_quant(w: Any) -> Any:
    """``convert_hf_to_gguf.py``'s ``BitnetModel.weight_quant``, in float32 numpy."""
    import numpy as np

    scale = max(float(np.abs(w).mean(dtype=np.float64)), 1e-5)
    return (np.clip(np.round(w / np.float32(scale)), -1, 1) * np.float32(scale)).astype(np.float32)


def write(spec: dict, out: Path) -> None:
    import gguf
    import numpy as np

    args = spec["args"]
    path = Path(spec["gguf"])
    arch = gguf.MODEL_ARCH.BITNET
    names = gguf.get_tensor_name_map(arch, args["layers"])
    writer = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[arch])
    writer.add_context_length(spec["capacity"])
    writer.add_embedding_length(args["dim"])
    writer.add_block_count(args["layers"])
    writer.add_feed_forward_length(args["hidden"])
    writer.add_head_count(args["heads"])
    writer.add_head_count_kv(args["kv_heads"])
    writer.add_rope_freq_base(args["rope_theta"])
    writer.add_layer_norm_rms_eps(args["eps"])
    writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)  # as BitnetModel sets them
    writer.add_rope_scaling_factor(1.0)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_TQ2_0)
    writer.add_vocab_size(args["vocab"])
    writer.add_tokenizer_model("none")
    types: dict[str, str] = {}
    for file in sorted(Path(spec["checkpoint"]).glob("*.safetensors")):
        for key, value in read_safetensors(file).items():
            name = names.get_name(key, try_suffixes=(".weight",)) or names.get_name(
                _one_bit_llm_name(key), try_suffixes=(".weight",)
            )
            if name is None:
                raise SystemExit(f"gguf has no BitNet name for {key}")
            if key.endswith("_proj.weight"):
                qtype = gguf.GGMLQuantizationType.TQ2_0
                data = gguf.quants.quantize(weight_quant(np.asarray(value)), qtype)
            elif key == "model.embed_tokens.weight":
                qtype = gguf.GGMLQuantizationType.F16
                data = np.asarray(value).astype(np.float16)
            else:
                qtype = gguf.GGMLQuantizationType.F32
                data = np.array(value, dtype=np.float32)
            writer.add_tensor(name, data, raw_dtype=qtype)
            types[name] = qtype.name
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    out.write_text(json.dumps({"bytes": path.stat().st_size, "types": types}, indent=1) + "\n")


def _one_bit_llm_name(key: str) -> str:
    """transformers' sub-norm names as 1bitLLM's BitNet names them, the ones gguf's map knows."""
    for ours, theirs in SUB_NORMS.items():
        key = key.replace(ours, theirs)
    return key


class LlamaLM:
    def __init__(self, spec: dict):
        import llama_cpp
        import numpy as np

        self.spec, self.L, self.np = spec, llama_cpp, np
        self._quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)
        llama_cpp.llama_log_set(self._quiet, ctypes.c_void_p())
        llama_cpp.llama_backend_init()

    def load(self) -> None:
        L, spec = self.L, self.spec
        self.model = L.llama_model_load_from_file(
            spec["gguf"].encode(), L.llama_model_default_params()
        )
        if not self.model:
            raise SystemExit(f"llama.cpp could not load {spec['gguf']}")
        params = L.llama_context_default_params()
        params.n_ctx = spec["capacity"]
        params.n_batch = params.n_ubatch = max(spec["prefill"] + [spec["prompt"]])
        params.n_threads = params.n_threads_batch = spec["threads"]
        self.ctx = L.llama_init_from_model(self.model, params)
        if not self.ctx:
            raise SystemExit("llama.cpp could not make a context")
        self.memory = L.llama_get_memory(self.ctx)
        self.vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))

    def reset(self, capacity: int) -> None:
        self.L.llama_memory_clear(self.memory, True)

    def _last(self, ids: list[int]) -> Any:
        L = self.L
        tokens = (L.llama_token * len(ids))(*ids)
        status = L.llama_decode(self.ctx, L.llama_batch_get_one(tokens, len(ids)))
        if status != 0:
            raise SystemExit(f"llama_decode returned {status}")
        return self.np.ctypeslib.as_array(L.llama_get_logits_ith(self.ctx, -1), (self.vocab,))

    def forward(self, ids: list[int]) -> int:
        return int(self._last(ids).argmax())

    def logits(self, ids: list[int]) -> list[float]:
        self.reset(len(ids))
        return [float(v) for v in self._last(ids)]


def main() -> None:
    command = sys.argv.pop(1)
    if command == "write":
        write(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
    elif command == "run":
        protocol.run_worker(LlamaLM, "llama.cpp")
    else:
        raise SystemExit(f"unknown command {command!r}: write or run")


if __name__ == "__main__":
    main()
