"""Small batches (M = 8, 16, 32) of a ternary linear layer three ways, on a CUDA GPU.

The ways: ``gemm``, what ``ternary_linear`` runs at -O3 for those rows (tuned over its
family's set); ``small``, the GEMM kernel tuned over a grid of 16-row tiles
(``BLOCK_N`` 16/32/64 by ``BLOCK_K`` 64/128/256); ``gemv``, the GEMV kernel run on every
row. Each is checked against the dense float16 product and timed by ``autotune.gpu_ms``
(median of 3 x 100 replays), beside torch float16. Each way tunes into its own cache file
under ``$OUT`` (default /tmp). Writes ``$OUT/m16.json``; ``--dry`` runs tiny shapes under
the Triton interpreter on a CPU, untimed. This is how the ``gemm_small`` family was chosen
(``benchmarks/NOTES.md``, kernels section).
"""

import contextlib
import json
import os
import statistics
import sys

DRY = "--dry" in sys.argv
if DRY:
    os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks.bench_kernels import check, operands  # noqa: E402
from tribuild.runtime import launch, linear, ternary_linear  # noqa: E402
from tribuild.runtime.autotune import config  # noqa: E402

DEV = "cpu" if DRY else "cuda"
SIZES = ((24, 40),) if DRY else ((4096, 4096), (11008, 4096), (4096, 11008))
ROWS = (8,) if DRY else (8, 16, 32)
SMALL = [
    config(4, 3, BLOCK_M=16, BLOCK_N=bn, BLOCK_K=bk) for bn in (16, 32, 64) for bk in (64, 128, 256)
]
OUT = os.environ.get("OUT", "/tmp")
GEMV_ROWS = linear.GEMV_MAX_ROWS  # the launcher's own; the ``gemv`` way raises it for a while


def variant(name):
    """``ternary_linear`` as the way ``name`` runs it, tuning into its own cache file."""
    os.environ["TRIBUILD_AUTOTUNE_CACHE"] = os.path.join(OUT, f"tune-{name}.json")
    linear.GEMV_MAX_ROWS = 64 if name == "gemv" else GEMV_ROWS
    configs = SMALL if name == "small" else None
    return lambda x, p, g: ternary_linear(x, p, g, tuned=True, configs=configs)


def timed(fn) -> float:
    if DRY:
        fn()
        return 0.0
    from tribuild.runtime.autotune import gpu_ms

    return statistics.median(gpu_ms(fn, torch.device("cuda"), 100) for _ in range(3))


def measure(m: int, n: int, k: int) -> dict:
    x, packed, g, dense = operands(m, n, k, DEV)
    ref = x.float() @ dense.float().T
    row = {"M": m, "N": n, "K": k}
    for name in ("gemm", "small", "gemv"):
        call = variant(name)
        row[name + "_err"] = check(call(x, packed, g), ref)
        row[name + "_ms"] = timed(lambda call=call: call(x, packed, g))
    linear.GEMV_MAX_ROWS = GEMV_ROWS
    row["fp16_ms"] = timed(lambda: x @ dense.T)
    return row


def main() -> None:
    rows = []
    with launch.force_backend("triton") if DRY else contextlib.nullcontext():
        for m in ROWS:
            for n, k in SIZES:
                rows.append(measure(m, n, k))
                print(
                    " ".join(
                        f"{key}={value:.4f}" if isinstance(value, float) else f"{key}={value}"
                        for key, value in rows[-1].items()
                    ),
                    flush=True,
                )
    with open(os.path.join(OUT, "m16.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
