"""The CPU kernels made ready ahead of time: the step of ``tribuild build`` that makes sure the
native library its ternary layers run on (``tribuild.runtime.kernels.cpu.build``) exists for
this machine's ISA and compiler, so that no process of the generated code compiles it at its
first call.

Terms:
- *needed*: a build that writes outputs, with a target holding ternary layers (a target with
  kernel files, built here or taken from the remote) and ``TRIBUILD_CPU_KERNELS`` not ``off``.
- *library*: ``kernels.cpu.build``'s, for ``$TRIBUILD_CPU_ISA`` or the CPU's best ISA and
  the system compiler, in its cache (``~/.cache/tribuild/cpu_kernels``), keyed by the
  source, the compiler's identity, the flags and the ISA.
- *step*: ``begin`` after the units (the pool's processes have all ended), ``end`` once the
  outputs are written and the store saved. The compiler is one more job of the build's
  pool: when a slot beside this process is free (``--jobs`` above 1, or a token of make's
  jobserver), ``begin`` starts it and it runs beside the writing and the saving; else
  ``end`` runs it alone. It shows as a unit of its own in the progress display.
- *stamp*: ``<cache>/cpu-kernels.json``, what the last step found (the library ready, no
  compiler, or the compiler's error) with the facts it depends on (``_facts``: the variables
  that choose the compiler, the ISA and the cache; the compiler's file and the folders of
  ``PATH``; the kernels' sources; the host). While they hold, a rebuild after an edit checks
  a few ``stat``s and imports nothing more, runs no ``--version`` (the one-edit path's
  budget).
- *remote*: with a remote cache, a library missing here is fetched under its file name (ISA
  and key: another compiler or ISA has another name, and a framed entry's digest covers its
  name, so one copied under another name is refused); one compiled here is sent.
- *outcome*: ``ready`` (already there), ``fetched``, ``compiled``, ``no compiler`` (a
  warning, once: a later build with the same stamp says nothing) or ``failed`` (an error
  naming the targets, the compiler's first error and the fallback: the generated modules are
  complete and run their ternary layers on the torch path on the CPU). A failure is the
  build's: its exit status is 1 and it writes no manifest, so the next build tries again,
  while every target's outputs are written (invariant 4: one failure stops nothing else).
"""

from __future__ import annotations

import json
import os
import threading

from tribuild.base.files import OWN_FILE_BYTES, read_regular
from tribuild.base.record import record
from tribuild.base.tempname import replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.driver.pool.jobserver import Slots
    from tribuild.driver.progress import Quiet
    from tribuild.driver.remote.build_cache import RemoteBuild
    from tribuild.driver.results import BuildResult
    from tribuild.runtime.kernels.cpu.build import Compiler

SWITCH_VARIABLE = "TRIBUILD_CPU_KERNELS"  # ``off`` (or 0, no, false): no step
STAMP = "cpu-kernels.json"
STAMP_VERSION = 1
# what chooses the compiler (CXX, PATH), the ISA and the library's folder
_VARIABLES = (
    "CXX",
    "PATH",
    "TRIBUILD_CPU_ISA",
    "TRIBUILD_CPU_KERNEL_CACHE",
    "XDG_CACHE_HOME",
    "HOME",
)


@record
class KernelOutcome:
    state: str  # ready, fetched, compiled, no compiler, failed
    message: str | None = None  # what the build prints (a warning or an error), if anything
    library: str | None = None  # the library's path, when it is there
    first_error: str | None = None  # a failure's: the compiler's first error line

    @property
    def failed(self) -> bool:
        return self.state == "failed"


def switched_off() -> bool:
    return os.environ.get(SWITCH_VARIABLE, "").strip().lower() in ("off", "0", "no", "false")


def needing(result: BuildResult) -> list[str]:
    """The targets of ``result`` built without errors that hold ternary layers (they have
    kernel files)."""
    return [
        t.name
        for t in result.targets
        if not t.failed and any(rel.startswith("kernels/") for rel in t.files)
    ]


