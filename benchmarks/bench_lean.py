"""The lean decode step (issue 34's memory and load part): loading a BitNet checkpoint folder
into a generated module, the memory the loaded model holds, and decoding, on the CPU.

Terms:
- *config S*: six decoder layers of ``bitnet_2b``'s shape (width 2560, MLP 6912, 20 query
  heads over 5 key/value heads) and a vocabulary of 32000; ``--config 2b`` is ``bitnet_2b``
  itself (128256 tokens, 30 layers), where the machine's memory allows.
- *checkpoint folders*, made here with random weights (nothing is downloaded) and kept in
  ``--work`` between runs: ``float`` (every tensor float32, ternary weights as float master
  weights: what transformers' ``BitNetForCausalLM`` saves) and ``packed`` (projections in
  transformers' ``pack_weights`` layout with their ``weight_scale``, embeddings and
  ``lm_head`` in bfloat16, tied as bitnet-b1.58-2B-4T ships them).
- *one run*: a fresh Python process that imports torch and the generated module, loads a
  folder (``checkpoint.load_checkpoint``, the weight cache off: the conversion is what this
  bench times), then decodes ``--new`` tokens at batch 1 after a 16-token prompt with
  ``--threads`` threads. It reports the load time, RSS after the imports,
  after the load and at its peak (``ru_maxrss``), the bytes of the model's tensors, and the
  median ms of a new token.
- ``--tree`` runs the same measurement on another checkout (``/work/main`` for "before").
- *lm_head products*: the output projection ``[1, dim] · [vocab, dim]ᵀ`` of config S and of
  ``bitnet_2b`` at batch 1, as PyTorch computes it with a float32, a bfloat16 (activations
  in bfloat16 too) and an int8 weight (``torch._weight_int8pack_mm``, one scale per row),
  medians of ``--repeats`` calls: which form of the float layers helps decoding here.
Writes ``results/lean.json`` and ``results/lean.md`` unless ``--quick``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
CONFIGS = {
    "S": dict(vocab=32000, dim=2560, layers=6, heads=20, kv_heads=5, hidden=6912),
    "2b": dict(vocab=128256, dim=2560, layers=30, heads=20, kv_heads=5, hidden=6912),
    "tiny": dict(vocab=512, dim=256, layers=2, heads=4, kv_heads=2, hidden=512),
}


def generated(config: str, work: Path) -> Path:
    """The generated module of ``config`` at -O2, written once under ``work``."""
    out = work / f"gen_{config}"
    if not (out / "model.py").exists():
        sys.path.insert(0, str(ROOT))
        from tests.codegen.harness import build, write

        write(build("models/bitnet_lm.tri:BitNetLM", CONFIGS[config], "2"), out)
    return out / "model.py"


def make_folders(config: str, work: Path) -> dict[str, Path]:
    """The float and packed checkpoint folders of ``config`` (random weights), made once."""
    import torch
    from safetensors.torch import save_file
    from transformers.integrations.bitnet import pack_weights

    a = CONFIGS[config]
    folders = {layout: work / f"ckpt_{config}_{layout}" for layout in ("float", "packed")}
    if all((f / "model.safetensors").exists() for f in folders.values()):
        return folders
    width = a["dim"] // a["heads"]
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (a["vocab"], a["dim"])}
    for i in range(a["layers"]):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (a["dim"],),
            p + "post_attention_layernorm.weight": (a["dim"],),
            p + "self_attn.q_proj.weight": (a["dim"], a["dim"]),
            p + "self_attn.k_proj.weight": (a["kv_heads"] * width, a["dim"]),
            p + "self_attn.v_proj.weight": (a["kv_heads"] * width, a["dim"]),
            p + "self_attn.o_proj.weight": (a["dim"], a["dim"]),
            p + "self_attn.attn_sub_norm.weight": (a["dim"],),
            p + "mlp.gate_proj.weight": (a["hidden"], a["dim"]),
            p + "mlp.up_proj.weight": (a["hidden"], a["dim"]),
            p + "mlp.down_proj.weight": (a["dim"], a["hidden"]),
            p + "mlp.ffn_sub_norm.weight": (a["hidden"],),
        }
    shapes |= {"model.norm.weight": (a["dim"],), "lm_head.weight": (a["vocab"], a["dim"])}
    gen = torch.Generator().manual_seed(0)
    for layout, folder in folders.items():
        folder.mkdir(parents=True, exist_ok=True)
        state: dict[str, torch.Tensor] = {}
        for key, shape in shapes.items():
            if len(shape) == 1:
                state[key] = 1.0 + 0.1 * torch.randn(shape, generator=gen)
            elif key.endswith("_proj.weight") and layout == "packed":
                codes = torch.randint(-1, 2, shape, generator=gen).float()
                state[key] = pack_weights(codes)
                state[key.replace(".weight", ".weight_scale")] = torch.tensor([50.0])
            elif key == "lm_head.weight" and layout == "packed":
                continue  # tied to the embeddings, as bitnet-b1.58-2B-4T ships it
            else:
                w = 0.02 * torch.randn(shape, generator=gen)
                state[key] = w.bfloat16() if layout == "packed" else w
        save_file(state, str(folder / "model.safetensors"))
        (folder / "config.json").write_text(
            json.dumps({"tie_word_embeddings": layout == "packed"}) + "\n"
        )
        del state
    return folders


def one_run(module_path: str, folder: str, threads: int, new: int) -> dict:
    """The child process's measurement (see the module doc); prints one JSON line."""
    import resource
    import time

    import torch

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    import importlib.util

    from tribuild.runtime.checkpoint import load_checkpoint
    from tribuild.runtime.decoding import KVCache
    from tribuild.runtime.generate import pick

    torch.set_num_threads(threads)
    spec = importlib.util.spec_from_file_location("bench_lean_model", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    imported = rss_mb()
    start = time.perf_counter()
    model = load_checkpoint(module.Model, folder).eval()
    load_s = time.perf_counter() - start
    loaded = rss_mb()
    seen: set[int] = set()
    held = 0
    for t in [*model.parameters(), *model.buffers()]:
        if t.untyped_storage().data_ptr() not in seen:
            seen.add(t.untyped_storage().data_ptr())
            held += t.untyped_storage().nbytes()
    vocab = model.lm_head.weight.shape[0]
    prompt = torch.randint(0, vocab, (1, 16), generator=torch.Generator().manual_seed(1))
    times = []
    with torch.no_grad():
        cache = KVCache(16 + new + 1)
        with cache.step():
            logits = model(prompt)
        for _ in range(new):
            token = pick(logits[:, -1])
            start = time.perf_counter()
            with cache.step():
                logits = model(token)
            times.append((time.perf_counter() - start) * 1e3)
    return {
        "load_s": load_s,
        "rss_imports_mb": imported,
        "rss_loaded_mb": loaded,
        "model_tensor_mb": held / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10,
        "decode_ms": statistics.median(times[1:]) if len(times) > 1 else times[0],
    }


def lm_head_products(threads: int, repeats: int) -> dict:
    """Median ms of the output projection in each form (see the module doc), by config."""
    import time

    import torch

    torch.set_num_threads(threads)
    out = {}
    for config in ("S", "2b"):
        vocab, dim = CONFIGS[config]["vocab"], CONFIGS[config]["dim"]
        gen = torch.Generator().manual_seed(0)
        w = 0.02 * torch.randn(vocab, dim, generator=gen)
        x = torch.randn(1, dim, generator=gen)
        scales = w.abs().amax(dim=1) / 127
        q = torch.round(w / scales[:, None]).to(torch.int8)
        wb, xb = w.bfloat16(), x.bfloat16()
        forms = {
            "float32": lambda w=w, x=x: torch.nn.functional.linear(x, w),
            "bfloat16": lambda w=wb, x=xb: torch.nn.functional.linear(x, w),
            "int8 weight": lambda q=q, x=x, s=scales: torch._weight_int8pack_mm(x, q, s),
        }
        del w
        row = {}
        for name, fn in forms.items():
            fn()
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1e3)
            row[name] = statistics.median(times)
        out[config] = row
    return out


