"""`tribuild build`: build the targets of a project into its output folder.

The request and the results are ``results``' (*request*, *target result*); what else a
build does has its own module: writing the outputs (``outputs``), writing them early
(``early``), saying why each was written (``explain.why_written``) and the manifest of a
whole build (``snapshot``).

A failure never stops the other targets: each is its own unit (DESIGN invariant 4). A
build whose targets hold ternary layers also makes the CPU kernels ready for this machine
(``cpu_kernels``): their compiler's failure fails the build, not its targets. A build
with targets that cannot be instantiated writes the others, saves the store, then raises one
ConfigError naming every such target (exit 2).

The build holds the project lock throughout. A build that writes outputs forgets the
manifest first and writes it again only when every requested target built, so a failed or
killed build is never taken for an up-to-date one; one that stops early or dumps (writing
nothing) leaves it as it is.

With workers (``--jobs N`` on a clean build), each process writes the files of the targets
it built as soon as they are built (``early``); ``write_result`` then finds them holding
their bytes, records them and deletes what is stale, as for any build.
"""

from __future__ import annotations

import os
from functools import partial

from tribuild.config.load import Target
from tribuild.config.problems import ConfigError, Problem
from tribuild.driver import cache, depfile, explain, outputs, timing
from tribuild.driver import progress as progress_mod
from tribuild.driver.check import at_config, sort_diagnostics, target_problem
from tribuild.driver.cpu_kernels import KernelStep
from tribuild.driver.early import EarlyWriter
from tribuild.driver.lock import project_lock
from tribuild.driver.noop import manifest
from tribuild.driver.pool.scheduler import run_units
from tribuild.driver.pool.units import Outcome, Unit
from tribuild.driver.results import BuildResult, Request, TargetResult
from tribuild.driver.session import Project, open_database, save_database
from tribuild.driver.snapshot import manifest_of
from tribuild.driver.sources import load_sources, scan
from tribuild.project import CONFIG_FILE
from tribuild.queries.inputs import source_text
from tribuild.queries.names import UNKNOWN_CODES, imports, with_import_help
from tribuild.queries.report import QuerySources
from tribuild.queries.syntax import item_ast, item_index
from tribuild.queries.targets import target_report
from tribuild.remote import settings as remote_settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from tribuild.diagnostics import Diagnostic
    from tribuild.driver.remote.build_cache import Hit, RemoteBuild
    from tribuild.engine import Database, Query
    from tribuild.queries.codegen import TargetBuild
    from tribuild.queries.targets import TargetReport

    # what a unit's query gives: a target's build, or its report when stopping after the check
    UnitValue = TargetBuild | TargetReport

STAGES = ("parse", "check", "codegen")


def target_build_query() -> Query:
    """The ``target_build`` query (``tribuild.queries.codegen``), imported when first asked
    for: a build that stops after the check loads no code generation."""
    from tribuild.queries.codegen import target_build

    return target_build


def select(project: Project, names: tuple[str, ...]) -> tuple[Target, ...]:
    """The configured targets named (all of them for no names); ConfigError otherwise."""
    config = project.config
    if config is None:
        raise ConfigError(
            [
                Problem(
                    os.path.join(project.root, CONFIG_FILE),
                    None,
                    None,
                    "",
                    "no Tribuild.toml here or in any parent folder",
                    help="`tribuild init` writes a starter project",
                )
            ]
        )
    known = {t.name: t for t in config.targets}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            [
                Problem(
                    config.path,
                    None,
                    None,
                    "targets",
                    f"no target named `{unknown[0]}`",
                    help="targets: " + ", ".join(known) if known else None,
                )
            ]
        )
    return tuple(known[n] for n in dict.fromkeys(names)) if names else config.targets


