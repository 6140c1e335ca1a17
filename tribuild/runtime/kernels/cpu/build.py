"""The CPU kernels as build artifacts: ``ternary.cpp`` compiled with the system C++ compiler for
the machine's instruction set, cached, and loaded with ``ctypes``.

Terms:
- *ISA*: the instruction set a build targets, best first: ``avx512vnni`` (AVX-512 F/BW/VL and
  VNNI's ``vpdpbusd``), ``avx512`` (F/BW/VL), ``avx2`` (AVX2 and FMA), ``portable`` (the
  compiler's baseline, plain C++). :func:`machine_isa` picks the best the CPU's flags allow
  (``/proc/cpuinfo``); ``TRIBUILD_CPU_ISA`` names another one, for tests (``portable`` on any
  machine; a better one than the CPU has is refused, as its instructions would fault).
- *compiler*: ``$CXX``, else the first of ``g++``, ``c++``, ``clang++`` on ``PATH``; its
  identity is its ``--version`` text.
- *key*: the digest of the source, the compiler's identity, the flags and the ISA; the library
  is ``<cache>/cpu_kernels/ternary-<isa>-<key>.so`` (``<cache>``: ``$XDG_CACHE_HOME/tribuild``,
  ``~/.cache/tribuild`` when that is unset, or ``$TRIBUILD_CPU_KERNEL_CACHE`` itself). A build
  is written to a temporary file beside it and renamed into place (atomic), so a second
  process loads what the first wrote and never a half-written file; a library of another
  compiler or ISA has another name and is never loaded, and a loaded one must say it was built
  for the ISA asked (``tb_isa``).
- *threads*: the source uses OpenMP (``-fopenmp``); in a process that imported torch, the
  dynamic loader resolves ``libgomp.so.1`` to the copy torch loaded, so the kernels and
  PyTorch share one thread pool, and the launcher passes ``torch.get_num_threads()``.

Nothing here imports torch: ``tribuild build`` may compile the kernels ahead of time.
"""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

from tribuild.base.hashing import digest

SOURCE = Path(__file__).with_name("ternary.cpp")
# one library: ternary layers, 8-bit float layers, conversions at load, RMSNorm, rotary embeddings
SOURCES = (
    SOURCE,
    *(Path(__file__).with_name(n) for n in ("int8.cpp", "pack.cpp", "norm.cpp", "rope.cpp")),
)
ISAS = ("avx512vnni", "avx512", "avx2", "portable")
_AVX2 = ("-mavx2", "-mfma", "-mf16c")
_AVX512 = (*_AVX2, "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq")
ISA_FLAGS: dict[str, tuple[str, ...]] = {
    "avx512vnni": (*_AVX512, "-mavx512vnni"),
    "avx512": _AVX512,
    "avx2": _AVX2,
    "portable": (),
}
# The CPU flags (as /proc/cpuinfo names them) each ISA's build may use.
ISA_NEEDS: dict[str, tuple[str, ...]] = {
    "avx512vnni": (
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512dq",
        "avx512_vnni",
    ),
    "avx512": ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq"),
    "avx2": ("avx2", "fma", "f16c"),
    "portable": (),
}
# -ffp-contract=off: no fused multiply-adds, so the epilogue rounds as PyTorch's does;
# -fno-math-errno lets the rounding of the quantization inline (it sets no errno anyway).
FLAGS = (
    "-O3",
    "-std=c++17",
    "-shared",
    "-fPIC",
    "-fopenmp",
    "-ffp-contract=off",
    "-fno-math-errno",
)
ISA_VARIABLE = "TRIBUILD_CPU_ISA"
CACHE_VARIABLE = "TRIBUILD_CPU_KERNEL_CACHE"


class BuildError(Exception):
    """The compiler failed: ``first_error`` is its first line that says ``error``."""

    def __init__(self, message: str, first_error: str):
        super().__init__(message)
        self.first_error = first_error


class Compiler(NamedTuple):
    path: str
    identity: str  # the first line of ``--version``


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def supported(isa: str, flags: frozenset[str]) -> bool:
    """Whether a CPU with ``flags`` runs the ``isa`` build (``portable`` everywhere)."""
    if isa == "portable":
        return True
    return platform.machine().lower() in ("x86_64", "amd64") and all(
        f in flags for f in ISA_NEEDS[isa]
    )


def machine_isa(flags: frozenset[str] | None = None) -> str:
    """The best ISA of ``ISAS`` that ``flags`` (the CPU's own by default) allow."""
    flags = cpu_flags() if flags is None else flags
    return next(isa for isa in ISAS if supported(isa, flags))


