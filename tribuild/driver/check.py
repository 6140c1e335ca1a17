"""`tribuild check`: load the sources, collect diagnostics, save the database.

Terms:
- *CheckResult*: the diagnostics found (sorted by file, line, column), the files and targets
  considered, and the engine's counters for this run (queries executed / validated / reused),
  which is what makes the incremental behaviour visible to users.
"""

from __future__ import annotations

import json
import os
import re

from tribuild.base.files import read_text
from tribuild.base.record import record, replace
from tribuild.config.load import Target
from tribuild.config.locate import Locator
from tribuild.config.problems import ConfigError, Problem, token_width
from tribuild.diagnostics import Diagnostic, Label, Loc
from tribuild.driver.session import Project, open_database, save_database
from tribuild.driver.sources import load_sources, scan
from tribuild.lang import CANNOT_INSTANTIATE, EXAMPLE_INPUT, line_col
from tribuild.queries.lower import file_lowering_report, lowering_report
from tribuild.queries.names import UNKNOWN_CODES, with_import_help
from tribuild.queries.report import QuerySources, file_diagnostics
from tribuild.queries.semantic import layer_instance
from tribuild.queries.syntax import item_index, read_error
from tribuild.queries.targets import HELP, TargetReport, instance_report, target_report

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from tribuild.engine import Database


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
        diags = [
            d
            for path in reported
            for d in file_diagnostics(db, path) + file_lowering_report(db, path)
        ]
        reports = [
            (t, target_report(db, t.entry_path, t.entry_layer, t.args, t.input)) for t in targets
        ]
        problems = [
            p
            for t, r in reports
            if r.problem is not None
            for p in target_problem(project, t, r.problem).problems
        ]
        sources = QuerySources(db)
        found = [
            d
            for t, r in reports
            if r.problem is None
            for d in at_config(db, project, t, target_diagnostics(db, r), sources)
        ]
        if problems:  # every target that cannot be instantiated, at its line, and with them
            # what the other targets' lines in Tribuild.toml give: all of its mistakes at once
            raise ConfigError(
                problems
                + [
                    as_problem(project, d, sources)
                    for d in found
                    if d.primary.loc.item is None and d.primary.loc.path in sources.plain
                ]
            )
        diags += found
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


def target_diagnostics(db: Database, report: TargetReport) -> tuple[Diagnostic, ...]:
    """What `check` reports for a target: its report, and when that has no error, what code
    generation would refuse (E0601), so a target that checks clean builds."""
    if report.root is None or any(d.severity == "error" for d in report.diagnostics):
        return report.diagnostics
    return report.diagnostics + lowering_report(db, report.root)


def at_config(
    db: Database,
    project: Project,
    target: Target,
    diags: Sequence[Diagnostic],
    sources: QuerySources,
) -> tuple[Diagnostic, ...]:
    """``diags`` of a target with those whose fix is in Tribuild.toml located there: its
    example input (``input_at_config``) and its construction arguments (``args_at_config``)."""
    return input_at_config(
        project, target, args_at_config(db, project, target, diags, sources), sources
    )


def as_problem(project: Project, d: Diagnostic, sources: QuerySources) -> Problem:
    """A diagnostic located in Tribuild.toml as a configuration problem, its notes and
    second labels left out (printed beside the problems of targets that cannot be built)."""
    assert project.config is not None  # located in Tribuild.toml: there is one
    line, col = line_col(sources.text(d.primary.loc.path), d.primary.loc.span[0])
    return Problem(project.config.path, line, col, "", f"{d.message}", None, d.help)


def input_at_config(
    project: Project, target: Target, diags: Sequence[Diagnostic], sources: QuerySources
) -> tuple[Diagnostic, ...]:
    """``diags`` with each E0410 (the example input does not fit) located at the target's
    ``input`` in Tribuild.toml, where the fix is, the entry layer as its second label; the
    configuration's text goes into ``sources`` so the renderer can show the line."""
    if not any(d.code == EXAMPLE_INPUT for d in diags) or project.config is None:
        return tuple(diags)  # (a target comes from a Tribuild.toml: there is one)
    loc = _config_span(project, ("targets", target.name, "input"), sources)
    at = Label(loc, f"the example input of target `{target.name}`")
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


def _config_span(project: Project, key: tuple[str, ...], sources: QuerySources) -> Loc:
    """The Loc of the value of ``key`` in Tribuild.toml, its text put into ``sources``."""
    assert project.config is not None  # a target comes from the project's Tribuild.toml
    text = read_text(project.config.path)
    rel = os.path.relpath(project.config.path, project.root).replace(os.sep, "/")
    sources.plain[rel] = text
    line, col = Locator(text).value(key)
    start = sum(len(x) for x in text.splitlines(keepends=True)[: line - 1]) + col - 1
    return Loc(rel, None, (start, start + token_width(text[start:].split("\n", 1)[0])))


