"""One tree's prefill of a generated model on the native CPU kernels, in CPU time, per thread:
run by ``bench_cpu_gemm.py --model`` in a fresh process whose ``PYTHONPATH`` is the tree
(so its ``tribuild``, and its kernels' library, are that tree's).

``python cpu_prefill_split.py MODULE CHECKPOINT TOKENS[,TOKENS] REPEATS`` prints one JSON
object: for each prompt length and 1 or 2 threads, tokens per CPU-second (``process_time``,
median), tokens per wall-second (indicative only on a shared machine) and each thread's CPU
seconds per forward (``/proc/self/task/*/stat``: how evenly 2 threads split the work, and
what they spend waiting).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import time


def per_thread() -> dict[str, float]:
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[tid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return out


def main(argv: list[str]) -> int:
    import torch

    from tribuild.runtime import native
    from tribuild.runtime.checkpoint import load_checkpoint
    from tribuild.runtime.decoding import KVCache

    module, checkpoint, tokens, repeats = argv[0], argv[1], argv[2], int(argv[3])
    spec = importlib.util.spec_from_file_location("bench_model", module)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = load_checkpoint(mod.Model, checkpoint, int8_floats=True)

    def forward(t: int) -> None:
        cache = KVCache(t, last_only=True)
        ids = torch.arange(t).reshape(1, t) % 1000
        with torch.no_grad(), cache.step():
            model(ids)

    lib = native.library()
    result: dict[str, object] = {"library": lib.path.name if lib else None}
    for t in map(int, tokens.split(",")):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            forward(t)  # warm: layouts, the pool
            cpu, wall = [], []
            before = per_thread()
            for _ in range(repeats):
                start, wall_start = time.process_time(), time.perf_counter()
                forward(t)
                cpu.append(time.process_time() - start)
                wall.append(time.perf_counter() - wall_start)
            after = per_thread()
            shares = sorted(
                ((after[k] - before.get(k, 0.0)) / repeats for k in after), reverse=True
            )
            result[f"{t}x{threads}"] = {
                "tok_per_cpu_s": t / statistics.median(cpu),
                "tok_per_wall_s": t / statistics.median(wall),
                "thread_cpu_s": [round(s, 3) for s in shares if s > 0.005],
                "loadavg": os.getloadavg()[0],
            }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
