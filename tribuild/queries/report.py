"""Every diagnostic of a file, and the source map that renders them.

Terms:
- *file diagnostics*: what ``tribuild check`` reports for one file: a read error, or the syntax
  errors of each item, the name-resolution errors of the file, and the checker's findings for
  each item, and the instance reports of the file's layers that can be instantiated with
  their defaults. In item order; the driver sorts by position when printing.
- *QuerySources*: the renderer's ``Source`` backed by the database, so locating a diagnostic
  reuses the memoized tokens instead of lexing again.
"""
from __future__ import annotations

from tribuild.diagnostics import Diagnostic, Label, Loc, register
from tribuild.engine import derived
from tribuild.lang.locate import char_range
from tribuild.queries.inputs import source_text
from tribuild.queries.names import scope
from tribuild.queries.semantic import item_diagnostics
from tribuild.queries.targets import default_instances_report
from tribuild.queries.syntax import item_ast, item_index, lexed, read_error

E_UNREADABLE = register("E0001", "a source file cannot be read")


@derived
def file_diagnostics(db, path: str) -> tuple[Diagnostic, ...]:
    error = read_error(db, path)
    if error is not None:
        return (Diagnostic(E_UNREADABLE, f"cannot read `{path}`: {error}",
                           Label(Loc(path, None, (0, 0)), error)),)
    out: list[Diagnostic] = []
    for entry in item_index(db, path):
        out.extend(item_ast(db, path, entry.id).diagnostics)
    out.extend(scope(db, path).diagnostics)
    for entry in item_index(db, path):
        out.extend(item_diagnostics(db, path, entry.id))
    out.extend(default_instances_report(db, path))
    return tuple(out)


class QuerySources:
    """A ``Source`` for ``tribuild.diagnostics_render`` that reads through the database."""

    def __init__(self, db):
        self.db = db

    def text(self, path: str) -> str:
        return source_text(self.db, path).text or ""

    def char_range(self, loc: Loc) -> tuple[int, int]:
        return char_range(lexed(self.db, loc.path), item_index(self.db, loc.path), loc)
