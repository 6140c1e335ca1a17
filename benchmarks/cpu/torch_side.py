"""The torch side of the CPU benchmark: the checkpoint folder, tribuild's and transformers'
runtimes, the GEMV and read-bandwidth figures, and ResNet-18. Each command runs in a process
of its own (``python torch_side.py COMMAND SPEC OUT``).

Terms:
- *same weights*: every ternary projection of the checkpoint is ``codes · 0.02`` (codes a
  third each of -1, 0, +1, the float layout), the norms ``1 + 0.1 · noise``, the embedding
  ``0.02 · noise`` and tied to the output (``lm_head``), as bitnet-b1.58-2B-4T ties them. Each
  runtime ternarizes the projections as its own loader does: tribuild's ``load_checkpoint``
  and llama.cpp's converter (``convert_hf_to_gguf.py``'s ``BitnetModel.weight_quant``) both
  to ``absmean · codes``; the transformers runtime applies that same ``weight_quant`` to the
  float ``nn.Linear`` weights it loaded, so all three hold ``absmean · codes``.
- *transformers runtime*: ``BitNetForCausalLM`` without a quantization config (plain float32
  ``nn.Linear`` projections, no activation quantization), decoding with its own cache and
  ``logits_to_keep=1``, as its ``generate`` runs. Its *SiLU logits* are its logits with each
  MLP's activation set to SiLU: llama.cpp's ``bitnet`` graph gates the MLP with SiLU (the
  1bitLLM models'), not with bitnet-b1.58-2B-4T's squared ReLU, so llama.cpp's logits are
  compared with those.
- *tribuild runtime*: the generated module of ``models/bitnet_lm.tri`` loaded with
  ``load_checkpoint(..., int8_floats=True)`` (the tied embedding and head in 8 bits a weight,
  as llama.cpp holds them in 16), the backend chosen as a user's would be (``auto``), decoding
  in a ``KVCache(last_only=True)``: what ``Model.generate`` does, one step at a time. Its
  *first load* and *second load*: ``load_checkpoint`` converts a float checkpoint (reads and
  ternarizes every float32 weight) and writes the conversion to tribuild's weight cache
  (``runtime.weight_cache``; here ``spec["weight_cache"]``, emptied before); a later load of
  the same folder maps that instead, as llama.cpp maps the GGUF that its own converter
  (``convert_hf_to_gguf.py``, a separate step not timed here) wrote. ``tribuild-first-load``
  times the first (load and first token only, the cache empty); the ``tribuild`` worker, a
  second process with nothing warm in Python, loads the second time and measures everything.
- *GEMV*: one decode-step product ``[1, K] · [N, K]ᵀ`` through ``launch.ternary_linear`` (the
  function every generated ternary layer reaches), cycled over enough weights that their
  packed bytes are twice the last-level cache, so each call reads its weight from memory:
  *BitLinear* (``quantize=True``: the int8 activation quantization in the call, as -O3 fuses
  it) and *ternary* (float activations that are no layer's marked quantized output: the
  float-activation kernel; -O2's own ``act_quant`` output reaches the BitLinear one). *GB/s*
  counts the bytes a 2-bit kernel must read (packed codes and scale), whatever the backend
  reads. The 8-bit *head* (``int8.Int8Linear``, ``[1, dim] · [vocab, dim]ᵀ``) is timed the
  same way (its GB/s counts its int8 bytes and scales), and so is the float32 ``F.linear`` of
  the ternary shape (its GB/s counts float32 bytes). *read bandwidth*: ``torch.sum`` over a
  float32 buffer of 1 GiB (well past the cache) on the same threads.
  (``--quick`` runs use fewer weights and a smaller buffer: figures for the smoke run only.)
- *ResNet-18*: the zoo's ``resnet18`` target (-O2) beside its float twin
  (``Model.float_module()``) with each ternary weight replaced once by its ternarized float
  weight and plain ``nn.Conv2d``/``nn.Linear`` forwards: float32 PyTorch as torchvision's
  model runs; batch 1, 224x224, interleaved rounds, medians.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT)]
import protocol  # noqa: E402

ENTRY = "models/bitnet_lm.tri:BitNetLM"
CODE_SCALE = 0.02


def _torch(threads: int) -> Any:
    import torch

    torch.set_num_threads(threads)
    return torch


def import_generated(path: str | Path, name: str = "bench_generated") -> Any:
    spec = importlib.util.spec_from_file_location(name, str(path))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hf_config(args: dict) -> Any:
    from transformers import BitNetConfig

    return BitNetConfig(
        vocab_size=args["vocab"],
        hidden_size=args["dim"],
        intermediate_size=args["hidden"],
        num_hidden_layers=args["layers"],
        num_attention_heads=args["heads"],
        num_key_value_heads=args["kv_heads"],
        rope_parameters={"rope_type": "default", "rope_theta": args["rope_theta"]},
        rms_norm_eps=args["eps"],
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        architectures=["BitNetForCausalLM"],
    )


def prepare(spec: dict, out: Path) -> None:
    """The generated module (``spec["module"]``'s folder) and the checkpoint folder; writes the
    module's full construction arguments (defaults included) to ``out``."""
    from tests.codegen.harness import build, write

    module_dir = Path(spec["module"]).parent
    # every run: the module is tribuild's code under test, not an input to keep
    write(build(ENTRY, spec["target_args"], spec["opt_level"]), module_dir)
    args = dict(import_generated(spec["module"]).Model.ARGS)
    folder = Path(spec["checkpoint"])
    if not (folder / "config.json").exists():
        write_checkpoint(args, folder, spec["seed"])
    out.write_text(json.dumps(args))


def write_checkpoint(args: dict, folder: Path, seed: int) -> None:
    """The *same weights* in transformers' float layout, one safetensors file per layer (so
    no process holds more than a layer to write them) and an index."""
    torch = _torch(2)
    from safetensors.torch import save_file
    from transformers import BitNetForCausalLM

    config = hf_config(args)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in BitNetForCausalLM(config).state_dict().items()}
    shapes.pop("lm_head.weight")  # tied
    groups: dict[str, list[str]] = {}
    for key in shapes:
        parts = key.split(".")
        part = f"layer{int(parts[2]):03d}" if parts[1] == "layers" else "outer"
        groups.setdefault(f"model-{part}.safetensors", []).append(key)
    gen = torch.Generator().manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, keys in groups.items():
        tensors = {}
        for key in keys:
            shape = shapes[key]
            if key.endswith("_proj.weight"):
                tensors[key] = torch.randint(-1, 2, shape, generator=gen).float() * CODE_SCALE
            elif "norm" in key:
                tensors[key] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
            else:
                tensors[key] = 0.02 * torch.randn(shape, generator=gen)
        save_file(tensors, str(folder / name))
    weight_map = {key: name for name, keys in groups.items() for key in keys}
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1)
    )
    config.save_pretrained(folder)