class KernelStep:
    """The step of one build (see the module doc)."""

    def __init__(
        self, cache_dir: str, remote: RemoteBuild | None, show: Quiet, jobs: int = 1
    ) -> None:
        self.cache_dir, self.remote, self.show, self.jobs = cache_dir, remote, show, jobs
        self.slots: Slots | None = None
        self.targets: list[str] = []
        self.compiling: Compiling | None = None
        self.compiler: Compiler | None = None
        self.outcome: KernelOutcome | None = None
        self.facts: dict[str, Any] = {}

    def begin(self, result: BuildResult) -> None:
        """Decide what the build's targets need; start the compiler if it must run."""
        self.targets = needing(result)
        if not self.targets or switched_off():
            return
        self.facts = _facts()
        stamp = _read_stamp(os.path.join(self.cache_dir, STAMP))
        if stamp is not None and stamp.get("facts") == self.facts and _still(stamp):
            state, said = stamp["state"], stamp.get("said")
            if state == "ready":
                self.outcome = KernelOutcome("ready", None, stamp["library"])
            elif state == "no compiler":
                self.outcome = KernelOutcome(state)  # said once, by the build that found it
            else:
                self.outcome = KernelOutcome(state, self._failure(said or "?"), None, said)
            self.facts = {}  # the stamp holds: nothing to write again
            return
        from tribuild.runtime.kernels.cpu import build as kernels

        self.compiler = kernels.find_compiler()
        if self.compiler is None:
            self.outcome = KernelOutcome(
                "no compiler",
                "warning: no C++ compiler found ($CXX, g++, c++ or clang++): the ternary layers "
                f"of {_names(self.targets)} run on the torch path on the CPU; install g++ for "
                "the native CPU kernels",
            )
            return
        try:
            isa = kernels.wanted_isa()
            path = kernels.library_path(self.compiler, isa)
            if path.exists():
                self.outcome = KernelOutcome("ready", None, str(path))
            elif self._fetch(path.name, str(path)):
                self.outcome = KernelOutcome("fetched", None, str(path))
            else:
                self.compiling = Compiling(self.compiler, isa, started=self._slot())
        except (ValueError, OSError) as e:  # a $TRIBUILD_CPU_ISA beyond the CPU, a cache unwritable
            self.outcome = KernelOutcome("failed", self._failure(str(e)), None, str(e))

    def end(self) -> KernelOutcome | None:
        """Wait for the compiler if it runs (shown in progress), send what it built to the
        remote, write the stamp; the outcome (None: not needed)."""
        if self.compiling is not None:
            compiler = os.path.basename(self.compiling.compiler.path)
            label = f"cpu kernels ({self.compiling.isa}, {compiler})"
            self.show.start(1)
            self.show.started(label)
            try:
                path, first_error = self.compiling.wait()
                if path is not None:
                    self.outcome = KernelOutcome("compiled", None, path)
                    with open(path, "rb") as f:
                        self._send(os.path.basename(path), f.read())
                else:
                    failure = self._failure(first_error)
                    self.outcome = KernelOutcome("failed", failure, None, first_error)
            finally:
                self.compiling = None
                if self.slots is not None:
                    self.slots.close()
                self.show.finished(label, self.outcome is not None and not self.outcome.failed)
                self.show.stop()
        if self.outcome is not None and self.facts:
            self._stamp()
        return self.outcome

    def _slot(self) -> bool:
        """Whether a job slot beside this process is free for the compiler now (``--jobs``,
        or make's jobserver: ``pool.jobserver``); without one it runs at ``end``, alone."""
        from tribuild.driver.pool import jobserver

        self.slots = jobserver.slots(self.jobs)
        return self.slots.acquire()

    def _failure(self, first_error: str) -> str:
        return (
            f"error: the CPU kernels failed to compile for the ternary layers of "
            f"{_names(self.targets)}: {first_error}\n"
            "  = note: the generated modules are complete; on the CPU their ternary layers run "
            f"on the torch path (float32 codes). Fix the compiler ($CXX), or set "
            f"{SWITCH_VARIABLE}=off to build without the native kernels"
        )

    def _stamp(self) -> None:
        outcome = self.outcome
        assert outcome is not None
        state = "ready" if outcome.library is not None else outcome.state
        data: dict[str, Any] = {"version": STAMP_VERSION, "facts": self.facts, "state": state}
        if outcome.library is not None:
            data["library"] = outcome.library
        if outcome.failed:
            data["said"] = outcome.first_error
        compiler = self.compiler.path if self.compiler is not None else None
        data["compiler"] = [compiler, _stat(compiler) if compiler else None]
        try:
            os.makedirs(self.cache_dir, exist_ok=True)
            replace(os.path.join(self.cache_dir, STAMP), json.dumps(data).encode(), sync=False)
        except OSError:
            pass  # an unwritable cache folder: the next build checks again

    def _fetch(self, name: str, path: str) -> bool:
        """Whether the remote held the library ``name`` (checked: ``entries``), now at
        ``path``."""
        remote = self.remote
        if remote is None or not remote.settings.read or remote.link.down:
            return False
        from tribuild.remote import entries

        key = entries.cpu_kernel_key(remote.settings.prefix, name)
        (data,) = remote.link.get_many([key])
        if data is None:
            return False
        try:
            body = entries.unframe(key, data, remote.secret)
        except entries.Refused as refused:
            remote.link.refuse(f"the CPU kernels `{name}`", str(refused))
            return False
        os.makedirs(os.path.dirname(path), exist_ok=True)
        replace(path, body, sync=False)
        os.chmod(path, 0o755)
        return True

    def _send(self, name: str, data: bytes) -> None:
        remote = self.remote
        if remote is None or not remote.settings.write or remote.link.down:
            return
        from tribuild.remote import entries

        key = entries.cpu_kernel_key(remote.settings.prefix, name)
        remote.link.set_many([(key, entries.frame(key, data, remote.secret))])


