"""Generated models against the same models in dense float16 PyTorch on a CUDA GPU, end to end
and per kernel, in one run (issue 23: the tables and goals of "faster than float16").

Terms:
- *ternary side*: the zoo layer built by ``tribuild.compile_model`` (-O2 for ResNet-18, -O3 for
  the BitNet block), loaded with ``Model.from_float`` of the reference's random float weights,
  ``.half()``, eval mode, as a user runs it.
- *fp16 side*: the hand-written reference of tests/codegen/references with the same float
  weights and every ternary layer made dense: a plain ``nn.Linear``/``nn.Conv2d`` holding the
  effective (ternarized) weight, in float16. A BitLinear becomes its dense projection alone,
  without the 8-bit activation quantization: what a float16 model computes, and the faster
  baseline. The ternary side is checked against the reference with the quantization kept
  (``rel_error``, float16 noise expected).
- *columns* of one end-to-end row: ``eager`` (plain calls), ``graph`` (the call captured once in
  a ``torch.cuda.CUDAGraph`` and replayed), ``reduce-overhead`` (``torch.compile(model,
  mode="reduce-overhead", dynamic=False)``: Inductor with CUDA graphs) and, for the ternary side,
  ``default`` (``torch.compile`` in its default mode). A failure is recorded as its text.
- *call time*: the GPU is synchronized before each call, and CUDA events around the call give
  its time (the launch cost included: an idle GPU waits for it); a figure is the median of
  ``--calls`` calls. The eager calls of both sides take turns, then their graph replays do.
- *kernel rows*: one ternary linear layer ``[M, K] x [N, K]ᵀ`` with float16 activations
  (``tribuild.runtime.launch.ternary_linear`` at -O3), or with int8 activations (the generated
  ``BitLinear`` of models/blocks/bitnet_blocks.tri at -O3: per-token int8 quantization, then
  the ternary product), against ``x @ Wᵀ`` (cuBLAS, dense float16 ``W``) and, when ``import
  gemlite`` works, gemlite's ``A16W158_INT`` or ``A8W158_INT_dynamic`` layer of the same codes
  (a bench-only peer). Timed by ``tribuild.runtime.autotune.gpu_ms`` (a CUDA-graph replay after an
  L2 flush: the kernels alone), medians of ``KERNEL_ROUNDS`` rounds (tribuild and cuBLAS
  interleaved, gemlite after them, so that a peer that fails loses only its own figures); GB/s
  is the bytes a kernel must move (``bench_kernels.moved_bytes``) over its time.
- *budget*: every case runs in a worker process (``--worker``), so that a crash or a CUDA
  error left by a failed capture loses that case alone; after a failed case the worker stops
  and a fresh one takes the rest. A case whose estimated time would end past ``--budget-s``
  is skipped and recorded as such; a worker still running at the budget's end (plus a grace)
  is killed. Results are written after every case, so a run cut short keeps what it measured.

Writes ``e2e_gpu.json`` and ``e2e_gpu.md`` (device, versions, date, the tables, the goals of
issue 23 as met / not met / not measured) into ``--out`` (default benchmarks/results).
``--quick`` runs every case on tiny shapes on the CPU (kernels under ``TRITON_INTERPRET=1``,
models on the torch backend, ``torch.compile`` with the ``eager`` backend, no CUDA graphs, no
gemlite): a check of the script, whose times mean nothing; it writes only with ``--out``.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import importlib
import json
import os
import platform
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import bench_kernels  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
MARK = "E2E-CASE-RESULT "  # a worker's result line on stdout
REPLAYS = 100  # graph replays per kernel timing
KERNEL_ROUNDS = 3
GRACE_S = 30  # how long past the budget a worker may run before it is killed
ERROR_CHARS = 400
CELL_CHARS = 90  # of an error in a table cell
# a graph replay against an eager call of the same module: equal but for the order of atomic
# additions (split-K); a capture that went wrong gives garbage
GRAPH_TOLERANCE = 1e-2


@dataclass(frozen=True)
class ModelSpec:
    entry: str  # "models/<file>.tri:<Layer>"
    reference: str  # tests/codegen/references/<reference>.py
    args: dict
    level: int


@dataclass(frozen=True)
class Case:
    id: str
    group: str  # the worker that runs it: "kernels" or a model name
    kind: str  # "kernel", "side_by_side" or "compile"
    spec: dict = field(default_factory=dict)
    estimate_s: float = 5.0


def zoo_args(target: str) -> dict:
    from tribuild.config.load import load_config

    config = load_config(ROOT / "Tribuild.toml")
    return dict(next(t for t in config.targets if t.name == target).args)


def models(quick: bool) -> dict[str, ModelSpec]:
    resnet = (
        {"blocks": (1, 1, 1, 1), "bottleneck": False, "num_classes": 10}
        if quick
        else zoo_args("resnet18")
    )
    bitnet = (
        {"dim": 32, "heads": 2, "hidden": 48}
        if quick
        else {"dim": 2560, "heads": 20, "hidden": 6912}
    )
    return {
        "resnet18": ModelSpec("models/resnet.tri:ResNet", "resnet", resnet, 2),
        "bitnet_block": ModelSpec("models/bitnet.tri:BitNetBlock", "bitnet", bitnet, 3),
    }


def e2e_rows(quick: bool) -> list[tuple[str, str, tuple[int, ...]]]:
    """``(model, label, input shape)`` of the end-to-end table, in the issue's order."""
    if quick:
        image, dim, batch, short, seqs, long, long_seqs = 32, 32, 2, 4, 2, 8, 2
    else:
        image, dim, batch, short, seqs, long, long_seqs = 224, 2560, 32, 16, 8, 512, 4
    return [
        ("resnet18", "batch 1", (1, 3, image, image)),
        ("resnet18", f"batch {batch}", (batch, 3, image, image)),
        ("bitnet_block", "1 token", (1, 1, dim)),
        ("bitnet_block", f"{short} tokens", (1, short, dim)),
        ("bitnet_block", f"{seqs} sequences x 1 token", (seqs, 1, dim)),
        ("bitnet_block", f"{long} tokens", (1, long, dim)),
        ("bitnet_block", f"{long_seqs} x {long} tokens", (long_seqs, long, dim)),
    ]


