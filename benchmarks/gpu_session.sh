#!/usr/bin/env bash
# A GPU session's one prepared device call (benchmarks/NOTES.md, "GPU session"): the CUDA tests,
# then the kernel benchmark, then the end-to-end benchmark, everything written into $OUT.
#
#   bash benchmarks/gpu_session.sh        # from the repository root, with OUT set (the device
#                                         # tool sets it); python3 is the machine's own
#
# Each step runs under its own `timeout`, so the whole ends within about 8.5 minutes (210 + 75 +
# 210 s at most, plus a few seconds) even if a step hangs; a step that fails or times out does
# not stop the next. What it writes into $OUT:
#   environment.txt     date, GPU (nvidia-smi), torch / CUDA / triton versions, commit
#   tests.log           `make test-cuda` (its last line: passed / failed counts)
#   kernels.log, kernels_<device>.json/.md      benchmarks/bench_kernels.py
#   e2e.log, e2e_gpu.json, e2e_gpu.md           benchmarks/bench_e2e_gpu.py
#   steps.txt           each step's exit status and seconds (124: its timeout)
# Override the limits with TESTS_S, KERNELS_S, E2E_S (seconds) and E2E_BUDGET_S.
set -u
: "${OUT:?set OUT to the folder the results go into}"
PY=${PY:-python3}
TESTS_S=${TESTS_S:-210}
KERNELS_S=${KERNELS_S:-75}
E2E_S=${E2E_S:-210}
E2E_BUDGET_S=${E2E_BUDGET_S:-165}  # the benchmark's own (it stops workers 30 s past it)
mkdir -p "$OUT"

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
    "$PY" -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
    git rev-parse HEAD 2>/dev/null || echo "commit: not a git checkout"
} > "$OUT/environment.txt" 2>&1

step() {  # step NAME SECONDS COMMAND...: run COMMAND under a timeout, its output in $OUT/NAME.log
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    echo "== $name (at most $limit s): $*"
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    echo "$name: exit $rc after $(( $(date +%s) - start )) s (limit $limit s)" | tee -a "$OUT/steps.txt"
}

step tests "$TESTS_S" make test-cuda PY="$PY" ARGS="-n 12 -p no:cacheprovider"
step kernels "$KERNELS_S" "$PY" benchmarks/bench_kernels.py --repeats 3
find benchmarks/results -maxdepth 1 -name 'kernels_*' -newer "$OUT/environment.txt" \
    -exec cp {} "$OUT/" \;
step e2e "$E2E_S" "$PY" benchmarks/bench_e2e_gpu.py --budget-s "$E2E_BUDGET_S" --out "$OUT"

# What the device tool's output tail shows: the steps, the tests' verdict, the goals.
echo
cat "$OUT/environment.txt"
cat "$OUT/steps.txt"
tail -n 3 "$OUT/tests.log"
grep -E '^(M=|wrote)' "$OUT/kernels.log"
if [ -f "$OUT/e2e_gpu.md" ]; then
    sed -n '/^## Goals/,/^## Kernels/p' "$OUT/e2e_gpu.md"
else
    tail -n 20 "$OUT/e2e.log"
fi
