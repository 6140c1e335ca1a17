"""Ternary LMs on the CPU (issue 34): tribuild beside dense float32 transformers and llama.cpp's
TQ2_0, on the same shapes and the same random ternary weights, each runtime in a process of
its own; the GEMV kernel against the machine's read bandwidth; ResNet-18, ternary vs float32.

    python benchmarks/bench_cpu.py                       # S and bitnet_2b -> results/cpu.md, .json
    python benchmarks/bench_cpu.py --configs S --quick   # a smoke run, written under --out

Terms:
- *configs*: ``S``, six decoder layers of ``bitnet_2b``'s shape (Tribuild.toml) with a vocab of
  32000; ``bitnet_2b``, the target itself (2.4 B parameters); ``tiny`` (``--quick``), a shape
  every runtime takes in seconds (TQ2_0 needs rows of a multiple of 256).
- *llama Python*: a Python that imports ``llama_cpp`` and ``gguf`` (the ``bench`` extra),
  from ``--llama-python`` or ``$TRIBUILD_BENCH_PYTHON``, else this one; without one the
  llama.cpp rows say so and the rest runs (CI has none).
- *memory limit*: each worker may grow to the memory available when it starts, less 1.5 GiB,
  or to ``--max-rss-gib`` if lower (the machine is shared; ``benchmarks/cpu/protocol.py``'s
  watchdog stops it past that, and its row says so).
- *tribuild's two loads*: its weight cache (``runtime.weight_cache``) lives in the config's
  work folder, emptied before each tribuild runtime: a first worker times the first load (it
  converts the float checkpoint and fills the cache), then the full worker, a second
  process, loads from the filled cache; its row's load is that second load, and its
  ``first_load`` holds the first's figures. The cache is deleted after (``bitnet_2b``'s
  holds about 1.3 GB).
- The rest (what each figure is, how the weights are made the same):
  ``benchmarks/cpu/protocol.py``, ``torch_side.py``, ``llama_side.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from cpu import tables  # noqa: E402

RESULTS = HERE / "results"
SIDE = HERE / "cpu"
RUNTIMES = ("tribuild", "transformers", "llama.cpp")
MARGIN = int(1.5 * 2**30)

# per config: prompt, new tokens, prefill lengths, repeats (each LM measurement's protocol)
# (bitnet_2b: dense float32 prefills of 512 tokens take minutes here; 128 tokens, no warm-up)
PLANS: dict[str, dict[str, Any]] = {
    "tiny": dict(prompt=8, new=4, prefill=[16, 32], prefill_repeats=1, prefill_warmup=1),
    "S": dict(prompt=16, new=32, prefill=[128, 512], prefill_repeats=3, prefill_warmup=1),
    "bitnet_2b": dict(prompt=8, new=8, prefill=[128], prefill_repeats=1, prefill_warmup=0),
}
ROUNDS = {"tiny": 1, "S": 3, "bitnet_2b": 2}  # decode rounds


def config_args(name: str) -> dict:
    targets = tomllib.loads((ROOT / "Tribuild.toml").read_text())["targets"]
    big = dict(targets["bitnet_2b"]["args"])
    if name == "bitnet_2b":
        return big
    if name == "S":
        return {**big, "layers": 6, "vocab": 32000}
    return dict(vocab=512, dim=256, layers=2, heads=4, kv_heads=2, hidden=512)


def available_bytes() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def worker(
    python: str,
    script: str,
    command: str,
    spec: dict,
    work: Path,
    reuse: bool = False,
    tag: str | None = None,
) -> dict:
    """Run one worker; its figures, or ``{"error": ...}`` with the end of its stderr. With
    ``reuse``, the figures an earlier run of the same spec left in ``work`` (see ``--reuse``).
    Its files in ``work`` are named by ``tag`` (the command by default)."""
    tag = (tag or command).replace(".", "")
    spec_path, out = work / f"{tag}.spec.json", work / f"{tag}.out.json"
    if reuse and out.exists() and spec_path.exists():
        if _same_spec(json.loads(spec_path.read_text()), spec, command != "tribuild"):
            print(f"  {tag}: reused from {time.ctime(out.stat().st_mtime)}", flush=True)
            return _figures(out, reused=True)
        print(f"  {tag}: not reused: the earlier run's spec differs", flush=True)
    limit = max(available_bytes() - MARGIN, 2**30)
    spec = {**spec, "max_rss_bytes": min(limit, spec.get("max_rss_bytes") or limit)}
    spec_path.write_text(json.dumps(spec))
    out.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    log = work / f"{tag}.log"  # the worker's stderr: its progress, and why it failed
    start = time.perf_counter()
    with open(log, "w") as err:
        done = subprocess.run(
            [python, str(SIDE / script), command, str(spec_path), str(out)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    print(f"  {tag}: {time.perf_counter() - start:.0f} s, exit {done.returncode}", flush=True)
    if done.returncode != 0 or not out.exists():
        tail = log.read_text().strip().splitlines()[-3:]
        return {"error": f"failed (exit {done.returncode}): " + " / ".join(tail)}
    return _figures(out, reused=False)


def _same_spec(old: dict, new: dict, module_unused: bool) -> bool:
    """Whether two specs measure the same thing (the memory limit aside, and the generated
    module's path and level for a runtime that does not read it)."""
    ignored = {"max_rss_bytes"} | ({"module", "opt_level"} if module_unused else set())

    def key(spec: dict) -> dict:
        return {k: v for k, v in spec.items() if k not in ignored}

    return key(old) == key(new)


def _figures(out: Path, reused: bool) -> dict:
    figures = json.loads(out.read_text())
    figures["measured_at"] = time.strftime("%H:%M", time.localtime(out.stat().st_mtime))
    figures["reused"] = reused
    for extra in ("logits", "silu"):
        path = Path(f"{out}.{extra}.json")
        if path.exists():
            figures[extra] = json.loads(path.read_text())
    return figures


def llama_python(given: str | None) -> str | None:
    for python in (given, os.environ.get("TRIBUILD_BENCH_PYTHON"), sys.executable):
        if python and Path(python).exists():
            ok = subprocess.run([python, "-c", "import llama_cpp, gguf"], capture_output=True)
            if ok.returncode == 0:
                return python
    return None


def run_config(name: str, a: argparse.Namespace, llama: str | None) -> dict:
    work = Path(a.work) / name
    work.mkdir(parents=True, exist_ok=True)
    plan = {**PLANS[name], "decode_rounds": ROUNDS[name]}
    capacity = max(plan["prefill"] + [plan["prompt"] + plan["new"]])
    spec: dict[str, Any] = {
        **plan,
        "config": name,
        "target_args": config_args(name),
        "seed": a.seed,
        "threads": a.threads,
        "capacity": capacity,
        "module": str(work / f"module-O{a.opt_level}" / "model.py"),
        "opt_level": a.opt_level,
        "checkpoint": str(work / "checkpoint"),
        "gguf": str(work / "model-tq2_0.gguf"),
        "max_rss_bytes": int(a.max_rss_gib * 2**30) if a.max_rss_gib else None,
    }
    print(f"{name}: preparing", flush=True)
    prepared = worker(sys.executable, "torch_side.py", "prepare", spec, work)
    if "error" in prepared:
        raise SystemExit(f"{name}: preparing failed: {prepared['error']}")
    spec["args"] = json.loads((work / "prepare.out.json").read_text())
    vocab = spec["args"]["vocab"]
    spec["ids"] = [i for i in _ids(vocab, capacity, a.seed)]
    spec["probe"] = spec["ids"][:8]
    result: dict[str, Any] = {"args": spec["args"], "plan": plan, "runtimes": {}}
    extra = [r for r in a.runtimes + a.reuse if "@" in r]  # another thread count
    for runtime in list(RUNTIMES) + sorted(set(extra)):
        reuse = runtime in a.reuse
        if runtime not in a.runtimes and not reuse:
            result["runtimes"][runtime] = {"error": "not run in this run (--runtimes)"}
            continue
        base, _, threads = runtime.partition("@")
        spec["threads"] = int(threads or a.threads)
        tag = runtime.replace("@", "_threads")
        if base == "llama.cpp":
            if llama is None:
                result["runtimes"][runtime] = {
                    "error": "not run: llama_cpp and gguf are not installed"
                }
                continue
            if not Path(spec["gguf"]).exists() and not reuse:
                print(f"{name}: writing the GGUF file", flush=True)
                written = worker(llama, "llama_side.py", "write", spec, work, tag="gguf")
                if "error" in written:
                    result["runtimes"][runtime] = {"error": f"GGUF writer {written['error']}"}
                    continue
            result["gguf_bytes"] = Path(spec["gguf"]).stat().st_size
            result["runtimes"][runtime] = worker(
                llama, "llama_side.py", "run", spec, work, reuse, tag=tag
            )
        elif base == "tribuild":
            result["runtimes"][runtime] = tribuild_loads(spec, work, reuse, tag)
        else:
            result["runtimes"][runtime] = worker(
                sys.executable, "torch_side.py", base, spec, work, reuse, tag=tag
            )
    result["agreement"] = tables.agreement(result["runtimes"])
    for figures in result["runtimes"].values():
        figures.pop("logits", None)
        figures.pop("silu", None)
    return result


def tribuild_loads(spec: dict, work: Path, reuse: bool, tag: str) -> dict:
    """tribuild's figures, its load the second (see *tribuild's two loads*), the first load's
    figures as ``first_load`` (or its error)."""
    cache = work / "weight-cache"
    shutil.rmtree(cache, ignore_errors=True)
    spec = {**spec, "weight_cache": str(cache)}
    try:
        first = worker(
            sys.executable,
            "torch_side.py",
            "tribuild-first-load",
            spec,
            work,
            reuse,
            f"{tag}-first",
        )
        figures = worker(sys.executable, "torch_side.py", "tribuild", spec, work, reuse, tag=tag)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if "error" not in figures:
        figures["first_load"] = first
    return figures


def _ids(vocab: int, count: int, seed: int) -> list[int]:
    sys.path.insert(0, str(SIDE))
    import protocol

    return protocol.token_ids(vocab, count, seed)


def machine(a: argparse.Namespace, llama: str | None) -> dict:
    flags = next(
        (
            line.split(":", 1)[1].split()
            for line in open("/proc/cpuinfo")
            if line.startswith("flags")
        ),
        [],
    )
    cpu = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if "model name" in line),
        platform.processor(),
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    versions = {}
    for python, package in ((sys.executable, "torch"), (sys.executable, "transformers")) + (
        ((llama, "llama_cpp_python"), (llama, "gguf")) if llama else ()
    ):
        module = {"llama_cpp_python": "llama_cpp"}.get(package, package)
        code = (
            "import importlib\nfrom importlib import metadata\ntry:\n"
            f"    print(metadata.version({package!r}))\nexcept metadata.PackageNotFoundError:\n"
            f"    print(importlib.import_module({module!r}).__version__)"
        )
        done = subprocess.run([python, "-c", code], capture_output=True, text=True)
        versions[package] = done.stdout.strip() or None
    return {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "isa": [f for f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni") if f in flags],
        "threads": a.threads,
        "commit": commit,
        "versions": versions,
        "memory_available_gib": round(available_bytes() / 2**30, 1),
        "load_average_start": list(os.getloadavg()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", default="S,bitnet_2b", help="comma-separated: S, bitnet_2b, tiny")
    p.add_argument(
        "--runtimes",
        default=",".join(RUNTIMES),
        help="of tribuild, transformers, llama.cpp; NAME@N runs NAME on N threads beside",
    )
    p.add_argument(
        "--reuse",
        default="",
        help="runtimes (or kernels, resnet18) whose figures an earlier run of the same spec "
        "left in --work are taken as they are (marked so in the tables), e.g. "
        "transformers,llama.cpp: they do not change with tribuild's code",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--opt-level",
        default=str(tomllib.loads((ROOT / "Tribuild.toml").read_text())["project"]["opt_level"]),
        help="of tribuild's generated module (default: Tribuild.toml's)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="the tiny config, few repeats")
    p.add_argument("--out", default=str(RESULTS), help="where cpu.md and cpu.json go")
    p.add_argument("--work", default="/tmp/tribuild-bench-cpu", help="modules, weights, GGUFs")
    p.add_argument("--llama-python", help="a Python with llama_cpp and gguf (the bench extra)")
    p.add_argument("--max-rss-gib", type=float, help="a lower memory limit for the LM workers")
    p.add_argument("--skip-extras", action="store_true", help="no GEMV and ResNet-18 figures")
    a = p.parse_args(argv)
    a.runtimes = [r for r in a.runtimes.split(",") if r]
    a.reuse = [r for r in a.reuse.split(",") if r]
    configs = ["tiny"] if a.quick else [c for c in a.configs.split(",") if c]
    llama = llama_python(a.llama_python)
    report: dict[str, Any] = {"meta": machine(a, llama), "configs": {}}
    Path(a.work).mkdir(parents=True, exist_ok=True)
    for name in configs:
        report["configs"][name] = run_config(name, a, llama)
    if not a.skip_extras:
        report["kernels"], report["resnet18"] = extras(configs[0], a)
    report["meta"]["load_average_end"] = list(os.getloadavg())
    report["goals"] = tables.goals(report)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cpu.json").write_text(json.dumps(report, indent=1) + "\n")
    text = tables.markdown(report)
    (out / "cpu.md").write_text(text)
    print(text)
    return 0


def extras(config: str, a: argparse.Namespace) -> tuple[dict, dict]:
    """The GEMV and bandwidth figures (on ``config``'s generated module) and ResNet-18."""
    work = Path(a.work) / config
    targets = tomllib.loads((ROOT / "Tribuild.toml").read_text())["targets"]
    resnet = targets["resnet18"]
    spec = {
        "threads": a.threads,
        "seed": a.seed,
        "work": str(work),
        "args": json.loads((work / "prepare.out.json").read_text()),
        "kernel_rounds": 2 if a.quick else 5,
        "max_gemv_layers": 4 if a.quick else 64,
        "read_bytes": 2**26 if a.quick else 2**30,
        "resnet": [resnet["entry"], resnet["args"]],
        "resnet_input": [1, 3, 64, 64] if a.quick else resnet["input"],
        "resnet_rounds": 2 if a.quick else 15,
    }
    print("kernels and ResNet-18", flush=True)
    return (
        worker(sys.executable, "torch_side.py", "kernels", spec, work, "kernels" in a.reuse),
        worker(sys.executable, "torch_side.py", "resnet18", spec, work, "resnet18" in a.reuse),
    )


if __name__ == "__main__":
    raise SystemExit(main())
