"""Kernel launch configurations, choosing among them by timing, and the on-disk tuning cache.

Terms:
- *config*: a ``KernelConfig``: a kernel's ``tl.constexpr`` block sizes (``meta``) with its
  ``num_warps`` and ``num_stages``, and the kernel it is for (``kernel``: ``""`` for the
  family's own, else a kernel the launcher offers beside it, such as ``decode``).
- *family*: the kernel a config set belongs to: ``gemm gemm_small gemv decode gemm_int8
  conv2d depthwise act_quant`` (``gemm_small``: the GEMM kernel on a few rows; ``decode``:
  the split-K GEMV of ``kernels.ternary_decode``, ``gemm_int8``: the int8 GEMM of
  ``kernels.ternary_gemm_int8``, whose configs name them).
- *config set*: what is tried for a family: the one default config, or, *tuned* (a kernel
  file generated at -O3 and not run by the interpreter: its ``TUNED``), a few (``tl.dot``
  kernels keep every block at least 16) and the tuned sets of the families it is *joined*
  with (``JOINED``: the decode kernel competes with the GEMV and the small GEMM, the int8
  GEMM with the GEMM), which the launcher keeps where their kernel applies.
- *failed candidate*: a config whose kernel raises (does not compile on this device, runs out
  of shared memory) while it is timed; it is skipped with a warning, and the call fails only
  when every candidate does.
- *tuning key*: ``"<kernel key>|<shape key>|<device name>"``, what one choice is valid for.
- *cache*: a JSON file ``{"version": 1, "entries": {tuning key: config}}``, replaced
  atomically (temp file + rename); a file that does not parse, or of another version, is
  treated as empty and rewritten. Its path is ``$TRIBUILD_AUTOTUNE_CACHE``, else
  ``$XDG_CACHE_HOME/tribuild/autotune.json`` (``~/.cache`` when that is unset).
- *bench*: milliseconds per call of a function. On a GPU, ``gpu_ms``: the GPU time of one
  call replayed from a CUDA graph after L2 is flushed, so that neither Python's launch cost
  (tens of microseconds, more than a small kernel takes) nor a warm L2 decides the choice.
  On the CPU (the Triton interpreter) a wall-clock median.
- *remote*: with ``TRIBUILD_REMOTE_CACHE`` set, a choice missing here is looked up on the
  shared build cache (``tribuild.runtime.tuning``, keyed with the Triton version
  too), and a choice made here is put there, so a fleet tunes each shape once.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from tribuild.base.files import OWN_FILE_BYTES, read_regular
from tribuild.base.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.runtime.tuning import RemoteTuning

CACHE_VERSION = 1
CPU_BENCH_REPEATS = 3
GPU_REPLAYS = 50
FLUSH_BYTES = 256 << 20  # more than any GPU's L2 cache


@record
class KernelConfig:
    """Block sizes as sorted ``(name, value)`` pairs, and the launch's warps and stages."""

    meta: tuple[tuple[str, int], ...]
    num_warps: int = 4
    num_stages: int = 2
    kernel: str = ""

    def launch_kwargs(self) -> dict[str, int]:
        """The keyword arguments of a kernel launch: block sizes, ``num_warps``, ``num_stages``."""
        return {**dict(self.meta), "num_warps": self.num_warps, "num_stages": self.num_stages}

    def to_json(self) -> dict[str, Any]:  # a JSON object
        data = {"meta": dict(self.meta), "num_warps": self.num_warps, "num_stages": self.num_stages}
        return {**data, "kernel": self.kernel} if self.kernel else data

    @staticmethod
    def from_json(data: dict[str, Any]) -> KernelConfig:
        return KernelConfig(
            tuple(sorted((str(k), int(v)) for k, v in data["meta"].items())),
            int(data["num_warps"]),
            int(data["num_stages"]),
            str(data.get("kernel", "")),
        )


