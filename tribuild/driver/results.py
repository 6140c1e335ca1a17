"""What a build is asked to do and what it did.

Terms:
- *request*: what the command line asked for: target names (empty: all), ``jobs``, an
  ``-O`` override, ``stop_after`` (``parse``, ``check`` or ``codegen``: stop after that
  stage, write nothing), ``keep_going`` (report every failing target in full, not just the
  first), ``timing`` (the ``--timing`` report) and ``trace_memory`` (that report with
  Python's allocations traced, which slows the build: ``timing.Clock``).
- *target result*: per target, the files it produced (relative to the output folder), its
  diagnostics and, for a bug in tribuild, the traceback; for a target that cannot be
  instantiated (its entry names no layer, its args do not fit), the configuration problem
  at its line of Tribuild.toml. A target with errors produces nothing, and its previous
  outputs stay as they were.
- *build result*: the target results with what the build wrote (``report``), the files it
  generated, its timing, why each output was written, its remote cache's part, and what
  became of the CPU kernels its ternary layers run on (``cpu_kernels``).
"""

from __future__ import annotations

import os

from tribuild.base.record import record
from tribuild.config.problems import ConfigError
from tribuild.project import job_count

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.diagnostics import Diagnostic
    from tribuild.driver import timing
    from tribuild.driver.cpu_kernels import KernelOutcome
    from tribuild.driver.outputs import WriteReport
    from tribuild.driver.remote.build_cache import RemoteBuild
    from tribuild.driver.session import Project
    from tribuild.queries.report import QuerySources


@record
class Request:
    """What one build is asked to do. Made with ``Request.of`` by the command line and the
    Python API alike; the plain constructor is for tests that set fields directly."""

    targets: tuple[str, ...] = ()
    jobs: int | None = None
    opt_level: str | None = None
    stop_after: str | None = None
    keep_going: bool = False
    timing: bool = False
    trace_memory: bool = False  # with ``timing``: also trace Python allocations (slow)
    force: bool = False  # overwrite files at output paths that tribuild did not write

    @classmethod
    def of(
        cls,
        project: Project,
        *,
        targets: tuple[str, ...] = (),
        jobs: int | None = None,
        opt_level: str | None = None,
        stop_after: str | None = None,
        keep_going: bool = False,
        timing: bool = False,
        trace_memory: bool = False,
        force: bool = False,
    ) -> Request:
        """The request for ``project``: ``jobs`` None takes ``[project] jobs`` (one process
        without a Tribuild.toml), 0 is one per CPU; ``trace_memory`` implies ``timing``."""
        if jobs is None:
            jobs = project.config.jobs if project.config else 1
        return cls(
            tuple(targets),
            job_count(jobs),
            opt_level,
            stop_after,
            keep_going,
            timing or trace_memory,
            trace_memory,
            force,
        )


class TargetResult:
    __slots__ = ("name", "files", "diagnostics", "error", "problem")

    def __init__(
        self,
        name: str,
        files: tuple[str, ...] = (),
        diagnostics: tuple[Diagnostic, ...] = (),
        error: str | None = None,
    ) -> None:
        self.name, self.files, self.diagnostics, self.error = name, files, diagnostics, error
        self.problem: ConfigError | None = None  # cannot be instantiated (``_collect``)

    @property
    def failed(self) -> bool:
        return (
            self.error is not None
            or self.problem is not None
            or any(d.severity == "error" for d in self.diagnostics)
        )


class BuildResult:
    """What a build did: ``compute`` fills it in, then ``build`` (the fields past
    ``opt_level`` start empty)."""

    __slots__ = (
        "targets",
        "out_dir",
        "sources",
        "opt_level",
        "report",
        "generated",
        "timing",
        "explain",
        "inputs",
        "written_early",
        "remote",
        "cpu_kernels",
    )

    def __init__(
        self,
        targets: list[TargetResult],
        out_dir: str,
        sources: QuerySources | None = None,
        opt_level: str = "",
    ) -> None:
        self.targets, self.out_dir, self.sources = targets, out_dir, sources
        self.opt_level = opt_level  # the -O level of the targets
        self.report: WriteReport | None = None
        self.generated: dict[str, bytes] = {}
        self.timing: timing.Report | None = None
        self.explain: dict[str, list[str]] = {}  # output -> why written
        self.inputs: tuple[str, ...] = ()  # the .tri files the targets were made from
        self.written_early: tuple[str, ...] = ()  # outputs written as built (relative paths)
        self.remote: RemoteBuild | None = None  # the remote cache's part in this build
        self.cpu_kernels: KernelOutcome | None = None  # ``cpu_kernels``' step, if it ran

    @property
    def kernels_failed(self) -> bool:
        """Whether the CPU kernels failed to compile (``cpu_kernels``): the build fails, not
        its targets."""
        return self.cpu_kernels is not None and self.cpu_kernels.failed

    @property
    def failed(self) -> list[TargetResult]:
        return [t for t in self.targets if t.failed]

    @property
    def outputs(self) -> list[str]:
        """Every file the targets produced (absolute paths), written or already up to date,
        each once (targets share kernel files)."""
        return list(
            dict.fromkeys(os.path.join(self.out_dir, rel) for t in self.targets for rel in t.files)
        )

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [d for t in self.targets for d in t.diagnostics]

    def problems(self) -> ConfigError | None:
        """One ConfigError for every target that cannot be instantiated, or None."""
        found = [p for t in self.targets if t.problem for p in t.problem.problems]
        return ConfigError(found) if found else None
