"""The source map that renders diagnostics, and every diagnostic of a file.

Terms:
- *QuerySources*: the renderer's ``Source`` backed by the database, so locating a diagnostic
  reuses the memoized tokens instead of lexing again.
- *file diagnostics* (``file_diagnostics``): what ``tribuild check`` reports for one file; the
  query is declared in ``targets``, beside the target report that includes it, and read from
  here by the driver.
"""

from __future__ import annotations

from tribuild.diagnostics import Loc
from tribuild.lang import char_range
from tribuild.queries.inputs import source_text
from tribuild.queries.syntax import item_index, lexed
from tribuild.queries.targets import file_diagnostics

TYPE_CHECKING = False
if TYPE_CHECKING:
    from tribuild.engine import Database

__all__ = ["QuerySources", "file_diagnostics"]


class QuerySources:
    """A ``Source`` for ``tribuild.diagnostics_render`` that reads through the database.
    ``plain`` holds files that are not `.tri` (Tribuild.toml, where a target's example input
    is written): path -> text; a Loc in one of them spans characters, not tokens."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.plain: dict[str, str] = {}

    def text(self, path: str) -> str:
        if path in self.plain:
            return self.plain[path]
        return source_text(self.db, path).text or ""

    def char_range(self, loc: Loc) -> tuple[int, int]:
        if loc.path in self.plain:
            return loc.span
        return char_range(lexed(self.db, loc.path), item_index(self.db, loc.path), loc)