def kernel_rows(quick: bool) -> list[tuple[str, int, str, int, int]]:
    """``(label, M, activations, N, K)`` of the kernel table."""
    sizes = ((24, 40),) if quick else bench_kernels.SIZES
    kinds = (
        (
            ("batch 1", 1, "fp16"),
            ("6 rows", 6, "fp16"),
            ("12 rows", 12, "int8"),
            ("12 rows", 12, "fp16"),
        )
        if quick
        else (
            ("batch 1", 1, "fp16"),
            ("16 rows", 16, "fp16"),
            ("2048 rows", 2048, "int8"),
            ("2048 rows", 2048, "fp16"),
        )
    )
    return [(label, m, acts, n, k) for label, m, acts in kinds for n, k in sizes]


COMPILES = (("fp16", "reduce-overhead"), ("ternary", "reduce-overhead"), ("ternary", "default"))


def row_id(model: str, shape: tuple[int, ...]) -> str:
    return f"{model}/{'x'.join(map(str, shape))}"


def cases(quick: bool) -> list[Case]:
    """Every case, in the order they run: the most important first, so that a short budget
    drops the least important (the compiled columns of the rows no goal names)."""
    out = [
        Case(
            f"kernel/{label.replace(' ', '_')}/{acts}/{n}x{k}",
            "kernels",
            "kernel",
            {"label": label, "m": m, "acts": acts, "n": n, "k": k},
            6.0 if m < 2048 else 8.0,
        )
        for label, m, acts, n, k in kernel_rows(quick)
    ]
    rows = e2e_rows(quick)
    for model, label, shape in rows:
        out.append(
            Case(
                f"e2e/{row_id(model, shape)}/eager+graph",
                model,
                "side_by_side",
                {"model": model, "label": label, "shape": list(shape)},
                20.0 if model == "bitnet_block" else 12.0,
            )
        )
    bitnet = [r for r in rows if r[0] == "bitnet_block"]
    one, prefill = bitnet[0], bitnet[3:5]
    # what the goals need first: one token's three; the float16 baseline of the prefills (the
    # ternary side has its graph); the rest in table order
    first = [(one, sm) for sm in COMPILES] + [(r, COMPILES[0]) for r in prefill]
    first += [(r, COMPILES[1]) for r in prefill]
    order = first + [(r, sm) for r in rows for sm in COMPILES if (r, sm) not in first]
    for (model, label, shape), (side, mode) in order:
        out.append(
            Case(
                f"e2e/{row_id(model, shape)}/{side}/{mode}",
                model,
                "compile",
                {"model": model, "label": label, "shape": list(shape), "side": side, "mode": mode},
                30.0,
            )
        )
    return out


# --- the worker: measuring ---------------------------------------------------------------------


def short_error(exc: BaseException) -> str:
    """The exception's type and message; of a long message (a traceback inside it), the last
    lines, where the cause is."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {' | '.join(lines[-3:])}"[:ERROR_CHARS]


def rel_error(out: Any, ref: Any) -> float:
    out, ref = out.float(), ref.float()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-12)).item()


class Clock:
    """Call times on the worker's device (see the module doc)."""

    def __init__(self, device: str):
        import torch

        self.torch = torch
        self.cuda = device == "cuda"

    def once_ms(self, fn: Callable[[], object]) -> float:
        torch = self.torch
        if self.cuda:
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        begin = time.perf_counter()
        fn()
        return (time.perf_counter() - begin) * 1e3

    def interleaved(self, fns: dict[str, Callable[[], object]], calls: int) -> dict[str, dict]:
        """Median and spread of ``calls`` timed calls of each function, the functions taking
        turns call by call (the order rotating), after three untimed calls each."""
        for fn in fns.values():
            for _ in range(3):
                fn()
        names = list(fns)
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(calls):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                times[name].append(self.once_ms(fns[name]))
        return {
            name: {"ms": statistics.median(t), "min_ms": min(t), "max_ms": max(t), "calls": calls}
            for name, t in times.items()
        }

    def kernel_ms(self, fn: Callable[[], object]) -> float:
        """The kernels' GPU time of one call (``gpu_ms``); on the CPU a wall-clock median."""
        if self.cuda:
            from tribuild.runtime.autotune import gpu_ms

            return gpu_ms(fn, self.torch.device("cuda"), REPLAYS)
        fn()
        return statistics.median(self.once_ms(fn) for _ in range(2))