def config(num_warps: int = 4, num_stages: int = 2, kernel: str = "", **meta: int) -> KernelConfig:
    """A config from block sizes given as keywords, e.g. ``config(BLOCK_M=64, BLOCK_N=64)``."""
    return KernelConfig(tuple(sorted(meta.items())), num_warps, num_stages, kernel)


def _decode(n: int, w: int, split: int, warps: int = 4, stages: int = 3) -> KernelConfig:
    return config(warps, stages, "decode", BLOCK_N=n, BLOCK_W=w, SPLIT_K=split)


def _mnk(m: int, n: int, k: int, warps: int, stages: int, kernel: str = "") -> KernelConfig:
    return config(warps, stages, kernel, BLOCK_M=m, BLOCK_N=n, BLOCK_K=k)


# family -> (default config, the tuned set)
CONFIG_SETS: dict[str, tuple[KernelConfig, tuple[KernelConfig, ...]]] = {
    "gemm": (
        _mnk(64, 64, 64, 4, 3),
        (
            _mnk(128, 128, 64, 8, 3),
            _mnk(64, 128, 64, 4, 4),
            _mnk(128, 64, 64, 4, 4),
            _mnk(64, 64, 128, 4, 3),
            _mnk(32, 64, 128, 4, 4),
            _mnk(16, 32, 256, 4, 3),
        ),
    ),  # 17-32 rows: 1.5-1.6x faster on two of three shapes
    # a few rows (5 to launch.SMALL_GEMM_MAX_ROWS): 16-row tiles, narrow and deep, so that the
    # grid has enough programs (64-row tiles left most of the GPU idle: 1.3-2.5x slower)
    "gemm_small": (
        _mnk(16, 16, 256, 4, 3),
        (
            _mnk(16, 16, 256, 4, 3),
            _mnk(16, 16, 128, 4, 3),
            _mnk(16, 32, 128, 4, 3),
            _mnk(16, 32, 256, 4, 3),
            _mnk(16, 64, 64, 4, 3),
        ),
    ),
    "gemv": (
        config(4, 2, BLOCK_N=16, BLOCK_K=512),
        (
            config(4, 2, BLOCK_N=8, BLOCK_K=1024),
            config(4, 2, BLOCK_N=16, BLOCK_K=512),
            config(8, 2, BLOCK_N=16, BLOCK_K=1024),
            config(4, 2, BLOCK_N=32, BLOCK_K=256),
            config(8, 2, BLOCK_N=64, BLOCK_K=256),
        ),
    ),
    # unmeasured (written without a GPU): SPLIT_K slices of K per output tile, so that a
    # 4096-channel layer's decoding step has 512-2048 programs reading packed words
    "decode": (
        _decode(32, 8, 4),
        (
            _decode(16, 16, 4),
            _decode(32, 8, 4),
            _decode(16, 16, 8),
            _decode(8, 32, 8),
            _decode(64, 8, 2, 8),
            _decode(64, 4, 1),
        ),
    ),
    # unmeasured (written without a GPU): BitLinear's int8 GEMM (kernel "int8",
    # kernels.ternary_gemm_int8), for layers that quantize their input; int8 dots want K >= 32
    "gemm_int8": (
        _mnk(64, 64, 64, 4, 3, "int8"),
        (
            _mnk(128, 128, 64, 8, 3, "int8"),
            _mnk(128, 128, 128, 8, 3, "int8"),
            _mnk(64, 128, 128, 4, 4, "int8"),
            _mnk(128, 64, 128, 4, 4, "int8"),
            _mnk(64, 64, 128, 4, 4, "int8"),
        ),
    ),
    "conv2d": (
        _mnk(64, 64, 32, 4, 2),
        (
            _mnk(128, 64, 32, 4, 3),
            _mnk(64, 128, 32, 4, 3),
            _mnk(128, 128, 32, 8, 3),
            _mnk(64, 64, 64, 4, 3),
        ),
    ),
    "depthwise": (
        config(4, 2, BLOCK_M=128, BLOCK_N=8),
        (
            config(4, 2, BLOCK_M=64, BLOCK_N=16),
            config(4, 2, BLOCK_M=256, BLOCK_N=4),
            config(8, 2, BLOCK_M=32, BLOCK_N=32),
        ),
    ),
    "act_quant": (
        config(4, 2, BLOCK_K=1024),
        (config(4, 2, BLOCK_K=512), config(8, 2, BLOCK_K=2048), config(8, 2, BLOCK_K=4096)),
    ),
}