def measure(tree: Path, module: Path, folder: Path, threads: int, new: int, runs: int) -> dict:
    """Medians over ``runs`` fresh processes of ``one_run`` with ``tree`` on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a fresh process as a user's
    env["TRIBUILD_WEIGHT_CACHE"] = "off"  # the conversion is timed (see *one run*)
    results = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(module), str(folder)]
            + ["--threads", str(threads), "--new", str(new)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def table(figures: dict) -> str:
    rows = [
        "| config | layout | tree | load (s) | RSS after imports (MB) | RSS after load (MB) "
        "| model tensors (MB) | peak RSS (MB) | decode ms/token |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in figures["rows"]:
        rows.append(
            f"| {r['config']} | {r['layout']} | {r['tree']} | {r['load_s']:.2f} | "
            f"{r['rss_imports_mb']:.0f} | {r['rss_loaded_mb']:.0f} | {r['model_tensor_mb']:.0f} | "
            f"{r['peak_rss_mb']:.0f} | {r['decode_ms']:.1f} |"
        )
    heads = figures.get("lm_head_ms")
    if heads:
        names = list(next(iter(heads.values())))
        rows += ["", "| lm_head product, batch 1 (ms) | " + " | ".join(names) + " |"]
        rows.append("|---" * (len(names) + 1) + "|")
        for config, row in heads.items():
            rows.append(f"| {config} | " + " | ".join(f"{row[n]:.1f}" for n in names) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--child", nargs=2, metavar=("MODULE", "FOLDER"), help=argparse.SUPPRESS)
    p.add_argument("--config", default="S", choices=CONFIGS)
    p.add_argument("--layouts", default="float,packed")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--new", type=int, default=16, help="new tokens decoded per run")
    p.add_argument("--runs", type=int, default=3, help="fresh processes per figure")
    p.add_argument("--work", default="/tmp/tribuild_bench_lean", help="checkpoints kept here")
    p.add_argument("--tree", action="append", help="name=path of a checkout (default: this one)")
    p.add_argument("--quick", action="store_true", help="config tiny, one run; writes nothing")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(one_run(*args.child, args.threads, args.new)))
        return
    config = "tiny" if args.quick else args.config
    runs = 1 if args.quick else args.runs
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    module = generated(config, work)
    folders = make_folders(config, work)
    trees = dict(t.split("=", 1) for t in args.tree or [f"this={ROOT}"])
    rows = []
    for layout in args.layouts.split(","):
        for name, tree in trees.items():
            r = measure(Path(tree), module, folders[layout], args.threads, args.new, runs)
            rows.append({"config": config, "layout": layout, "tree": name, **r})
            print(json.dumps(rows[-1]), flush=True)
    figures = {
        "rows": rows,
        "lm_head_ms": {} if args.quick else lm_head_products(args.threads, 20),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {args.threads} threads, "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "runs": runs,
        "new_tokens": args.new,
    }
    text = table(figures)
    print(text)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        stem = "lean" if config == "S" else f"lean_{config}"
        (RESULTS / f"{stem}.json").write_text(json.dumps(figures, indent=2) + "\n")
        (RESULTS / f"{stem}.md").write_text(
            "# Lean decode step (`benchmarks/bench_lean.py`)\n\n"
            f"Medians of {runs} fresh processes each; {args.new} new tokens after a 16-token "
            f"prompt, batch 1. Machine: {figures['machine']} (shared: compare within a run)."
            f"\n\n{text}\n"
        )


if __name__ == "__main__":
    main()