def densified(model: Any, quantize_activations: bool) -> Any:
    """A copy of reference ``model`` whose ternary layers are plain dense layers holding their
    effective weights; BitLinear keeps its activation quantization only if asked."""
    import torch
    from torch import nn

    from tests.codegen.references import common
    from tests.codegen.references.blocks.bitnet_blocks import BitLinear

    def dense(module: nn.Module) -> nn.Module:
        if isinstance(module, common.TernaryLinear):
            layer = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
        elif isinstance(module, common.TernaryConv2d):
            layer = nn.Conv2d(
                module.in_channels,
                module.out_channels,
                module.kernel_size,
                stride=module.stride,
                padding=module.padding,
                groups=module.groups,
                bias=module.bias is not None,
            )
        else:
            return module
        with torch.no_grad():
            layer.weight.copy_(module.effective_weight())
            if module.bias is not None:
                layer.bias.copy_(module.bias)
        return layer.to(module.weight.device)

    def walk(module: nn.Module) -> nn.Module:
        if isinstance(module, BitLinear) and not quantize_activations:
            return dense(module.proj)
        if isinstance(module, common.MultiHeadAttention):
            raise NotImplementedError("no model of this benchmark has a MultiHeadAttention")
        replaced = dense(module)
        if replaced is not module:
            return replaced
        for name, child in list(module.named_children()):
            setattr(module, name, walk(child))
        return module

    return walk(copy.deepcopy(model)).eval()


class Models:
    """One model group's three modules on the worker's device, built once per worker."""

    def __init__(self, spec: ModelSpec, device: str):
        import torch

        import tribuild

        torch.manual_seed(0)
        reference = importlib.import_module(f"tests.codegen.references.{spec.reference}")
        path, layer = spec.entry.split(":")
        model_class = tribuild.compile_model(
            str(ROOT / path), layer, opt_level=spec.level, **spec.args
        )
        with torch.device(device), torch.no_grad():
            ref = reference.make(**spec.args).eval()
            self.ternary = model_class.from_float(ref.state_dict()).eval().half()
            self.fp16 = densified(ref, quantize_activations=False).half()
            self.checked = densified(ref, quantize_activations=True).half()
        del ref


