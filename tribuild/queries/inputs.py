"""The inputs of a build: the only values that come from outside (DESIGN invariant 1).

Terms:
- *path*: a ``.tri`` file's path relative to the project root, in POSIX form
  (``models/resnet.tri``). Queries never see absolute paths.
- *SourceText*: what the driver read at a path: the text, or why there is none (missing,
  not UTF-8, a directory...). A file that cannot be read is a diagnostic, not a crash.
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.engine import input_query


@record
class SourceText:
    text: str | None
    error: str | None = None


@input_query
def source_text(db, path: str) -> SourceText:
    """The text of one file; set by the driver or the watcher."""
    raise NotImplementedError("an input query: its values are set, never computed")
