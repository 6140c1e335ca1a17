"""Diagnostics: what the compiler tells the user about their program.

Terms:
- *Loc*: where something is, independent of whitespace and comments: a file (project-relative
  path), an item id within it (None for a file-level location) and a token span, relative to
  the item's first token (or to the file's first token when ``item`` is None).
- *Label*: a Loc with a short message; a diagnostic has one primary label and any number of
  secondary ones (e.g. "first defined here").
- *code*: a stable identifier (``E0102``) registered in ``CODES`` with a one-line summary;
  docs/language.md shows an example for each.

Diagnostics are plain values: stages return them, never raise them. Rendering (text with
source excerpts and carets, or JSON) happens at the edge, given a source map that turns
Locs into line and column.
"""

from __future__ import annotations

from tribuild.base.record import record

Span = tuple[int, int]


@record
class Loc:
    path: str
    item: str | None
    span: Span


@record
class Label:
    loc: Loc
    message: str = ""


@record
class Diagnostic:
    code: str
    message: str
    primary: Label
    secondary: tuple[Label, ...] = ()
    help: str | None = None
    notes: tuple[str, ...] = ()  # e.g. the chain of instantiations that led here
    severity: str = "error"  # "error" or "warning"


CODES: dict[str, str] = {}
"""code -> one-line summary. Each stage registers its own codes with ``register``."""


def register(code: str, summary: str) -> str:
    if CODES.get(code, summary) != summary:
        raise ValueError(f"diagnostic code {code} registered twice")
    CODES[code] = summary
    return code


def closest(word: str, candidates) -> str | None:
    """The candidate most like ``word`` by difflib's ratio (at least 0.6), if any. difflib is
    imported here, when a name is not found: not on every build (~1 ms)."""
    import difflib

    close = difflib.get_close_matches(word, candidates, n=1)
    return close[0] if close else None


def did_you_mean(word: str, candidates) -> str | None:
    """The help line suggesting the candidate closest to ``word``, if one is close."""
    close = closest(word, candidates)
    return f"did you mean `{close}`?" if close else None