class Worker:
    def __init__(self, quick: bool, calls: int):
        import torch

        self.torch = torch
        self.quick = quick
        self.device = "cuda" if torch.cuda.is_available() and not quick else "cpu"
        self.clock = Clock(self.device)
        self.calls = calls
        self.specs = models(quick)
        self.built: dict[str, Models] = {}
        if self.device == "cuda":
            torch.backends.cudnn.benchmark = (
                True  # cuDNN's fastest algorithms: the fp16 side's best
            )
        else:
            torch.set_num_threads(1)

    def models(self, name: str) -> Models:
        if name not in self.built:
            self.built[name] = Models(self.specs[name], self.device)
        return self.built[name]

    def run(self, case: Case) -> dict:
        with self.torch.no_grad():
            if case.kind == "kernel":
                return self.kernel(**case.spec)
            if case.kind == "side_by_side":
                return self.side_by_side(case.spec["model"], tuple(case.spec["shape"]))
            return self.compiled(**case.spec)

    # end to end

    def graphed(self, model: Any, x: Any) -> tuple[Callable[[], object], Any]:
        """``model(x)`` captured in a CUDA graph: its replay and its output tensor."""
        torch = self.torch
        static = x.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model(static)
        return graph.replay, out

    def side_by_side(self, model: str, shape: tuple[int, ...]) -> dict:
        """The eager calls of both sides interleaved, then their CUDA graphs interleaved. A
        failed capture is its column's figure; as it may leave the CUDA context unusable, the
        result then asks for a fresh worker (``restart``)."""
        torch = self.torch
        m = self.models(model)
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(shape, generator=gen).half().to(self.device)
        expected = m.checked(x)
        result: dict[str, Any] = {
            "rel_error": rel_error(m.ternary(x), expected),
            "fp16_rel_error": rel_error(m.fp16(x), expected),
        }
        eager = {"ternary eager": lambda: m.ternary(x), "fp16 eager": lambda: m.fp16(x)}
        result.update(self.clock.interleaved(eager, self.calls))
        if self.device != "cuda":
            for side in ("ternary", "fp16"):
                result[f"{side} graph"] = {"not run": "no CUDA (--quick runs on the CPU)"}
            return result
        replays: dict[str, Callable[[], object]] = {}
        for side, module in (("ternary", m.ternary), ("fp16", m.fp16)):
            try:
                replay, out = self.graphed(module, x)
                replay()
                torch.cuda.synchronize()
                err = rel_error(out, module(x))
                result[f"{side} graph rel_error"] = err
                if err > GRAPH_TOLERANCE:
                    raise ValueError(
                        f"the replay disagrees with eager calls (rel. error {err:.1e})"
                    )
                replays[f"{side} graph"] = replay
            except Exception as exc:  # recorded as the column's figure
                traceback.print_exc()
                result[f"{side} graph"] = {"error": short_error(exc)}
                result["restart"] = True
        try:
            result.update(self.clock.interleaved(replays, self.calls))
        except Exception as exc:
            traceback.print_exc()
            for name in replays:
                result[name] = {"error": short_error(exc)}
            result["restart"] = True
        return result

    def compiled(self, model: str, label: str, shape: list[int], side: str, mode: str) -> dict:
        import torch._dynamo

        torch = self.torch
        m = self.models(model)
        module = m.ternary if side == "ternary" else m.fp16
        gen = torch.Generator().manual_seed(1)
        x = torch.randn(tuple(shape), generator=gen).half().to(self.device)
        expected = module(x)
        torch._dynamo.reset()
        counters = torch._dynamo.utils.counters
        counters.clear()
        if self.device == "cuda":
            kwargs: dict[str, Any] = {} if mode == "default" else {"mode": mode}
            backend = "inductor"
        else:
            kwargs, backend = {"backend": "eager"}, "eager (--quick: traced, not compiled)"
        begin = time.perf_counter()
        fn = torch.compile(module, dynamic=False, **kwargs)
        for _ in range(3):  # compiles, then (reduce-overhead) records and captures its graphs
            out = fn(x)
        if self.device == "cuda":
            torch.cuda.synchronize()
        compile_s = time.perf_counter() - begin
        err = rel_error(out, expected)
        timing = self.clock.interleaved({"compiled": lambda: fn(x)}, self.calls)["compiled"]
        figures = {
            "graph_breaks": sum(counters["graph_break"].values()),
            "graphs": counters["stats"]["unique_graphs"],
            "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
        }
        torch._dynamo.reset()
        return {**timing, "backend": backend, "compile_s": compile_s, "rel_error": err, **figures}

    # kernels

    def kernel(self, label: str, m: int, acts: str, n: int, k: int) -> dict:
        torch = self.torch
        from tests.codegen.references.common import quantize_activations
        from tribuild.runtime.launch import ternary_linear
        from tribuild.runtime.packing import pack
        from tribuild.runtime.ternarize import ternarize

        gen = torch.Generator().manual_seed(0)
        w = torch.randn(n, k, generator=gen)
        codes, g = ternarize(w, "tensor")
        x = torch.randn(m, k, generator=gen).half().to(self.device)
        dense = (codes.float() * g).half().to(self.device)
        if acts == "fp16":
            packed, scale = pack(codes).to(self.device), g.to(self.device)

            def ternary() -> object:
                return ternary_linear(x, packed, scale, tuned=True)

            ref_in = x.float()
        else:
            import tribuild

            bitlinear = tribuild.compile_model(
                str(ROOT / "models/blocks/bitnet_blocks.tri"), "BitLinear", 3, din=k, dout=n
            )
            with torch.device(self.device):
                layer = bitlinear.from_float({"proj.weight": w.to(self.device)}).eval().half()
            x3 = x.reshape(1, m, k)

            def ternary() -> object:
                return layer(x3).reshape(m, n)

            ref_in = quantize_activations(x.float())

        def fp16() -> object:
            return x @ dense.T

        expected = ref_in @ dense.float().T
        result: dict[str, Any] = {"rel_error": rel_error(ternary(), expected)}
        fns: dict[str, Callable[[], object]] = {"ternary": ternary, "fp16": fp16}
        peer = self.gemlite(codes, g, acts)
        if isinstance(peer, dict):
            result["gemlite"] = peer
        else:
            try:
                result["gemlite_rel_error"] = rel_error(peer(x), expected)
                fns["gemlite"] = lambda: peer(x)
            except Exception as exc:
                result["gemlite"] = {"error": short_error(exc)}
        rounds: dict[str, list[float]] = {"ternary": [], "fp16": []}
        n_rounds = KERNEL_ROUNDS if self.device == "cuda" else 1
        for _ in range(n_rounds):
            for name, times in rounds.items():
                times.append(self.clock.kernel_ms(fns[name]))
        if "gemlite" in fns:  # after ours: a peer that breaks the CUDA context loses itself alone
            try:
                rounds["gemlite"] = [self.clock.kernel_ms(fns["gemlite"]) for _ in range(n_rounds)]
            except Exception as exc:
                traceback.print_exc()
                result["gemlite"] = {"error": short_error(exc)}
                result["restart"] = True
        for name, times in rounds.items():
            result[name] = {"ms": statistics.median(times), "rounds": len(times)}
            if name != "fp16":
                ratios = [f / t for f, t in zip(rounds["fp16"], times, strict=True)]
                result[name]["speedup_vs_fp16"] = statistics.median(ratios)
            is_ternary = name != "fp16"
            result[name]["gbps"] = (
                bench_kernels.moved_bytes(m, n, k, is_ternary) / result[name]["ms"] / 1e6
            )
        return result

    def gemlite(self, codes: Any, g: Any, acts: str) -> Any:
        """gemlite's layer of these codes, or why there is none (a dict)."""
        if self.device != "cuda":
            return {"not run": "no CUDA (--quick)"}
        try:
            import gemlite
            from gemlite.helper import A16W158_INT, A8W158_INT_dynamic
        except ImportError as exc:
            return {"not run": f"gemlite is not importable ({short_error(exc)})"}
        processor = A8W158_INT_dynamic if acts == "int8" else A16W158_INT
        try:
            layer = processor(device="cuda:0", dtype=self.torch.float16).from_weights(
                weight=codes.half(), weight_scale=g.reshape(())
            )
        except Exception as exc:
            return {"error": f"gemlite {getattr(gemlite, '__version__', '?')}: {short_error(exc)}"}
        return layer