def build(
    project: Project,
    request: Request = Request(),
    show: progress_mod.Quiet | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> BuildResult:
    """Build ``request`` in ``project`` (ConfigError for configuration mistakes)."""
    targets = select(project, request.targets)
    show = show or progress_mod.Quiet()
    config = project.configured
    with (
        timing.Clock(request.timing, request.trace_memory) as clock,
        project_lock(project.cache_dir, on_wait),
    ):
        if request.stop_after is None:  # a build that writes nothing leaves it true
            manifest.forget(project.cache_dir)
        remote = _remote(project, request)
        with clock.stage("load cache"):
            db = open_database(project)
        kernels: KernelStep | None = None
        try:
            with db.log(queries=(_unit_query(request),)) as log:  # what ``why_written`` needs
                result, units, outcomes = compute(
                    db,
                    project,
                    targets,
                    request,
                    show,
                    clock,
                    write=request.stop_after is None,
                    remote=remote,
                )
                if request.stop_after is None:
                    # a compiler the step starts runs beside the writing and the saving
                    with clock.stage("cpu kernels"):
                        jobs = request.jobs or 1
                        kernels = KernelStep(project.cache_dir, remote, show, jobs)
                        kernels.begin(result)
                    with clock.stage("write outputs"):
                        write_result(project, result, request.force)
                if remote is not None:
                    with clock.stage("remote cache"):
                        remote.upload(db, _built_here(result))
            if result.report is not None:
                keys = {u.name: (u.query, u.args) for u in units}
                result.explain = explain.why_written(db, keys, result, log.executed)
                explain.record(project.cache_dir, project.root, result.out_dir, result.explain)
            with clock.stage("save cache"):
                taken = None  # while the save's helper works, if any
                if not result.failed and request.stop_after is None:
                    taken = manifest_of(db, project, request, result)
                save_database(db, project)
                cache.evict(project.cache_dir, config.cache_max_bytes)
            if kernels is not None:
                with clock.stage("cpu kernels"):
                    result.cpu_kernels = kernels.end()
            if taken is not None and not result.kernels_failed:
                with clock.stage("save cache"):  # written last: it vouches for a whole build
                    manifest.write(project.cache_dir, taken)
        finally:
            db.end_apart()  # a helper the save did not take (``compute``)
            if remote is not None:
                from tribuild.driver.remote.build_cache import finish

                finish(remote, project.cache_dir)
    result.timing = clock.report(db, outcomes)
    problems = result.problems()
    if problems is not None:
        raise problems
    return result


def compute(
    db: Database,
    project: Project,
    targets: tuple[Target, ...],
    request: Request,
    show: progress_mod.Quiet,
    clock: timing.Clock,
    write: bool = False,
    remote: RemoteBuild | None = None,
) -> tuple[BuildResult, list[Unit], dict[str, Outcome]]:
    """Read the sources from disk into ``db`` (an open database, kept by the caller) and
    build ``targets`` in it: the result, the units and their outcomes. Nothing is written,
    unless ``write``: then a build with workers writes its targets' outputs as they are
    built (``write_result`` must follow) and, once its units are built, starts the next
    save's argument table in a helper (``Database.save_apart``: the save must follow).
    ``remote``: the build's ``RemoteBuild``; the targets it holds are taken from it, not
    built."""
    config = project.configured
    import_lists = None
    if remote is not None:  # its import lists are read with the sources
        import_lists = remote.imports.batch
        if remote.settings.read:
            with clock.stage("remote cache"):
                remote.link.open()  # the ``redis`` import, timed as the remote's
    with clock.stage("read sources"):
        entries = tuple(t.entry_path for t in targets)
        load_sources(db, project.root, scan(project.root, config.sources) + entries, import_lists)
    opt = request.opt_level or config.opt_level
    result = BuildResult([], project.out_dir, QuerySources(db), opt_level=opt)
    result.remote = remote
    hits: dict[str, Hit] = {}
    if remote is not None:
        with clock.stage("remote cache"):
            hits = remote.lookup(db, targets, opt)
    emit = EarlyWriter(project, targets, result.out_dir, request.force) if write else None
    here = [t for t in targets if t.name not in hits]
    units, outcomes = run(db, here, request, opt, show, clock, emit)
    with clock.stage("collect outputs"):
        _collect(db, project, targets, outcomes, result, request, hits)
    result.written_early = tuple(sorted({rel for o in outcomes.values() for rel in o.emitted}))
    return result, units, outcomes


def write_result(project: Project, result: BuildResult, force: bool = False) -> None:
    """Write the files ``compute`` produced into the output folder and delete stale ones
    (``outputs.write_outputs``); failed targets keep their previous outputs. Files written
    early count as written."""
    record = outputs.Record.load(result.out_dir)
    produced = {t.name: t.files for t in result.targets if not t.failed}
    known = {t.name for t in project.configured.targets}
    result.report = outputs.write_outputs(
        result.out_dir,
        result.generated,
        record,
        produced,
        known,
        frozenset(result.written_early),
        force,
    )


def _remote(project: Project, request: Request) -> RemoteBuild | None:
    """The remote cache's part in a build that writes outputs (``remote.build_cache``), or
    None; its ``redis`` client is imported only when a remote is configured."""
    if request.stop_after is not None or project.config is None:
        return None
    if remote_settings(project.config.remote) is None:
        return None
    from tribuild.driver.remote.build_cache import for_build

    return for_build(project.config.remote, project.cache_dir)


def _built_here(
    result: BuildResult,
) -> dict[str, tuple[dict[str, bytes], tuple[Diagnostic, ...]]]:
    """Each target this build compiled without errors (not taken from the remote): its
    files without the depfile, and its diagnostics."""
    hits: dict[str, Hit] = result.remote.hits if result.remote is not None else {}
    return {
        t.name: (
            {rel: result.generated[rel] for rel in t.files if rel != f"{t.name}.d"},
            t.diagnostics,
        )
        for t in result.targets
        if not t.failed and t.files and t.name not in hits
    }


def _jobs(db: Database, request: Request) -> int:
    """Workers for this build: ``request.jobs`` when starting without a valid store (a clean
    build), else 1: re-validating a loaded store in this process is cheap, and a worker's
    export and merge would cost more than the little it recomputes."""
    return request.jobs or 1 if db.store_report.status != "loaded" else 1


def _units(db: Database, targets: Sequence[Target], request: Request, opt: str) -> list[Unit]:
    """One unit per target: its ``target_build`` (its ``target_report`` when stopping after
    the check), with the prelude ``_file_checks``. None when stopping after parsing.
    A worker computes a unit whole: decoding another worker's results of a shared file
    costs about as much as recomputing them. The cost estimate is the size of the entry
    file: the files it imports are known only once it is lexed, by the unit."""
    if request.stop_after == "parse":
        return []
    query = _unit_query(request)
    units = []
    for t in targets:
        args: tuple[object, ...] = (t.entry_path, t.entry_layer, t.args, t.input)
        if query is not target_report:
            args = (t.name,) + args + (opt,)
        size = len(source_text(db, t.entry_path).text or "")
        units.append(
            Unit(t.name, query, args, cost=float(size), prelude=partial(_file_checks, t.entry_path))
        )
    return units


def _unit_query(request: Request) -> Query:
    """The query of every unit (the key of each target)."""
    return target_report if request.stop_after == "check" else target_build_query()


def _file_checks(entry_path: str, db: Database) -> list[tuple[Query, tuple[str]]]:
    """The keys of the ``imports`` of each file of the import closure of ``entry_path``:
    the driver reads them after the units, so they come with a worker's results."""
    return [(imports, (p,)) for p in depfile.import_closure(db, entry_path)]


def run(
    db: Database,
    targets: Sequence[Target],
    request: Request,
    opt: str,
    show: progress_mod.Quiet,
    clock: timing.Clock,
    emit: EarlyWriter | None = None,
) -> tuple[list[Unit], dict[str, Outcome]]:
    """The units of ``targets`` and their outcomes (sources must be loaded); ``emit`` is
    the step after each unit of a build with workers (``scheduler.run_units``)."""
    units = _units(db, targets, request, opt)
    if not units:
        return units, {}
    with clock.stage("build units"):
        show.start(len(units))
        try:
            outcomes, clock.extra_stats, clock.workers = run_units(
                db, units, _jobs(db, request), show, emit, save_next=emit is not None
            )
        finally:
            show.stop()
    return units, outcomes


def _collect(
    db: Database,
    project: Project,
    targets: tuple[Target, ...],
    outcomes: dict[str, Outcome],
    result: BuildResult,
    request: Request,
    hits: dict[str, Hit] | None = None,
) -> None:
    """Fill ``result`` from the outcomes and the remote's ``hits`` (target -> ``Hit``): its
    targets and the files they generate."""
    files: dict[str, bytes] = {}
    result.inputs = tuple(sorted({p for t in targets for p in _closure(db, result, t)}))
    for t in targets:
        if hits and t.name in hits:
            hit = hits[t.name]
            target = TargetResult(t.name, diagnostics=hit.diagnostics)
            result.targets.append(target)
            closure = _closure(db, result, t)
            mine = hit.files | depfile_file(db, project, t, result.out_dir, closure)
        else:
            target, value = target_result(db, t, outcomes, request.stop_after)
            assert result.sources is not None and project.config is not None  # set by compute
            target.diagnostics = at_config(db, project, t, target.diagnostics, result.sources)
            if any(d.code in UNKNOWN_CODES for d in target.diagnostics):
                sources = scan(project.root, project.config.sources)
                target.diagnostics = tuple(with_import_help(db, target.diagnostics, sources))
            result.targets.append(target)
            if value is not None and value.problem is not None:
                target.problem = target_problem(project, t, value.problem)
            if request.stop_after in ("parse", "check") or target.failed:
                continue
            # past the check, a unit's query is ``target_build``
            mine = target_files(db, project, t, value, result.out_dir)  # type: ignore[arg-type]
        for rel, data in mine.items():
            if files.setdefault(rel, data) != data:
                raise RuntimeError(f"two targets generate different `{rel}`")
        target.files = tuple(sorted(mine))
    result.generated = files


def target_result(
    db: Database, t: Target, outcomes: dict[str, Outcome], stop_after: str | None
) -> tuple[TargetResult, UnitValue | None]:
    """(TargetResult, the value of its unit or None) of target ``t`` after ``run``. Its
    diagnostics are those of the files of its import closure and its own (``judged``)."""
    if stop_after == "parse":
        return TargetResult(t.name, diagnostics=_syntax(db, t.entry_path)), None
    got = outcomes[t.name]
    if got.error:
        return TargetResult(t.name, error=got.error), None
    value: UnitValue = got.value  # type: ignore[assignment]  # the unit's query's value
    return judged(db, t, value), value


def judged(db: Database, t: Target, value: UnitValue) -> TargetResult:
    """The TargetResult of target ``t`` whose unit gave ``value``: its diagnostics (those of
    the items it reaches, ``target_report``), in the order `check` prints them. An error
    elsewhere in the same files is `check`'s to report; it does not fail this target."""
    diags = list(value.diagnostics)
    if len(diags) > 1:
        diags = sort_diagnostics(diags, db)
    return TargetResult(t.name, diagnostics=tuple(diags))


def generated(value: TargetBuild) -> dict[str, bytes]:
    """The files of a ``TargetBuild``: relative path -> bytes."""
    return {f.relpath: f.text.encode("utf-8") for f in value.files}


def target_files(
    db: Database, project: Project, t: Target, value: TargetBuild, out_dir: str
) -> dict[str, bytes]:
    """Every file target ``t`` produces from its ``TargetBuild``: the generated ones and
    its depfile (relative path -> bytes)."""
    return generated(value) | depfile_file(db, project, t, out_dir)


def depfile_file(
    db: Database, project: Project, t: Target, out_dir: str, closure: tuple[str, ...] | None = None
) -> dict[str, bytes]:
    """Target ``t``'s depfile: ``{relative path: bytes}`` (``closure``: the import closure of
    its entry, when it is known already)."""
    module = os.path.relpath(outputs.resolve(out_dir, f"{t.name}.py"), project.root)
    config_name = os.path.relpath(project.configured.path, project.root)
    if closure is None:
        closure = depfile.import_closure(db, t.entry_path)
    text = depfile.render(module, closure + (config_name,))
    return {f"{t.name}.d": text.encode()}


def _closure(db: Database, result: BuildResult, t: Target) -> tuple[str, ...]:
    """The import closure of ``t``'s entry: for a target taken from the remote, the one its
    action key digested (from the remote's import lists: no file lexed); else the queries'."""
    remote = result.remote
    if remote is not None and t.name in remote.hits:
        return remote.closures[t.entry_path]
    return depfile.import_closure(db, t.entry_path)


def _syntax(db: Database, entry_path: str) -> tuple[Diagnostic, ...]:
    return tuple(
        d
        for path in depfile.import_closure(db, entry_path)
        for e in item_index(db, path)
        for d in item_ast(db, path, e.id).diagnostics
    )


__all__ = ["BuildResult", "Request", "TargetResult", "build", "compute", "select", "write_result"]