# family -> the families whose tuned sets join its own when tuned
JOINED: dict[str, tuple[str, ...]] = {
    "gemv": ("decode",),
    "gemm_small": ("decode",),
    "gemm": ("gemm_int8",),
}


def configs(family: str, tuned: bool = False) -> tuple[KernelConfig, ...]:
    """The configs tried for ``family``: its default one; ``tuned``, its tuned set, then the
    tuned sets of the families ``JOINED`` to it."""
    default, tuned_set = CONFIG_SETS[family]
    if not tuned:
        return (default,)
    return tuned_set + tuple(
        cfg for other in JOINED.get(family, ()) for cfg in CONFIG_SETS[other][1]
    )


def tuned_at(opt_level: int) -> bool:
    """``tuned`` as the launchers' old ``opt_level`` argument said it: kernel files generated
    before the runtime named it (``LEVEL = 2 if autotune.interpreted() else 3`` and
    ``opt_level=LEVEL``, in users' build folders still) tried the tuned set from 3 up."""
    return opt_level >= 3


def interpreted() -> bool:
    """Whether Triton kernels run in the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def device_name(device: torch.device) -> str:
    """The name a tuning is keyed by: the GPU's name, or ``cpu-interpreter``."""
    if device.type == "cuda" and not interpreted():
        return _gpu_name(torch.cuda.current_device() if device.index is None else device.index)
    return "cpu-interpreter"


@functools.cache
def _gpu_name(index: int) -> str:
    return torch.cuda.get_device_name(index)


def gpu_ms(fn: Callable[[], object], device: torch.device, replays: int = GPU_REPLAYS) -> float:
    """Median GPU milliseconds of one call of ``fn`` on CUDA ``device``.

    ``fn`` runs once on a side stream (compiling what it needs), is captured in a CUDA graph,
    and the graph is replayed ``replays`` times, each right after a buffer larger than L2 is
    overwritten. The overwrite evicts L2, as a model's other layers do between two calls of
    one layer, and keeps the GPU busy while the replay is queued, so the events around the
    replay time the kernels alone. The buffer is freed on return (to torch's caching
    allocator, which hands it out again), not kept for the process's life.
    """
    with torch.cuda.device(device):
        flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(replays)
        ]
        for start, end in events:
            flush.zero_()
            start.record()
            graph.replay()
            end.record()
        torch.cuda.synchronize()
    times: list[float] = [start.elapsed_time(end) for start, end in events]
    return statistics.median(times)