def skipped(case: Case, deadline: float) -> dict | None:
    """The result of ``case`` if it does not fit in the time left, else None."""
    left = deadline - time.time()
    if case.estimate_s <= left:
        return None
    return {
        "status": "skipped",
        "why": f"the time budget ({max(left, 0):.0f} s left, the case needs "
        f"~{case.estimate_s:.0f} s)",
    }


def worker_main(args: argparse.Namespace) -> int:
    """Run the cases of ``--cases-file`` in order, printing one result line each; stop after
    the first failed case (the parent starts a fresh worker for the rest)."""
    todo = [Case(**c) for c in json.loads(Path(args.cases_file).read_text())]
    worker = Worker(args.quick, args.calls)
    for case in todo:
        result = skipped(case, args.deadline)
        if result is None:
            begin = time.perf_counter()
            try:
                result = {"status": "ok", **worker.run(case)}
            except Exception as exc:
                traceback.print_exc()
                result = {"status": "error", "error": short_error(exc)}
            result["wall_s"] = round(time.perf_counter() - begin, 2)
        restart = result.pop("restart", False)
        print(MARK + json.dumps({"id": case.id, **result}), flush=True)
        if result["status"] == "error" or restart:
            return 3
    return 0


# --- the parent: scheduling, tables, goals ------------------------------------------------------


def run_workers(
    todo: list[Case],
    args: argparse.Namespace,
    deadline: float,
    found: dict,
    save: Callable[[], object],
) -> None:
    """Run ``todo`` in worker processes until each has a result in ``found`` (``save`` after
    each)."""
    while todo:
        result = skipped(todo[0], deadline)
        if result is not None:  # no worker started for it
            found[todo[0].id] = result
            todo = todo[1:]
            save()
            continue
        env = dict(os.environ)
        if args.quick and todo[0].group == "kernels":
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump([asdict(c) for c in todo], f)
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "--cases-file",
            f.name,
        ]
        command += ["--deadline", repr(deadline), "--calls", str(args.calls)]
        command += ["--quick"] if args.quick else []
        # its own session, so that a kill takes its children too (Inductor's compile workers,
        # which would otherwise keep the pipe open)
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        tail: list[str] = []
        for line in worker_lines(proc, deadline + GRACE_S):
            if line.startswith(MARK):
                result = json.loads(line[len(MARK) :])
                case_id = result.pop("id")
                assert case_id == todo[0].id, (case_id, todo[0].id)
                found[case_id] = result
                print(f"  {case_id}: {summary_line(result)}", flush=True)
                todo = todo[1:]
                save()
            else:
                tail = (tail + [line.rstrip()])[-12:]
                print("  | " + line.rstrip(), flush=True)
        code = proc.wait()
        os.unlink(f.name)
        if todo and code != 3:  # died or was killed during todo[0]
            why = (
                "killed: past the time budget"
                if time.time() > deadline + GRACE_S - 1
                else " | ".join([f"the worker process died (exit code {code})", *tail[-3:]])
            )
            found[todo[0].id] = {"status": "error", "error": why[:ERROR_CHARS]}
            print(f"  {todo[0].id}: error: {why}", flush=True)
            todo = todo[1:]
            save()


