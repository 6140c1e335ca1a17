"""Generated modules vs the hand-written references, CPU inference, same weights, same run.

For each model: the reference of tests/codegen/references (its ternary layers' effective
weights computed once beforehand, so it runs as plain PyTorch would), and the generated
module at -O0 and -O2 loaded with ``Model.from_float`` of the reference's state_dict, all
in eval mode under ``no_grad``. The three are timed round-robin, ``--repeats`` rounds of
``--iters`` calls each; the median time per call is kept, and the ratios to the reference
are reported (goals: -O0 within 2% of the reference, -O2 faster). Also the packed
state_dict's size against the float32 one. Writes ``benchmarks/results/runtime.json`` and
``runtime.md``; ``--quick`` runs one tiny model and writes nothing.
"""
from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.gpu.launch import force_backend  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
# (name, reference module, construction args, input shape)
MODELS = [
    ("mnist_mlp", "mlp", {}, (64, 1, 28, 28)),
    ("lenet5", "lenet", {}, (64, 1, 32, 32)),
    ("resnet18", "resnet", {"blocks": [2, 2, 2, 2], "num_classes": 1000}, (1, 3, 112, 112)),
    ("mobilenet_v2", "mobilenet_v2", {"num_classes": 1000}, (1, 3, 112, 112)),
    ("vit_tiny", "vit", {"patch": 4, "dim": 192, "depth": 12, "heads": 3, "num_classes": 10}, (1, 3, 32, 32)),
    ("bitnet_block", "bitnet", {}, (1, 16, 64)),
]
QUICK = [("mnist_mlp", "mlp", {"hidden1": 32, "hidden2": 16}, (2, 1, 28, 28))]
LEVELS = ("0", "2")


def frozen_reference(stem: str, args: dict):
    """The reference with every ternary effective weight computed once."""
    ref = importlib.import_module(f"tests.codegen.references.{stem}").make(**args).eval()
    with torch.no_grad():
        for m in ref.modules():
            for name in ("effective_weight", "effective_in_proj"):
                if hasattr(m, name):
                    w = getattr(m, name)().detach()
                    setattr(m, name, lambda w=w: w)
    return ref


def size_bytes(state: dict) -> int:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.tell()


def time_round_robin(fns: dict, x: torch.Tensor, repeats: int, iters: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in fns}
    with torch.no_grad():
        for fn in fns.values():   # warm-up: caches, allocator, one-time unpacking
            fn(x)
            fn(x)
        for _ in range(repeats):
            for name, fn in fns.items():
                start = time.perf_counter()
                for _ in range(iters):
                    fn(x)
                samples[name].append((time.perf_counter() - start) / iters * 1e3)
    return {k: statistics.median(v) for k, v in samples.items()}


def run_model(name: str, stem: str, args: dict, shape: tuple, repeats: int, iters: int, folder: Path) -> dict:
    torch.manual_seed(0)
    ref = frozen_reference(stem, args)
    entry = importlib.import_module(f"tests.codegen.references.{stem}").ENTRY
    fns = {"reference": ref}
    packed_state = None
    for level in LEVELS:
        gen = write_and_import(build(entry, args, level), folder / name / f"O{level}")
        model = gen.Model.from_float(ref.state_dict()).eval()
        packed_state = model.state_dict()
        fns[f"O{level}"] = model
    x = torch.randn(shape)
    with force_backend("torch"), torch.no_grad():
        times = time_round_robin(fns, x, repeats, iters)
        err = max(float((fns[f"O{lv}"](x) - ref(x)).abs().max() / ref(x).abs().max()) for lv in LEVELS)
    float_bytes, packed_bytes = size_bytes(ref.state_dict()), size_bytes(packed_state)
    return {"model": name, "args": args, "input": list(shape), "ms": times,
            "ratio": {k: times[k] / times["reference"] for k in times if k != "reference"},
            "max_rel_error": err, "float32_bytes": float_bytes, "packed_bytes": packed_bytes,
            "size_ratio": float_bytes / packed_bytes}


def markdown(rows: list[dict], meta: dict) -> str:
    out = ["# Generated modules vs hand-written PyTorch (CPU inference)", "",
           f"Machine: {meta['machine']}, torch {meta['torch']}, {meta['threads']} threads, load average "
           f"{meta['load']}. Median of {meta['repeats']} round-robin rounds of {meta['iters']} calls. "
           "Ratio = generated / reference time (< 1 is faster).", "",
           "| model | input | reference ms | -O0 ms | -O0 ratio | -O2 ms | -O2 ratio | float32 MB | packed MB | smaller |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t = r["ms"]
        out.append(f"| {r['model']} | {r['input']} | {t['reference']:.3f} | {t['O0']:.3f} | {r['ratio']['O0']:.3f} | "
                   f"{t['O2']:.3f} | {r['ratio']['O2']:.3f} | {r['float32_bytes'] / 1e6:.2f} | "
                   f"{r['packed_bytes'] / 1e6:.2f} | {r['size_ratio']:.1f}x |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--iters", type=int, default=10)
    a = p.parse_args(argv)
    repeats, iters = (1, 1) if a.quick else (a.repeats, a.iters)
    meta = {"machine": platform.processor() or platform.machine(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "load": [round(x, 2) for x in os.getloadavg()],
            "repeats": repeats, "iters": iters}
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_model(*m, repeats, iters, Path(tmp)) for m in (QUICK if a.quick else MODELS)]
    text = markdown(rows, meta)
    print(text)
    if not a.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "runtime.json").write_text(json.dumps({"meta": meta, "models": rows}, indent=1) + "\n")
        (RESULTS / "runtime.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
