"""`tribuild check`: load the sources, collect diagnostics, save the database.

Terms:
- *CheckResult*: the diagnostics found (sorted by file, line, column), the files and targets
  considered, and the engine's counters for this run (queries executed / validated / reused),
  which is what makes the incremental behaviour visible to users.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from tribuild.build.sources import load_sources, scan
from tribuild.build.session import Project, open_database, save_database
from tribuild.diagnostics import Diagnostic
from tribuild.queries.report import QuerySources, file_diagnostics


@dataclass
class CheckResult:
    diagnostics: list[Diagnostic]
    files: tuple[str, ...]
    sources: QuerySources
    executed: int = 0
    validated: int = 0
    hits: int = 0
    store: str = ""
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        return sum(d.severity == "error" for d in self.diagnostics)


def check(project: Project, paths: tuple[str, ...] = ()) -> CheckResult:
    db = open_database(project)
    files = scan(project.root, _folders(project, paths))
    with db.log() as log:
        closure = load_sources(db, project.root, files)
        diags = [d for path in closure for d in file_diagnostics(db, path)]
    sources = QuerySources(db)
    result = CheckResult(_sorted(diags, sources), closure, sources, len(log.executed),
                         len(log.validated), len(log.hits), db.store_report.status)
    save_database(db, project)
    return result


def _folders(project: Project, paths: tuple[str, ...]) -> tuple[str, ...]:
    if paths:
        return tuple(os.path.relpath(os.path.abspath(p), project.root) for p in paths)
    return project.config.sources if project.config else (".",)


def _sorted(diags: list[Diagnostic], sources: QuerySources) -> list[Diagnostic]:
    def key(d: Diagnostic):
        return (d.primary.loc.path, sources.char_range(d.primary.loc)[0], d.code, d.message)
    return sorted(dict.fromkeys(diags), key=key)