def worker_lines(proc: subprocess.Popen, kill_at: float) -> Iterator[str]:
    """The lines ``proc`` prints, until it has exited and printed all (or was killed, with
    its process group, at the time ``kill_at``)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    quiet_since: float | None = None
    while True:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if time.time() > kill_at and proc.poll() is None:
                kill_group(proc)
            if proc.poll() is None:
                continue
            # exited: what it printed is in the pipe; a child of its own may hold the pipe
            quiet_since = quiet_since or time.time()
            if time.time() - quiet_since > 2:
                break
            continue
        if line is None:
            break
        quiet_since = None
        yield line
    kill_group(proc)  # whatever of its children is left


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def summary_line(result: dict) -> str:
    if result["status"] != "ok":
        return f"{result['status']}: {result.get('error') or result.get('why')}"
    parts = [
        f"{name} {v['ms']:.4f} ms"
        for name, v in result.items()
        if isinstance(v, dict) and "ms" in v
    ]
    return (", ".join(parts) or "ok") + f" ({result.get('wall_s', 0):.0f} s)"


def cell_ms(result: dict | None, column: str) -> float | None:
    if not result or result.get("status") != "ok":
        return None
    value = result.get(column)
    return value["ms"] if isinstance(value, dict) and "ms" in value else None


def cell_text(result: dict | None, column: str | None = None) -> str:
    """A table cell: the median in ms, or why there is none (shortened; the JSON has it all)."""
    if result is None:
        return "not run"
    value = result if column is None else result.get(column)
    if result.get("status") != "ok":
        why = f"{result['status']}: {result.get('error') or result.get('why')}"
    elif isinstance(value, dict) and "ms" in value:
        return f"{value['ms']:.4g}"
    elif isinstance(value, dict) and ("error" in value or "not run" in value):
        why = f"error: {value['error']}" if "error" in value else f"not run: {value['not run']}"
    else:
        why = "?"
    why = why if len(why) <= CELL_CHARS else why[: CELL_CHARS - 3] + "..."
    return why.replace("|", "\\|")


def best(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def row_figures(report: dict, model: str, shape: tuple[int, ...]) -> dict[str, float | None]:
    """The ms of every column of one end-to-end row (None where not measured)."""
    found = report["cases"]
    rid = row_id(model, shape)
    sbs = found.get(f"e2e/{rid}/eager+graph")
    out = {
        col: cell_ms(sbs, col)
        for col in ("ternary eager", "fp16 eager", "ternary graph", "fp16 graph")
    }
    for side, mode in COMPILES:
        out[f"{side} {mode}"] = compiled_ms(found.get(f"e2e/{rid}/{side}/{mode}"))
    return out


def compiled_ms(result: dict | None) -> float | None:
    if not result or result.get("status") != "ok":
        return None
    return result["ms"]


def goal(text: str, measured: str, met: bool | None) -> dict:
    status = "not measured" if met is None else ("met" if met else "not met")
    return {"goal": text, "measured": measured, "status": status}


def ratio_text(num: float | None, den: float | None) -> tuple[float | None, str]:
    if num is None or den is None:
        return None, "n/a"
    return num / den, f"{num / den:.2f}x"


def goals(report: dict, quick: bool) -> list[dict]:
    """Issue 23's goals, judged from this run's figures."""
    out = []
    found = report["cases"]
    peak = report["meta"].get("peak_gbps")
    kernel = {
        (c["label"], c["acts"], c["n"], c["k"]): found.get(c["id"]) for c in report["kernel_cases"]
    }

    def kernel_goal(
        text: str, label: str, acts: str, least: float, peak_share: float | None = None
    ):
        parts, verdicts = [], []
        for (lab, a, n, k), r in kernel.items():
            if lab != label or a != acts:
                continue
            t = r.get("ternary") if r and r.get("status") == "ok" else None
            if not isinstance(t, dict) or "ms" not in t:
                parts.append(f"{n}x{k}: n/a")
                verdicts.append(None)
                continue
            speed = t["speedup_vs_fp16"]
            ok = speed >= least
            part = f"{n}x{k}: {speed:.2f}x"
            if peak_share is not None:
                share = t["gbps"] / peak if peak else None
                part += f", {share:.0%} of peak" if share is not None else ", peak unknown"
                ok = ok and share is not None and share >= peak_share
            parts.append(part)
            verdicts.append(ok)
        met = None if not verdicts or None in verdicts else all(verdicts)
        out.append(goal(text, "; ".join(parts), met))

    rows = kernel_rows(quick)
    labels = list(dict.fromkeys((label, acts) for label, _, acts, _, _ in rows))
    kernel_goal("GEMV at batch 1: >= 4x float16 and >= 50% of HBM peak", *labels[0], 4.0, 0.5)
    kernel_goal(f"{labels[1][0]}: >= 2.5x float16", *labels[1], 2.5)
    kernel_goal(f"{labels[2][0]} with int8 activations: >= 1.3x float16 cuBLAS", *labels[2], 1.3)
    kernel_goal(f"{labels[3][0]} with float16 activations: >= 0.9x float16", *labels[3], 0.9)

    e2e = e2e_rows(quick)
    bitnet = [(label, shape) for model, label, shape in e2e if model == "bitnet_block"]
    resnet = [(label, shape) for model, label, shape in e2e if model == "resnet18"]

    def captured(model: str, shape: tuple[int, ...]) -> tuple[float | None, float | None]:
        f = row_figures(report, model, shape)
        return (
            best(f["ternary graph"], f["ternary reduce-overhead"]),
            best(f["fp16 graph"], f["fp16 reduce-overhead"]),
        )

    t, d = captured("bitnet_block", bitnet[0][1])
    r, text = ratio_text(d, t)
    out.append(
        goal(
            "BitNet block, one token: >= 4x the faster of float16 with a CUDA graph and under "
            "reduce-overhead, the ternary side captured too",
            text,
            None if r is None else r >= 4.0,
        )
    )
    parts, verdicts = [], []
    for label, shape in bitnet:
        f = row_figures(report, "bitnet_block", shape)
        eager = best(f["ternary eager"], f["ternary default"])
        r, text = ratio_text(eager, f["ternary graph"])
        parts.append(f"{label}: {text}")
        verdicts.append(None if r is None else r <= 2.0)
    out.append(
        goal(
            "BitNet block: eager (or torch.compile default) within 2x of its graph time, every row",
            "; ".join(parts),
            None if None in verdicts else all(verdicts),
        )
    )
    parts, verdicts = [], []
    for label, shape in bitnet[3:]:
        t, d = captured("bitnet_block", shape)
        r, text = ratio_text(d, t)
        parts.append(f"{label}: {text}")
        verdicts.append(None if r is None else r >= 1.2)
    out.append(
        goal(
            f"BitNet block, {bitnet[3][0]} and {bitnet[4][0]}: >= 1.2x (captured, as one token)",
            "; ".join(parts),
            None if None in verdicts else all(verdicts),
        )
    )
    for label, shape in resnet[::-1]:
        f = row_figures(report, "resnet18", shape)
        t = best(f["ternary graph"], f["ternary reduce-overhead"])
        r, text = ratio_text(f["fp16 graph"], t)
        out.append(
            goal(
                f"ResNet-18, {label}: >= 1.0x float16 with graphs",
                text,
                None if r is None else r >= 1.0,
            )
        )
    return out


def markdown(report: dict, quick: bool) -> str:
    meta = report["meta"]
    found = report["cases"]
    lines = [
        "# Generated models vs dense float16 on the GPU (`benchmarks/bench_e2e_gpu.py`)",
        "",
        f"{meta['device']}; torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}; "
        f"{meta['date']}; medians of {meta['calls']} calls (ms), each timed alone "
        + ("by CUDA events after a synchronization" if not quick else "by the wall clock")
        + f"; {meta['wall_s']:.0f} s of a {meta['budget_s']:.0f} s budget.",
        "",
    ]
    if quick:
        lines += ["**--quick: tiny shapes on the CPU; the times mean nothing.**", ""]
    if meta.get("skipped"):
        lines += [
            f"**Not measured: {len(meta['skipped'])} cases** (skipped for the time budget, or "
            "failed: see their cells): " + ", ".join(f"`{c}`" for c in meta["skipped"]),
            "",
        ]
    lines += ["## Goals", "", "| goal | measured | status |", "|---|---|---|"]
    lines += [f"| {g['goal']} | {g['measured']} | **{g['status']}** |" for g in report["goals"]]
    lines += [
        "",
        "## End to end",
        "",
        "Ternary: the generated module (-O2 ResNet-18, -O3 BitNet block) in float16; fp16: the "
        "same model with its ternary layers dense (BitLinear without activation quantization). "
        "Speedup = fp16 / ternary; *captured* takes the faster of the graph and "
        "reduce-overhead on each side. rel. error: the ternary eager output against the "
        "reference with activation quantization, in float16.",
        "",
        "| model, input | ternary eager | fp16 eager | ternary graph | fp16 graph | ternary "
        "reduce-overhead | fp16 reduce-overhead | ternary compile default | graph speedup | "
        "captured speedup | rel. error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, label, shape in e2e_rows(quick):
        rid = row_id(model, shape)
        sbs = found.get(f"e2e/{rid}/eager+graph")
        f = row_figures(report, model, shape)
        cells = [f"{model}, {label} {list(shape)}"]
        cells += [
            cell_text(sbs, c)
            for c in ("ternary eager", "fp16 eager", "ternary graph", "fp16 graph")
        ]
        cells += [
            cell_text(found.get(f"e2e/{rid}/{side}/{mode}"))
            for side, mode in (
                ("ternary", "reduce-overhead"),
                ("fp16", "reduce-overhead"),
                ("ternary", "default"),
            )
        ]
        cells.append(ratio_text(f["fp16 graph"], f["ternary graph"])[1])
        cells.append(
            ratio_text(
                best(f["fp16 graph"], f["fp16 reduce-overhead"]),
                best(f["ternary graph"], f["ternary reduce-overhead"]),
            )[1]
        )
        cells.append(f"{sbs['rel_error']:.1e}" if sbs and sbs.get("status") == "ok" else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    compiled = [
        (cid, r)
        for cid, r in found.items()
        if cid.startswith("e2e/") and not cid.endswith("eager+graph") and r.get("status") == "ok"
    ]
    if compiled:
        lines += [
            "",
            "torch.compile cases: backend, time to compile (and capture), graphs traced, graph "
            "breaks, CUDA graphs skipped by Inductor, error against the eager output:",
            "",
        ]
        lines += [
            f"- `{cid}`: {r['backend']}, {r['compile_s']:.1f} s, {r['graphs']} graphs, "
            f"{r['graph_breaks']} graph breaks, {r['cudagraph_skips']} CUDA-graph skips, "
            f"rel. error {r['rel_error']:.1e}"
            for cid, r in compiled
        ]
    peak = meta.get("peak_gbps")
    lines += [
        "",
        "## Kernels",
        "",
        (
            "Wall clock (--quick)"
            if quick
            else "GPU time of one call replayed from a CUDA graph after an L2 flush"
        )
        + f" (median of {KERNEL_ROUNDS} rounds); speedup = cuBLAS fp16 / the "
        f"other; GB/s: bytes moved at least / time (peak {peak or 'unknown'} GB/s). int8: the "
        "generated BitLinear (quantization and product); gemlite: A16W158_INT (fp16) or "
        "A8W158_INT_dynamic (int8).",
        "",
        "| rows | activations | N x K | tribuild ms | fp16 ms | tribuild speedup | tribuild "
        "GB/s (peak) | gemlite ms | gemlite speedup | rel. error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in report["kernel_cases"]:
        r = found.get(c["id"])
        ok = r is not None and r.get("status") == "ok"
        t = r.get("ternary") if ok else None
        gl = r.get("gemlite") if ok else None
        lines.append(
            "| "
            + " | ".join(
                [
                    c["label"],
                    c["acts"],
                    f"{c['n']}x{c['k']}",
                    cell_text(r, "ternary"),
                    cell_text(r, "fp16"),
                    f"{t['speedup_vs_fp16']:.2f}x" if t else "n/a",
                    (f"{t['gbps']:.0f} ({t['gbps'] / peak:.0%})" if peak else f"{t['gbps']:.0f}")
                    if t
                    else "n/a",
                    cell_text(r, "gemlite"),
                    f"{gl['speedup_vs_fp16']:.2f}x"
                    if isinstance(gl, dict) and "ms" in gl
                    else "n/a",
                    f"{r['rel_error']:.1e}" if ok else "n/a",
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def versions() -> dict:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    cuda = torch.cuda.is_available()
    return {
        "device": torch.cuda.get_device_name() if cuda else f"CPU ({platform.machine()})",
        "torch": torch.__version__,
        "triton": triton_version,
        "cuda": torch.version.cuda,
    }


def parent_main(args: argparse.Namespace) -> int:
    start = time.time()
    deadline = start + args.budget_s
    meta = {
        **versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": args.quick,
        "calls": args.calls,
        "kernel_rounds": 1 if args.quick else KERNEL_ROUNDS,
        "budget_s": args.budget_s,
        "python": platform.python_version(),
    }
    if args.quick:
        meta["device"] = f"CPU ({platform.machine()}), --quick"
    meta["peak_gbps"] = bench_kernels.peak_gbps(meta["device"], args.peak_gbps)
    todo = cases(args.quick)
    found: dict[str, dict] = {}
    report = {
        "meta": meta,
        "cases": found,
        "kernel_cases": [{"id": c.id, **c.spec} for c in todo if c.kind == "kernel"],
        "case_ids": [c.id for c in todo],
    }

    def save() -> str:
        """Write what there is (and return the tables); a fault in judging or in the tables
        does not lose the figures."""
        meta["wall_s"] = time.time() - start
        meta["skipped"] = [c.id for c in todo if found.get(c.id, {}).get("status") != "ok"]
        try:
            report["goals"] = goals(report, args.quick)
            text = markdown(report, args.quick)
        except Exception:
            report["goals"], text = [], "```\n" + traceback.format_exc() + "```\n"
            report["report_error"] = traceback.format_exc()
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "e2e_gpu.json").write_text(json.dumps(report, indent=1) + "\n")
            (args.out / "e2e_gpu.md").write_text(text)
        return text

    print(f"{meta['device']}: {len(todo)} cases, budget {args.budget_s:.0f} s", flush=True)
    batch: list[Case] = []
    for case in todo + [None]:  # type: ignore[list-item]
        if batch and (case is None or case.group != batch[0].group):
            run_workers(batch, args, deadline, found, save)
            batch = []
        if case is not None:
            batch.append(case)
    text = save()
    print(text)
    if meta["skipped"]:
        print(f"{len(meta['skipped'])} of {len(todo)} cases not measured (see above)")
    if args.out is not None:
        print(f"wrote {args.out / 'e2e_gpu.json'} and e2e_gpu.md")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="tiny shapes on the CPU: a check of the script"
    )
    p.add_argument(
        "--out", type=Path, help="output folder (default benchmarks/results; --quick: none)"
    )
    p.add_argument("--budget-s", type=float, default=270.0, help="time budget of the whole run")
    p.add_argument("--calls", type=int, help="timed calls per figure (default 50; --quick 3)")
    p.add_argument("--peak-gbps", type=float, help="the device's peak memory bandwidth in GB/s")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cases-file", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.calls is None:
        args.calls = 3 if args.quick else 50
    if args.out is None and not args.quick and not args.worker:
        args.out = RESULTS
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return worker_main(args)
    if not args.quick:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run with --quick to check the script on the CPU")
    return parent_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