def weight_quant(weight: Any) -> Any:
    """llama.cpp's converter's ternarization of a BitNet projection (``BitnetModel.
    weight_quant``): ``absmean · round(w / absmean)`` clamped to one step."""
    scale = weight.abs().mean().clamp(min=1e-5)
    return (weight / scale).round().clamp(-1, 1) * scale


class TribuildLM:
    def __init__(self, spec: dict):
        self.torch = _torch(spec["threads"])
        from tribuild.runtime.checkpoint import load_checkpoint
        from tribuild.runtime.decoding import KVCache

        self.spec, self.load_checkpoint, self.KVCache = spec, load_checkpoint, KVCache
        self.Model = import_generated(spec["module"]).Model
        if "weight_cache" in spec:  # the bench's own cache, not the user's (see the doc)
            from tribuild.runtime.weight_cache import VARIABLE

            os.environ[VARIABLE] = spec["weight_cache"]

    def load(self) -> None:
        floats = self.spec.get("int8_floats", True)
        self.model = self.load_checkpoint(self.Model, self.spec["checkpoint"], int8_floats=floats)

    def reset(self, capacity: int) -> None:
        self.cache = self.KVCache(capacity, last_only=True)  # as Model.generate makes it

    def _last(self, ids: list[int]) -> Any:
        with self.torch.no_grad(), self.cache.step():
            return self.model(self.torch.tensor([ids]))[0, -1]

    def forward(self, ids: list[int]) -> int:
        return int(self._last(ids).argmax())

    def logits(self, ids: list[int]) -> list[float]:
        self.reset(len(ids))
        return self._last(ids).tolist()


