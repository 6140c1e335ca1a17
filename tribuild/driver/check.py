"""`tribuild check`: load the sources, collect diagnostics, save the database.

Terms:
- *CheckResult*: the diagnostics found (sorted by file, line, column), the files and targets
  considered, and the engine's counters for this run (queries executed / validated / reused),
  which is what makes the incremental behaviour visible to users.
"""

from __future__ import annotations

import os

from tribuild.base.files import read_text
from tribuild.base.record import record, replace
from tribuild.config.load import Target
from tribuild.config.locate import Locator
from tribuild.config.problems import ConfigError, Problem, token_width
from tribuild.diagnostics import Diagnostic, Label, Loc
from tribuild.driver.session import Project, open_database, save_database
from tribuild.driver.sources import load_sources, scan
from tribuild.lang import CANNOT_INSTANTIATE, EXAMPLE_INPUT
from tribuild.queries.lower import lowering_report
from tribuild.queries.names import UNKNOWN_CODES, with_import_help
from tribuild.queries.report import QuerySources, file_diagnostics
from tribuild.queries.syntax import item_index, read_error
from tribuild.queries.targets import HELP, TargetReport, target_report


@record
class CheckResult:
    diagnostics: list[Diagnostic]
    files: tuple[str, ...]
    targets: int
    sources: QuerySources
    executed: int = 0
    validated: int = 0
    hits: int = 0
    store: str = ""

    @property
    def errors(self) -> int:
        return sum(d.severity == "error" for d in self.diagnostics)


def check(project: Project, paths: tuple[str, ...] = ()) -> CheckResult:
    """Diagnostics of every file (and, without explicit paths, of every target) of a project.
    Raises ConfigError when a target cannot be instantiated."""
    db = open_database(project)
    files = scan(project.root, _folders(project, paths))
    targets = project.config.targets if project.config and not paths else ()
    with db.log() as log:
        closure = load_sources(db, project.root, files + tuple(t.entry_path for t in targets))
        reported = [p for p in closure if p in files or read_error(db, p) is None]
        diags = [d for path in reported for d in file_diagnostics(db, path)]
        reports = [
            (t, target_report(db, t.entry_path, t.entry_layer, t.args, t.input)) for t in targets
        ]
        problems = [
            p
            for t, r in reports
            if r.problem is not None
            for p in target_problem(project, t, r.problem).problems
        ]
        if problems:  # every target that cannot be instantiated, at its line
            raise ConfigError(problems)
        sources = QuerySources(db)
        diags += [
            d
            for t, r in reports
            for d in input_at_config(project, t, target_diagnostics(db, r), sources)
        ]
        defining = closure  # where an unknown name may be defined: with PATHS, the project too
        if paths and project.config and any(d.code in UNKNOWN_CODES for d in diags):
            defining = load_sources(db, project.root, scan(project.root, project.config.sources))
        diags = with_import_help(db, diags, defining)
    result = CheckResult(
        sort_diagnostics(diags, db),
        closure,
        len(targets),
        sources,
        len(log.executed),
        len(log.validated),
        len(log.hits),
        db.store_report.status,
    )
    save_database(db, project)
    return result


def target_diagnostics(db, report: TargetReport) -> tuple[Diagnostic, ...]:
    """What `check` reports for a target: its report, and when that has no error, what code
    generation would refuse (E0601), so a target that checks clean builds."""
    if report.root is None or any(d.severity == "error" for d in report.diagnostics):
        return report.diagnostics
    return report.diagnostics + lowering_report(db, report.root)


def input_at_config(
    project: Project, target: Target, diags, sources: QuerySources
) -> tuple[Diagnostic, ...]:
    """``diags`` with each E0410 (the example input does not fit) located at the target's
    ``input`` in Tribuild.toml, where the fix is, the entry layer as its second label; the
    configuration's text goes into ``sources`` so the renderer can show the line."""
    if not any(d.code == EXAMPLE_INPUT for d in diags) or project.config is None:
        return tuple(diags)  # (a target comes from a Tribuild.toml: there is one)
    text = read_text(project.config.path)
    rel = os.path.relpath(project.config.path, project.root).replace(os.sep, "/")
    sources.plain[rel] = text
    line, col = Locator(text).value(("targets", target.name, "input"))
    start = sum(len(x) for x in text.splitlines(keepends=True)[: line - 1]) + col - 1
    end = start + token_width(text[start:].split("\n", 1)[0])
    at = Label(Loc(rel, None, (start, end)), f"the example input of target `{target.name}`")
    return tuple(
        replace(
            d,
            primary=at,
            secondary=(Label(d.primary.loc, d.primary.message), *d.secondary),
        )
        if d.code == EXAMPLE_INPUT
        else d
        for d in diags
    )


def target_problem(project: Project, target: Target, problem: str) -> ConfigError:
    """The configuration error for a target that cannot be instantiated: at its ``args`` when
    the layer was found but they do not fit it, else at its ``entry``."""
    config = project.config
    assert config is not None  # a target comes from the project's Tribuild.toml
    text = read_text(config.path)
    field = "args" if target.args and problem.startswith(CANNOT_INSTANTIATE) else "entry"
    line, col = Locator(text).value(("targets", target.name, field))
    expected = (
        "construction arguments that fit the layer's parameters"
        if field == "args"
        else "a layer of that file whose construction arguments fit `args`"
    )
    problem, _, help = problem.partition(HELP)
    return ConfigError(
        [
            Problem(
                config.path,
                line,
                col,
                f"targets.{target.name}.{field}",
                f"target `{target.name}` cannot be built: {problem}",
                expected,
                help or None,
            )
        ]
    )


def _folders(project: Project, paths: tuple[str, ...]) -> tuple[str, ...]:
    """The paths to check, relative to the project root (ConfigError for a path that is
    missing, outside the project, or neither a folder nor a .tri file)."""
    if not paths:
        return project.config.sources if project.config else (".",)
    problems = [
        Problem(p, None, None, "", why)
        for p in paths
        if (why := _not_checkable(project.root, p)) is not None
    ]
    if problems:
        raise ConfigError(problems)
    return tuple(os.path.relpath(os.path.abspath(p), project.root) for p in paths)


def _not_checkable(root: str, path: str) -> str | None:
    if not os.path.exists(path):
        return "no such file or folder"
    if os.path.relpath(os.path.abspath(path), root).startswith(".."):
        return f"is outside the project, whose root is {root}"
    if not os.path.isdir(path) and not path.endswith(".tri"):
        return "is not a .tri file or a folder"
    return None


def sort_diagnostics(diags: list[Diagnostic], db) -> list[Diagnostic]:
    """``diags`` without repeats, by file, then position, code and message (how `check` and
    `build` print them). A position is the index of its first token in the file, from the
    items' token ranges (``item_index``), so sorting lexes nothing."""
    starts: dict[str, dict] = {}

    def key(d: Diagnostic):
        loc = d.primary.loc
        if loc.item is None:
            base = 0  # also where a file is not `.tri` (Tribuild.toml): never lexed as one
        else:
            if loc.path not in starts:
                starts[loc.path] = {e.id: e.start for e in item_index(db, loc.path)}
            base = starts[loc.path].get(loc.item, 0)
        return (loc.path, base + max(loc.span[0], 0), d.code, d.message)

    return sorted(dict.fromkeys(diags), key=key)