def args_at_config(
    db: Database,
    project: Project,
    target: Target,
    diags: Sequence[Diagnostic],
    sources: QuerySources,
) -> tuple[Diagnostic, ...]:
    """``diags`` with the errors that one of the target's ``args`` causes folded into one
    diagnostic at that value in Tribuild.toml, the errors in `.tri` files as its notes. An
    argument causes an instance's errors when the target with that argument left to its
    default has none (``hidden = 0``: every layer built with width 0 errs, and the fix is
    the one value). Errors no single argument explains stay where they are."""
    if not target.args or project.config is None or not any(d.notes for d in diags):
        return tuple(diags)  # (an instance's diagnostics carry their chain as notes)
    report = target_report(db, target.entry_path, target.entry_layer, target.args, target.input)
    if report.root is None:
        return tuple(diags)
    caused = {d for d in instance_report(db, report.root) if d.severity == "error"}
    if not any(d in caused for d in diags):
        return tuple(diags)
    root = report.root
    culprits = [
        (name, value)
        for name, value in target.args
        if not isinstance(
            other := layer_instance(
                db, root.path, root.item_id, tuple(a for a in target.args if a[0] != name)
            ),
            str,
        )
        and not any(d.severity == "error" for d in instance_report(db, other))
    ]
    if not culprits:
        return tuple(diags)
    folded = [d for d in diags if d in caused]
    first = folded[0]
    (name, value), *others = culprits
    shown = ", ".join(f"`{n} = {toml_value(v)}`" for n, v in culprits)
    at = _config_span(project, ("targets", target.name, "args", name), sources)
    more = f" (and {len(folded) - 1} more)" if len(folded) > 1 else ""
    one = Diagnostic(
        first.code,
        f"target `{target.name}`: {shown} does not fit layer `{root.name}`",
        Label(at, first.message + more),
        tuple(
            Label(_config_span(project, ("targets", target.name, "args", n), sources))
            for n, _ in others
        ),
        f"give `{name}` a value that fits, or remove it from `args` to use the layer's default",
        tuple(f"{_where(sources, d)}: {d.code}: {d.message}" for d in folded),
    )
    out = [d for d in diags if d not in caused]
    return (one, *out)


def _where(sources: QuerySources, d: Diagnostic) -> str:
    start = sources.char_range(d.primary.loc)[0]
    line, col = line_col(sources.text(d.primary.loc.path), start)
    return f"{d.primary.loc.path}:{line}:{col}"


def toml_value(value: object) -> str:
    """A construction argument as Tribuild.toml writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


_ARGUMENT = re.compile(r"`([^`]+)`")


def target_problem(project: Project, target: Target, problem: str) -> ConfigError:
    """The configuration error for a target that cannot be instantiated: at the value in its
    ``args`` that the problem names, else at ``args`` when the layer was found but they do
    not fit it, else at its ``entry``."""
    config = project.config
    assert config is not None  # a target comes from the project's Tribuild.toml
    text = read_text(config.path)
    field = "args" if target.args and problem.startswith(CANNOT_INSTANTIATE) else "entry"
    key: tuple[str, ...] = ("targets", target.name, field)
    if field == "args":
        given = dict(target.args)
        named = [n for n in _ARGUMENT.findall(problem) if n in given]
        key += tuple(named[:1])
    locator = Locator(text)
    # a keyword the layer does not have is wrong in its name; any other, in its value
    at = locator.key if len(key) > 3 and "is not a parameter" in problem else locator.value
    line, col = at(key)
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


def sort_diagnostics(diags: list[Diagnostic], db: Database) -> list[Diagnostic]:
    """``diags`` without repeats, by file, then position, code and message (how `check` and
    `build` print them). A position is the index of its first token in the file, from the
    items' token ranges (``item_index``), so sorting lexes nothing."""
    starts: dict[str, dict[str, int]] = {}  # path -> item id -> its first token

    def key(d: Diagnostic) -> tuple[str, int, str, str]:
        loc = d.primary.loc
        if loc.item is None:
            base = 0  # also where a file is not `.tri` (Tribuild.toml): never lexed as one
        else:
            if loc.path not in starts:
                starts[loc.path] = {e.id: e.start for e in item_index(db, loc.path)}
            base = starts[loc.path].get(loc.item, 0)
        return (loc.path, base + max(loc.span[0], 0), d.code, d.message)

    return sorted(dict.fromkeys(diags), key=key)