class TransformersLM:
    def __init__(self, spec: dict):
        self.torch = _torch(spec["threads"])
        from transformers import BitNetForCausalLM

        self.spec, self.cls = spec, BitNetForCausalLM

    def load(self) -> None:
        torch = self.torch
        self.model = self.cls.from_pretrained(self.spec["checkpoint"], dtype=torch.float32).eval()
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                if name.endswith("_proj.weight"):
                    p.copy_(weight_quant(p))

    def reset(self, capacity: int) -> None:
        self.cache = None

    def _last(self, ids: list[int]) -> Any:
        with self.torch.no_grad():
            out = self.model(
                input_ids=self.torch.tensor([ids]),
                past_key_values=self.cache,
                use_cache=True,
                logits_to_keep=1,
            )
        self.cache = out.past_key_values
        return out.logits[0, -1]

    def forward(self, ids: list[int]) -> int:
        return int(self._last(ids).argmax())

    def logits(self, ids: list[int]) -> list[float]:
        self.reset(len(ids))
        return self._last(ids).tolist()

    def silu_logits(self, ids: list[int]) -> list[float]:
        from transformers.activations import ACT2FN

        for layer in self.model.model.layers:
            layer.mlp.act_fn = ACT2FN["silu"]
        return self.logits(ids)


def _median_calls(fns: list[Any], repeats: int) -> float:
    """The median seconds of one call, cycling through ``fns`` ``repeats`` times after a
    warm-up cycle."""
    for fn in fns:
        fn()
    times = []
    for _ in range(repeats):
        for fn in fns:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def last_level_cache_bytes() -> int:
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        text = (index / "size").read_text().strip()
        sizes.append(int(text[:-1]) * {"K": 2**10, "M": 2**20}[text[-1]])
    return max(sizes, default=32 * 2**20)