def wanted_isa() -> str:
    """The ISA to run: ``$TRIBUILD_CPU_ISA`` when set (ValueError if unknown or beyond the
    CPU), else :func:`machine_isa`."""
    asked = os.environ.get(ISA_VARIABLE)
    if not asked:
        return machine_isa()
    if asked not in ISAS:
        raise ValueError(f"{ISA_VARIABLE}={asked!r} is not one of {ISAS}")
    if not supported(asked, cpu_flags()):
        raise ValueError(f"{ISA_VARIABLE}={asked!r}: this CPU lacks its instructions")
    return asked


def find_compiler() -> Compiler | None:
    """The system C++ compiler (see the module doc), or None."""
    names = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    for name in names:
        path = shutil.which(name)
        if path is None:
            continue
        try:
            out = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=30, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        return Compiler(path, out.splitlines()[0] if out else path)
    return None


def cache_root() -> Path:
    """``<cache>``: tribuild's folder of machine-local build artifacts (see the module doc);
    the converted weights' cache (``runtime.weight_cache``) lives there too."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "tribuild"


def cache_dir() -> Path:
    """Where built libraries live (see the module doc)."""
    if env := os.environ.get(CACHE_VARIABLE):
        return Path(env)
    return cache_root() / "cpu_kernels"


def key(compiler: Compiler, isa: str) -> str:
    """The digest that names ``isa``'s library built by ``compiler``."""
    parts = [*(source.read_bytes() for source in SOURCES), compiler.identity.encode()]
    parts += [" ".join(FLAGS).encode()]
    parts += [" ".join(ISA_FLAGS[isa]).encode(), isa.encode()]
    return digest(b"\0".join(parts))


def library_path(compiler: Compiler, isa: str) -> Path:
    return cache_dir() / f"ternary-{isa}-{key(compiler, isa)}.so"


def first_error(stderr: str) -> str:
    """The compiler's first line that reports an error (else its first line, else ``?``)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return next((line for line in lines if "error" in line), lines[0] if lines else "?")


def compile_library(compiler: Compiler, isa: str) -> Path:
    """``isa``'s library, compiled now unless the cache holds it; BuildError on failure."""
    path = library_path(compiler, isa)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".so", dir=path.parent)
    os.close(fd)
    try:
        cmd = [compiler.path, *FLAGS, *ISA_FLAGS[isa], *map(str, SOURCES), "-o", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise BuildError(
                f"{Path(compiler.path).name} failed on "
                f"{', '.join(source.name for source in SOURCES)} for {isa}",
                first_error(done.stderr),
            )
        os.replace(tmp, path)  # atomic: another process sees no file or the whole one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


class Library(NamedTuple):
    """A loaded build: its ISA and its C functions, typed."""

    isa: str
    path: Path
    cdll: ctypes.CDLL


_P, _I, _F, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float, ctypes.c_int
SIGNATURES: dict[str, tuple[object, list[object]]] = {  # name -> (restype, argtypes)
    "tb_isa": (ctypes.c_char_p, []),
    "tb_layout_bytes": (_I, [_I, _I]),
    "tb_repack": (None, [_P, _I, _I, _P]),
    "tb_linear": (None, [_P, _I, _I, _P, _I, _P, _I, _P, _P, _INT, _P, _F, _INT]),
    "tb_linear_f32": (None, [_P, _I, _I, _P, _I, _P, _I, _P, _P, _INT, _P, _INT]),
    "tb_linear_raw": (None, [_P, _I, _I, _P, _I, _P, _F, _INT]),
    "tb_quantize": (None, [_P, _I, _I, _P, _P, _F]),
    "tb_i8_panel_bytes": (_I, [_I, _I]),
    "tb_i8_quantize": (None, [_P, _I, _I, _P, _P, _INT]),
    "tb_i8_linear": (None, [_P, _I, _I, _P, _P, _I, _P, _INT]),
    "tb_ternary_pack": (None, [_P, _I, _I, _P, _I, _P, _INT]),
    "tb_rms_norm": (None, [_P, _I, _I, _P, _F, _P]),
    "tb_rope": (None, [_P, _I, _I, _I, _I, _I, _I, _I, _P, _P, _P, _I, _I, _I]),
}


def load(path: Path, isa: str) -> Library:
    """The library at ``path``, checked to be ``isa``'s (OSError if it is not)."""
    cdll = ctypes.CDLL(str(path))
    for name, (restype, argtypes) in SIGNATURES.items():
        fn = getattr(cdll, name)
        fn.restype, fn.argtypes = restype, argtypes
    built_for = cdll.tb_isa().decode()
    if built_for != isa:
        raise OSError(f"{path} was built for {built_for}, not {isa}")
    return Library(isa, path, cdll)


def build_and_load(isa: str, compiler: Compiler | None = None) -> Library:
    """``isa``'s library, compiled if needed (BuildError), loaded (OSError)."""
    compiler = compiler or find_compiler()
    if compiler is None:
        raise BuildError("no C++ compiler", "no C++ compiler found ($CXX, g++, c++, clang++)")
    return load(compile_library(compiler, isa), isa)
