"""What every LM runtime of the CPU benchmark goes through, in a process of its own.

Standard library only: llama.cpp's process (the bench venv: llama_cpp, gguf, numpy) runs this
too, and must not pay for torch.

Terms:
- *spec*: the JSON file a worker reads (``run_worker``): the config's construction arguments
  (``args``: ``vocab``, ``dim``, ``layers``, ``heads``, ``kv_heads``, ``hidden``,
  ``rope_theta``, ``eps``), the paths of the generated module, the checkpoint folder and the
  GGUF file, the thread count, the repeats, the token ids, the RSS limit.
- *runtime*: an object with ``load()``, ``reset(capacity)`` (a fresh sequence whose cache
  holds ``capacity`` positions), ``forward(ids) -> int`` (``ids`` as the sequence's next
  positions; the greedy next token, the argmax of the last position's logits, as a decode
  loop computes it) and ``logits(ids)`` (the last position's logits of a fresh sequence, a
  list of floats, for the agreement check).
- *memory the model adds*: RSS after the load and one forward of one token minus RSS after
  the imports. The forward counts because llama.cpp maps its GGUF file and reads a weight's
  pages only when a forward first touches them; a torch runtime's lazily built caches fill
  then too.
- *load figures* (``measure_load``): the load, the first one-token forward and the memory
  the model adds; all of them that a *first-load* worker (tribuild's, with its weight cache
  empty) measures, before the worker that measures everything loads again.
- *decode*: ``new`` greedy steps of one token after a prompt of ``prompt`` tokens; a round's
  figure is the median step, the result the median over rounds. *prefill n*: one forward of
  ``n`` tokens as the first step of a fresh sequence, after ``prefill_warmup`` (0 or 1)
  untimed runs of that length; the median over repeats.
- *watchdog*: a thread that ends the process (exit status 3, a line on stderr) once its RSS
  passes ``max_rss_bytes``: the machine is shared, and a runtime that would take all its
  memory must fail alone rather than wake the kernel's OOM killer among other processes.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol

PAGE = os.sysconf("SC_PAGE_SIZE")
WATCHDOG_EXIT = 3


class Runtime(Protocol):
    def load(self) -> None: ...
    def reset(self, capacity: int) -> None: ...
    def forward(self, ids: list[int]) -> int: ...
    def logits(self, ids: list[int]) -> list[float]: ...


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def token_ids(vocab: int, count: int, seed: int) -> list[int]:
    """``count`` ids drawn uniformly from ``0 .. vocab - 1``, the same in every process."""
    rng = random.Random(seed)
    return [rng.randrange(vocab) for _ in range(count)]


def start_watchdog(limit: int, name: str) -> None:
    def watch() -> None:
        while True:
            rss = rss_bytes()
            if rss > limit:
                sys.stderr.write(
                    f"{name}: RSS {rss / 2**30:.1f} GiB passed the limit of "
                    f"{limit / 2**30:.1f} GiB; stopped\n"
                )
                sys.stderr.flush()
                os._exit(WATCHDOG_EXIT)
            time.sleep(0.02)

    threading.Thread(target=watch, daemon=True).start()


def progress(text: str) -> None:
    """A line on stderr (the worker's log) with the time: where a slow run has got to."""
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {text}\n")
    sys.stderr.flush()


def _seconds(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_load(runtime: Runtime, spec: dict) -> dict:
    """The *load figures* of one runtime (see the module doc): load, first token, memory."""
    ids: list[int] = spec["ids"]
    out: dict[str, Any] = {"rss_imports": rss_bytes()}
    progress("loading")
    out["load_s"] = _seconds(runtime.load)
    progress(f"loaded in {out['load_s']:.1f} s")
    out["rss_load"] = rss_bytes()
    runtime.reset(1)
    out["first_token_s"] = _seconds(lambda: runtime.forward(ids[:1]))
    out["rss_first"] = rss_bytes()
    out["model_adds"] = out["rss_first"] - out["rss_imports"]
    out["peak_rss"] = peak_rss_bytes()
    out["load_average"] = os.getloadavg()[0]
    return out


def measure_lm(runtime: Runtime, spec: dict) -> dict:
    """Every LM figure of one runtime (see the module doc), in this order: load, first token,
    agreement logits, prefills, decode rounds."""
    ids: list[int] = spec["ids"]
    out = measure_load(runtime, spec)
    out["logits"] = runtime.logits(spec["probe"])
    prefill: dict[str, float] = {}
    for n in spec["prefill"]:
        times = []
        warmup = spec["prefill_warmup"]
        for r in range(spec["prefill_repeats"] + warmup):
            runtime.reset(n)
            t = _seconds(lambda n=n: runtime.forward(ids[:n]))
            if r >= warmup:
                times.append(t)
        prefill[str(n)] = n / statistics.median(times)
        progress(f"prefill {n}: {prefill[str(n)]:.1f} tokens/s")
    out["prefill_tok_s"] = prefill
    prompt, new = spec["prompt"], spec["new"]
    rounds = []
    for _ in range(spec["decode_rounds"]):
        runtime.reset(prompt + new)
        token = runtime.forward(ids[:prompt])
        steps = []
        for _ in range(new):
            start = time.perf_counter()
            token = runtime.forward([token])
            steps.append(time.perf_counter() - start)
        rounds.append(statistics.median(steps) * 1e3)
        progress(f"decode round: {rounds[-1]:.1f} ms/token")
    out["decode_ms"] = statistics.median(rounds)
    out["decode_rounds_ms"] = rounds
    out["peak_rss"] = peak_rss_bytes()
    out["load_average"] = os.getloadavg()[0]
    return out


def run_worker(
    make: Callable[[dict], Runtime],
    name: str,
    measure: Callable[[Runtime, dict], dict] = measure_lm,
) -> None:
    """``python <side>.py <spec.json> <out.json>``: measure the runtime ``make(spec)`` makes
    (every figure, or what ``measure`` takes) and write its figures (the agreement logits
    beside them, as ``<out>.logits.json``)."""
    spec = json.loads(Path(sys.argv[1]).read_text())
    start_watchdog(spec["max_rss_bytes"], name)
    runtime = make(spec)
    figures = measure(runtime, spec)
    out = Path(sys.argv[2])
    if "logits" in figures:
        Path(f"{out}.logits.json").write_text(json.dumps(figures.pop("logits")))
    out.write_text(json.dumps(figures, indent=1) + "\n")