def kernels(spec: dict, out: Path) -> None:
    """Read bandwidth, the ternary GEMVs and the float32 GEMV, in this process, interleaved."""
    torch = _torch(spec["threads"])
    import torch.nn.functional as F

    from tribuild.runtime.int8 import Int8Linear, Rows
    from tribuild.runtime.launch import backend_for, quantize_activations, ternary_linear
    from tribuild.runtime.packing import pack

    args = spec["args"]
    n, k = args["hidden"], args["dim"]
    buffer = torch.ones(spec["read_bytes"] // 4)
    cache = last_level_cache_bytes()
    weights: list[tuple[Any, Any]] = []
    packed_bytes = 0
    limit = spec["max_gemv_layers"]
    while (packed_bytes < 2 * cache or len(weights) < 2) and len(weights) < limit:
        packed = pack(torch.randint(-1, 2, (n, k), dtype=torch.int8))
        weights.append((packed, torch.full((1,), CODE_SCALE)))
        packed_bytes += packed.numel() + 4
    per_layer = packed_bytes / len(weights)
    x = torch.randn(1, 1, k)
    h = quantize_activations(x).clone()  # a copy is unmarked: the float-activation kernel
    dense = [torch.randn(n, k) for _ in range(max(2, math.ceil(2 * cache / (4 * n * k))))]
    vocab = args["vocab"]  # the 8-bit head, [1, k] · [vocab, k]ᵀ, as a decode step runs it
    heads = [
        Int8Linear(Rows.quantize(torch.randn(vocab, k)))
        for _ in range(max(2, math.ceil(2 * cache / (vocab * k))))
    ]
    cases = {
        "read": [lambda: buffer.sum()],
        "bitlinear": [lambda w=w: ternary_linear(x, *w, quantize=True) for w in weights],
        "ternary": [lambda w=w: ternary_linear(h, *w) for w in weights],
        "head": [lambda head=head: head(x) for head in heads],
        "float": [lambda w=w: F.linear(x, w) for w in dense],
    }
    rounds: dict[str, list[float]] = {name: [] for name in cases}
    with torch.no_grad():
        for _ in range(spec["kernel_rounds"]):
            for name, fns in cases.items():
                rounds[name].append(_median_calls(fns, 3 if name == "read" else 5))
    t = {name: statistics.median(v) for name, v in rounds.items()}
    figures = {
        "read_gb_s": buffer.numel() * 4 / t["read"] / 1e9,
        "read_bytes": buffer.numel() * 4,
        "gemv_shape": [1, k, n],
        "backend": backend_for(x),
        "layers": len(weights),
        "last_level_cache_bytes": cache,
        "float_ms": t["float"] * 1e3,
        "float_gb_s": n * k * 4 / t["float"] / 1e9,
    }
    for name in ("bitlinear", "ternary"):
        figures[f"{name}_ms"] = t[name] * 1e3
        figures[f"{name}_gb_s"] = per_layer / t[name] / 1e9
    figures["head_shape"] = [1, k, vocab]
    figures["head_ms"] = t["head"] * 1e3
    figures["head_gb_s"] = (vocab * k + 4 * vocab) / t["head"] / 1e9
    out.write_text(json.dumps(figures, indent=1) + "\n")


def resnet18(spec: dict, out: Path) -> None:
    torch = _torch(spec["threads"])
    from torch import nn

    from tests.codegen.harness import build, write_and_import
    from tribuild.runtime.float_twin import FloatTernaryConv2d, FloatTernaryLinear
    from tribuild.runtime.ternarize import ternarize_ste

    torch.manual_seed(spec["seed"])
    folder = Path(spec["work"]) / "resnet18"
    Model = write_and_import(build(*spec["resnet"], "2"), folder).Model
    twin = Model.float_module().eval()
    ternary = Model.from_float(twin.state_dict()).eval()
    with torch.no_grad():
        for m in twin.modules():
            if isinstance(m, (FloatTernaryConv2d, FloatTernaryLinear)):
                m.weight.copy_(ternarize_ste(m.weight, m.scale_mode))
                plain = nn.Conv2d if isinstance(m, FloatTernaryConv2d) else nn.Linear
                m.forward = plain.forward.__get__(m)  # type: ignore[method-assign]
    x = torch.randn(spec["resnet_input"])
    fns = {"tribuild": ternary, "float32": twin}
    times: dict[str, list[float]] = {name: [] for name in fns}
    with torch.no_grad():
        error = float((ternary(x) - twin(x)).abs().max() / twin(x).abs().max())
        for fn in fns.values():
            fn(x)
        for r in range(spec["resnet_rounds"]):
            for name in list(fns)[r % 2 :] + list(fns)[: r % 2]:
                start = time.perf_counter()
                fns[name](x)
                times[name].append((time.perf_counter() - start) * 1e3)
    figures = {
        "input": list(x.shape),
        "ms": {name: statistics.median(v) for name, v in times.items()},
        "max_rel_error": error,
    }
    figures["speedup"] = figures["ms"]["float32"] / figures["ms"]["tribuild"]
    out.write_text(json.dumps(figures, indent=1) + "\n")


def main() -> None:
    command = sys.argv.pop(1)
    if command == "tribuild-first-load":  # the load figures alone (see the module doc)
        protocol.run_worker(TribuildLM, command, protocol.measure_load)
        return
    if command in ("tribuild", "transformers"):
        cls = TribuildLM if command == "tribuild" else TransformersLM
        runtime: Any = None

        def make(spec: dict) -> Any:
            nonlocal runtime
            runtime = cls(spec)
            return runtime

        protocol.run_worker(make, command)
        if command == "transformers":
            spec = json.loads(Path(sys.argv[1]).read_text())
            silu = runtime.silu_logits(spec["probe"])
            Path(f"{sys.argv[2]}.silu.json").write_text(json.dumps(silu))
        return
    spec = json.loads(Path(sys.argv[1]).read_text())
    if command != "prepare":
        protocol.start_watchdog(spec["max_rss_bytes"], command)
    {"prepare": prepare, "kernels": kernels, "resnet18": resnet18}[command](spec, Path(sys.argv[2]))


if __name__ == "__main__":
    main()