def bench(fn: Callable[[], None], device: torch.device) -> float:
    """Milliseconds per call of ``fn``: ``gpu_ms`` on a GPU, a CPU wall-clock median otherwise."""
    if device.type == "cuda" and not interpreted():
        return gpu_ms(fn, device)
    fn()  # warm-up: the interpreter's first call pays for tracing
    times = []
    for _ in range(CPU_BENCH_REPEATS):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class AutotuneCache:
    """Tuned configs by tuning key, in one JSON file; read once, merged and replaced on write."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._entries: dict[str, dict[str, Any]] | None = None  # tuning key -> a config's JSON
        self._parsed: dict[str, KernelConfig] = {}  # configs of _entries already parsed

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(read_regular(str(self.path), OWN_FILE_BYTES))  # no FIFO, no link
            entries = data["entries"] if data.get("version") == CACHE_VERSION else {}
            return entries if isinstance(entries, dict) else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def get(self, key: str) -> KernelConfig | None:
        if (parsed := self._parsed.get(key)) is not None:
            return parsed
        if self._entries is None:
            self._entries = self._read()
        entry = self._entries.get(key)
        try:
            parsed = None if entry is None else KernelConfig.from_json(entry)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if parsed is not None:
            self._parsed[key] = parsed
        return parsed

    def put(self, key: str, cfg: KernelConfig) -> None:
        entries = self._read()  # merge with what other processes wrote meanwhile
        entries[key] = cfg.to_json()
        self._entries, self._parsed = entries, {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(
                    {"version": CACHE_VERSION, "entries": entries}, f, indent=1, sort_keys=True
                )
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise


def cache_path() -> Path:
    """Where the tuning cache lives (see the module docstring)."""
    if env := os.environ.get("TRIBUILD_AUTOTUNE_CACHE"):
        return Path(env)
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "tribuild" / "autotune.json"


_caches: dict[tuple[str | None, ...], AutotuneCache] = {}


def default_cache() -> AutotuneCache:
    """The process's cache object for :func:`cache_path`, one per value of the variables that
    choose the path (so a launch looks up a dict rather than building a path)."""
    env = tuple(
        os.environ.get(name) for name in ("TRIBUILD_AUTOTUNE_CACHE", "XDG_CACHE_HOME", "HOME")
    )
    if (cache := _caches.get(env)) is None:
        cache = _caches[env] = AutotuneCache(cache_path())
    return cache


def choose(
    key: str,
    candidates: Sequence[KernelConfig],
    run: Callable[[KernelConfig], None],
    device: torch.device,
    cache: AutotuneCache | None = None,
) -> KernelConfig:
    """The fastest of ``candidates`` for ``key`` on ``device``: cached, else timed and cached.

    A single candidate is returned as is, untimed and uncached.
    """
    if len(candidates) == 1:
        return candidates[0]
    cache = cache or default_cache()
    full_key = f"{key}|{device_name(device)}"
    cached = cache.get(full_key)
    if cached is not None and cached in candidates:
        return cached
    remote = _remote_tuning()
    shared = _shared_choice(remote, full_key, candidates) if remote is not None else None
    if shared is not None:
        cache.put(full_key, shared)
        return shared
    best = _fastest(key, candidates, run, device)
    cache.put(full_key, best)
    if remote is not None:
        remote.put(full_key, best.to_json())
    return best


def _fastest(
    key: str,
    candidates: Sequence[KernelConfig],
    run: Callable[[KernelConfig], None],
    device: torch.device,
) -> KernelConfig:
    """The candidate with the least ``bench`` time, skipping (with a warning) those that raise;
    the last error is raised when every candidate does."""
    times: dict[KernelConfig, float] = {}
    error: Exception | None = None
    for cfg in candidates:
        try:
            times[cfg] = bench(functools.partial(run, cfg), device)
        except Exception as err:  # a compile or launch failure of this config alone
            error = err
            warnings.warn(
                f"autotune: skipped {cfg} for {key}: {type(err).__name__}: {err}",
                RuntimeWarning,
                stacklevel=2,
            )
    if not times:
        assert error is not None
        raise error
    return min(times, key=times.__getitem__)


def _remote_tuning() -> RemoteTuning | None:
    """The remote cache's tuning choices (``tribuild.runtime.tuning``) when
    ``TRIBUILD_REMOTE_CACHE`` names a server, else None (nothing imported)."""
    if not os.environ.get("TRIBUILD_REMOTE_CACHE"):
        return None
    from tribuild.runtime.tuning import remote_tuning

    return remote_tuning()


def _shared_choice(
    remote: RemoteTuning, full_key: str, candidates: Sequence[KernelConfig]
) -> KernelConfig | None:
    """The choice the remote holds for ``full_key`` if it is one of ``candidates``."""
    found = remote.get(full_key)
    try:
        chosen = None if found is None else KernelConfig.from_json(found)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return chosen if chosen in candidates else None
