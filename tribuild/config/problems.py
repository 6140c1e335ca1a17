"""Configuration problems: what is wrong in a Tribuild.toml, where, and how it is shown.

Terms:
- *Problem*: one mistake, at a 1-based line and column of the offending key or value
  (None for a file that could not be read at all), with the dotted *key* it concerns
  (``targets.resnet18.input``), a *message*, what was *expected* (``a list of positive
  integers``) when that applies, and an optional *help* line (a did-you-mean, an example).
- *ConfigError*: the exception ``load_config`` raises; it carries every problem found in
  the file, sorted by position, and renders them as compiler-style lines::

      Tribuild.toml:12:1: error: unknown key `nmae` in [project]
        help: did you mean `name`? allowed keys: name, sources, out, opt_level, jobs
"""

from __future__ import annotations

import json
import re

from tribuild.base.printable import printable
from tribuild.base.record import record
from tribuild.config.locate import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    import tomllib

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_TOML_MESSAGE = re.compile(r"(.*) \(at (?:line (\d+), column (\d+)|end of document)\)", re.S)
_TUPLE_KEY = re.compile(r"\((?:'[^'\\]*',? ?)+\)")


@record
class Problem:
    path: str
    line: int | None
    column: int | None
    key: str
    message: str
    expected: str | None = None
    help: str | None = None

    def render(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}:{self.column}"
        text = printable(f"{where}: error: {self.message}")
        return text if self.help is None else f"{text}\n  help: {printable(self.help)}"

    def excerpted(self) -> str:
        """As ``.tri`` diagnostics print: the path relative to the current folder, then the
        offending line of the file under a gutter, with carets under the key or value."""
        path = _shown(self.path)
        where = path if self.line is None else f"{path}:{self.line}:{self.column}"
        out = [printable(f"{where}: error: {self.message}")]  # a message may quote the file
        text = _line(self.path, self.line)
        if text is not None and self.column:
            gutter = " " * len(str(self.line))
            start = min(self.column - 1, len(text))
            carets = "^" * token_width(text[start:])
            shown = printable(text)
            out += [f"{gutter} |", f"{self.line} | {shown}", f"{gutter} | {' ' * start}{carets}"]
        if self.help is not None:
            out.append(f"{' ' * len(str(self.line or ''))} = help: {printable(self.help)}")
        return "\n".join(out) + ("\n" if len(out) > 2 else "")  # an excerpt: a blank line after


class ConfigError(Exception):
    """Every problem found in one configuration file; ``str()`` renders them all."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.line or 0, p.column or 0))
        super().__init__("\n".join(p.render() for p in self.problems))

    def excerpted(self) -> str:
        """Every problem with its source line and carets (what the command line prints)."""
        return "\n".join(p.excerpted() for p in self.problems).rstrip("\n")


def _shown(path: str) -> str:
    """As `.tri` paths print, relative to the project root: the configuration file by its
    name (the root is its folder); another path relative to the current folder when inside."""
    import os

    from tribuild.project import CONFIG_FILE

    if os.path.basename(path) == CONFIG_FILE:
        return CONFIG_FILE
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def _line(path: str, line: int | None) -> str | None:
    """Line ``line`` (1-based) of the file, without its end; None when it cannot be read."""
    if line is None:
        return None
    try:
        with open(path, encoding="utf-8-sig") as f:
            for number, text in enumerate(f, 1):
                if number == line:
                    return text.rstrip("\r\n").expandtabs(1)
    except (OSError, UnicodeDecodeError):
        return None
    return None


def token_width(text: str) -> int:
    """The width of the TOML key or value that starts ``text``: a string to its closing
    quote, an array or inline table to its closing bracket, else up to a space, `=` or `,`."""
    if not text:
        return 1
    if text[0] in "\"'":
        end = 1
        while end < len(text) and text[end] != text[0]:
            end += 2 if text[end] == "\\" and text[0] == '"' else 1
        return min(end + 1, len(text))
    if text[0] in "[{":
        depth = 0
        for i, c in enumerate(text):
            depth += (c in "[{") - (c in "]}")
            if depth == 0:
                return i + 1
        return len(text)
    end = 0
    while end < len(text) and text[end] not in " \t=,]}#":
        end += 1
    return max(end, 1)


def render_key(path: Path) -> str:
    """``("targets", "a b", "input", 2)`` -> ``targets."a b".input[2]``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            name = part if _BARE_KEY.fullmatch(part) else json.dumps(part, ensure_ascii=False)
            text += f".{name}" if text else name
    return text


def describe(value: object) -> str:
    """A value as a TOML user would name it: ``the integer -3``, ``a table``."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the float {value}"
    if isinstance(value, str):
        return f"the string {json.dumps(value, ensure_ascii=False)}"
    if isinstance(value, list):
        return "an array" if value else "an empty array"
    if isinstance(value, dict):
        return "a table"
    import datetime  # tomllib's dates; a build with an unchanged config never needs it

    if isinstance(value, datetime.datetime):
        return "a date-time"
    return "a date" if isinstance(value, datetime.date) else "a time"


def syntax_problem(path: str, text: str, error: tomllib.TOMLDecodeError) -> Problem:
    """Re-render tomllib's message (``Invalid value (at line 3, column 8)``) as a Problem."""
    import ast

    match = _TOML_MESSAGE.fullmatch(str(error))
    message, line, column = match.groups() if match else (str(error), None, None)
    if line is None:  # "at end of document": point just past the last non-blank character
        content = text.rstrip()
        line_no = content.count("\n") + 1
        column_no = len(content) - (content.rfind("\n") + 1) + 1
    else:
        assert column is not None  # matched with the line
        line_no, column_no = int(line), int(column)
    message = _TUPLE_KEY.sub(lambda m: f"`{render_key(ast.literal_eval(m.group()))}`", message)
    if message == "Cannot overwrite a value":  # tomllib does not say which
        key = text.split("\n")[line_no - 1].partition("=")[0].strip()
        message = f"`{key}` is set twice in its table" if key else message
    return Problem(path, line_no, column_no, "", f"invalid TOML: {message}")