class Compiling:
    """``kernels.cpu.build.compile_library`` running on a thread of its own: the compiler is
    a process, and the build writes its outputs meanwhile (the pool's workers have ended, so
    no process is forked while it runs). A daemon thread: an interrupted build does not wait
    for it (the compiler, in the build's process group, gets the same signal; a temporary
    file it leaves has a hidden name that nothing loads)."""

    def __init__(self, compiler: Compiler, isa: str, started: bool = True) -> None:
        self.compiler, self.isa = compiler, isa
        self.path: str | None = None
        self.first_error = "?"
        self.thread = threading.Thread(target=self._run, name="cpu kernels", daemon=True)
        if started:
            self.thread.start()

    def _run(self) -> None:
        from tribuild.runtime.kernels.cpu import build as kernels

        try:
            self.path = str(kernels.compile_library(self.compiler, self.isa))
        except kernels.BuildError as e:
            self.first_error = e.first_error
        except (OSError, ValueError) as e:  # the compiler could not start, a cache unwritable
            self.first_error = str(e)
        except Exception as e:  # noqa: BLE001 (a bug: said as the step's failure, not lost)
            self.first_error = f"{type(e).__name__}: {e}"

    def wait(self) -> tuple[str | None, str]:
        """The library's path (None on failure) and the compiler's first error (the
        compiler is started now if it was not)."""
        if self.thread.ident is None:
            self.thread.start()
        self.thread.join()
        return self.path, self.first_error


def _names(targets: list[str]) -> str:
    shown = ", ".join(f"`{t}`" for t in targets[:3])
    more = len(targets) - 3
    head = "target" if len(targets) == 1 else "targets"
    return f"{head} {shown}" + (f" and {more} more" if more > 0 else "")


def _stat(path: str) -> list[int] | None:
    """(size, modification time, inode) of ``path``, links followed; None if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _facts() -> dict[str, Any]:
    """What the last step's finding depends on, besides the compiler's file (``_still``):
    installing a compiler on ``PATH`` changes a folder of it."""
    import tribuild.runtime.kernels.cpu as sources  # a docstring only: no torch

    folder = os.path.dirname(os.path.abspath(sources.__file__ or ""))
    path = os.environ.get("PATH", "")
    return {
        "env": [os.environ.get(name) for name in _VARIABLES],
        "path": [[d, _stat(d)] for d in path.split(os.pathsep) if d],
        "sources": sorted(
            [name, _stat(os.path.join(folder, name))]
            for name in os.listdir(folder)
            if name.endswith((".py", ".cpp", ".h"))
        ),
        "host": list(os.uname()) if hasattr(os, "uname") else None,
    }


def _read_stamp(path: str) -> dict[str, Any] | None:
    try:
        data = json.loads(read_regular(path, OWN_FILE_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != STAMP_VERSION:
        return None
    return data


def _still(stamp: dict[str, Any]) -> bool:
    """Whether the compiler the stamp names is the file it was, and its library is there."""
    try:
        compiler, its_stat = stamp["compiler"]
        if compiler is not None and _stat(compiler) != its_stat:
            return False
        return stamp["state"] != "ready" or os.path.isfile(stamp["library"])
    except (KeyError, TypeError, ValueError):
        return False
