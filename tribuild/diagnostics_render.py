"""Rendering diagnostics for people (rustc-style text) and for tools (JSON-ready dicts).

Terms:
- *source*: anything with ``text(path) -> str`` and ``char_range(loc) -> (start, end)``;
  ``TextSources`` builds one from file texts, the query layer supplies a memoized one.
- *snippet*: the source lines a label covers, under a gutter of line numbers, with ``^``
  under the primary label's characters and ``-`` under a secondary label's. A secondary
  label in another file gets its own ``--> path:line:col`` header; one on the line just
  shown gets a second marker line under it.

The first line of a rendering is exactly ``path:line:col: severity[CODE]: message`` so
editors and CI annotators can parse it. Colour (ANSI) is off unless asked for.
"""

from __future__ import annotations

from collections.abc import Mapping

from tribuild.base.printable import printable
from tribuild.base.record import record
from tribuild.diagnostics import Diagnostic, Label, Loc
from tribuild.lang import SourceMap, line_col

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object  # at run time Source is only documentation: nothing subclasses it

_MAX_LINES = 4  # a longer span shows its first two and last two lines
_ANSI = {
    "error": "\x1b[1;31m",
    "warning": "\x1b[1;33m",
    "gutter": "\x1b[1;34m",
    "secondary": "\x1b[1;34m",
    "bold": "\x1b[1m",
    "reset": "\x1b[0m",
}


class Source(Protocol):
    def text(self, path: str) -> str: ...

    def char_range(self, loc: Loc) -> tuple[int, int]: ...


class TextSources:
    """A ``Source`` over file texts (a missing file reads as empty)."""

    __slots__ = ("texts", "_maps")

    def __init__(self, texts: Mapping[str, str]) -> None:
        self.texts = texts
        self._maps: dict[str, SourceMap] = {}

    def text(self, path: str) -> str:
        return self.texts.get(path, "")

    def char_range(self, loc: Loc) -> tuple[int, int]:
        smap = self._maps.get(loc.path)
        if smap is None:
            smap = self._maps[loc.path] = SourceMap(self.text(loc.path))
        return smap.char_range(loc)


@record
class _Place:
    """Where a label lands: its file's text and 1-based start and end (exclusive) positions."""

    text: str
    start: int
    end: int
    line: int
    col: int
    end_line: int
    end_col: int


def _place(loc: Loc, source: Source) -> _Place:
    """The end is one column past the span's last character, on that character's line."""
    text = source.text(loc.path)
    start, end = source.char_range(loc)
    line, col = line_col(text, start)
    if end <= start:
        return _Place(text, start, end, line, col, line, col)
    end_line, last_col = line_col(text, end - 1)
    return _Place(text, start, end, line, col, end_line, last_col + 1)


def to_json(diag: Diagnostic, source: Source) -> dict:
    """The diagnostic as plain data; ``end_col`` is one past the span's last character."""

    def located(label: Label) -> dict:
        at = _place(label.loc, source)
        return {
            "path": label.loc.path,
            "line": at.line,
            "col": at.col,
            "end_line": at.end_line,
            "end_col": at.end_col,
            "label": label.message,
        }

    out: dict[str, object] = {"code": diag.code, "severity": diag.severity, "message": diag.message}
    out.update(located(diag.primary))
    out["secondary"] = [located(label) for label in diag.secondary]
    out["help"] = diag.help
    out["notes"] = list(diag.notes)
    return out


def render_text(diag: Diagnostic, source: Source, color: bool = False) -> str:
    """rustc-style text: the location line, source snippets with carets, notes and help."""
    paint = _painter(color)
    labels = [(diag.primary, _place(diag.primary.loc, source), True)]
    labels += [(label, _place(label.loc, source), False) for label in diag.secondary]
    width = max(len(str(at.end_line)) for _, at, _ in labels)
    pad = " " * width
    first = labels[0][1]
    head = f"{printable(diag.primary.loc.path)}:{first.line}:{first.col}: "
    lines = [
        head
        + paint(f"{diag.severity}[{diag.code}]", diag.severity)
        + paint(f": {printable(diag.message)}", "bold")
    ]
    shown = None  # (path, line) of the last single-line snippet
    for label, at, primary in labels:
        here = (label.loc.path, at.line) if at.line == at.end_line else None
        if here is not None and here == shown:  # another marker line under the same line
            lines += _snippet(label.message, at, primary, width, paint)[1:]
            continue
        if label.loc.path != diag.primary.loc.path:
            where = f"{printable(label.loc.path)}:{at.line}:{at.col}"
            lines.append(f"{pad}{paint('-->', 'gutter')} {where}")
        lines.append(paint(f"{pad} |", "gutter"))
        lines += _snippet(label.message, at, primary, width, paint)
        shown = here
    for note in diag.notes:
        lines.append(f"{pad} {paint('=', 'gutter')} note: {printable(note)}")
    if diag.help:
        lines.append(f"{pad} {paint('=', 'gutter')} help: {printable(diag.help)}")
    return "\n".join(lines) + "\n"


def _snippet(message: str, at: _Place, primary: bool, width: int, paint) -> list[str]:
    """Source lines of one label, each followed by its marker line."""
    source_lines = at.text.split("\n")
    numbers: list[int | None] = list(range(at.line, at.end_line + 1))
    if len(numbers) > _MAX_LINES:
        numbers = numbers[:2] + [None] + numbers[-2:]
    mark, style = ("^", "error") if primary else ("-", "secondary")
    out = []
    for number in numbers:
        if number is None:
            out.append(paint("...", "gutter"))
            continue
        line = source_lines[number - 1] if number <= len(source_lines) else ""
        lo = at.col - 1 if number == at.line else len(line) - len(line.lstrip())
        hi = at.end_col - 1 if number == at.end_line else len(line)
        gutter = paint(f"{number:>{width}} |", "gutter")
        out.append(f"{gutter} {printable(line)}".rstrip())  # escaped: columns move with it
        indent = "".join(c if c == "\t" else " " for c in printable(line[:lo]))
        shown = line[lo:hi]  # its escapes widen the markers under it
        markers = mark * max(hi - lo + len(printable(shown)) - len(shown), 1)
        tail = f" {printable(message)}" if message and number == numbers[-1] else ""
        out.append(f"{paint(' ' * width + ' |', 'gutter')} {indent}{paint(markers + tail, style)}")
    return out


def _painter(color: bool):
    if not color:
        return lambda text, style: text
    return lambda text, style: f"{_ANSI[style]}{text}{_ANSI['reset']}"
