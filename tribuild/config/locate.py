"""Where keys and values sit in a TOML text: line and column for a key path.

``tomllib`` returns plain dicts without positions, so configuration errors would have
nothing to point at. ``Locator`` re-scans the text (which ``tomllib`` has already accepted)
and records, for every *key path*, where its key and its value start.

Terms:
- *key path*: a tuple of parts from the document root, str for table keys and int for array
  items, e.g. ``("targets", "resnet18", "input", 2)``. Quoted keys are decoded, so
  ``[targets."a b"]`` gives ``("targets", "a b")``.
- *key position*: where the key's own last part is written: ``name`` in ``name = "x"``,
  ``resnet18`` in ``[targets.resnet18]``, ``c`` in ``a.b.c = 1``. A table that is only
  implied (``targets`` in ``[targets.x]``, ``a`` in ``a.b = 1``) is placed at its first mention.
- *value position*: where the value starts: the first character of a string, number, ``[``
  of an array or ``{`` of an inline table; for a ``[table]`` header, its ``[``.
- positions are ``(line, column)``, both 1-based, columns counted in characters.

Handled: ``[table]`` and ``[[array.of.tables]]`` headers (items numbered in file order, and
``[a.b]`` after ``[[a]]`` placed in a's last item), bare, quoted and dotted keys, inline
tables, arrays over several lines with comments, all four string forms, CRLF line ends, and
local date-times written with a space.

Not handled: a super-table declared after its sub-tables (``[a.b]`` then ``[a]``) keeps the
key position of its first mention, ``b``'s header. The text must be valid TOML: the scanner
assumes so. ``key`` and ``value`` fall back to the nearest recorded ancestor (and finally to
line 1, column 1) for a path that was not seen.
"""

from __future__ import annotations

import bisect
import re

Path = tuple[str | int, ...]
Position = tuple[int, int]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SCALAR = re.compile(r"[^\s,\]}#]+")
_DATE_THEN_TIME = re.compile(r"\d{4}-\d{2}-\d{2} (?=\d{2}:)")


class Locator:
    """Key and value positions of every key path in one TOML text."""

    def __init__(self, text: str) -> None:
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        scanner = _Scanner(text)
        scanner.document()
        self._keys = {p: self._position(o) for p, o in scanner.keys.items()}
        self._values = {p: self._position(o) for p, o in scanner.values.items()}

    def key(self, path: Path) -> Position:
        """Where the key of ``path`` is written (or of its nearest recorded ancestor)."""
        return _nearest(self._keys, path)

    def value(self, path: Path) -> Position:
        """Where the value of ``path`` starts (or its nearest recorded ancestor's value)."""
        return _nearest(self._values, path)

    def _position(self, offset: int) -> Position:
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1


def _nearest(table: dict[Path, Position], path: Path) -> Position:
    for end in range(len(path), 0, -1):
        if path[:end] in table:
            return table[path[:end]]
    return (1, 1)


class _Scanner:
    """One pass over a valid TOML text, recording offsets of keys and values."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.keys: dict[Path, int] = {}
        self.values: dict[Path, int] = {}
        self._last_item: dict[Path, int] = {}  # array of tables -> index of its last item

    def document(self) -> None:
        table: Path = ()
        while True:
            self._skip(newlines=True)
            if self.i >= len(self.text):
                return
            if self.text[self.i] == "[":
                table = self._header()
            else:
                self._keyval(table)

    def _header(self) -> Path:
        start = self.i
        is_array = self.text.startswith("[[", start)
        self.i += 2 if is_array else 1
        parts = self._key()
        self.i += 2 if is_array else 1
        path: Path = ()
        for n, (name, offset) in enumerate(parts):
            path += (name,)
            self.keys.setdefault(path, offset)
            if path in self._last_item and not (is_array and n == len(parts) - 1):
                path += (self._last_item[path],)
        if is_array:
            index = self._last_item.get(path, -1) + 1
            self._last_item[path] = index
            path += (index,)
            self.keys[path] = start
        self.values.setdefault(path, start)
        return path

    def _keyval(self, table: Path) -> None:
        path = table
        for name, offset in self._key():
            path += (name,)
            self.keys.setdefault(path, offset)
        self._skip()
        self.i += 1  # "="
        self._skip()
        self._value(path)

    def _key(self) -> list[tuple[str, int]]:
        parts = []
        while True:
            self._skip()
            start = self.i
            if self.text[start] in "\"'":
                self._string()
                raw = self.text[start : self.i]
                import tomllib  # quoted keys only; a build with an unchanged config never gets here

                parts.append((next(iter(tomllib.loads(f"{raw} = 0"))), start))
            else:
                bare = _BARE_KEY.match(self.text, start)
                assert bare is not None  # the text parsed as TOML: a key is quoted or bare
                self.i = bare.end()
                parts.append((self.text[start : self.i], start))
            self._skip()
            if not self.text.startswith(".", self.i):
                return parts
            self.i += 1

    def _value(self, path: Path) -> None:
        self.values[path] = self.i
        char = self.text[self.i]
        if char in "\"'":
            self._string()
        elif char == "[":
            self._array(path)
        elif char == "{":
            self._inline_table(path)
        else:
            date = _DATE_THEN_TIME.match(self.text, self.i)
            scalar = _SCALAR.match(self.text, date.end() if date else self.i)
            assert scalar is not None  # the text parsed as TOML: any other value is a scalar
            self.i = scalar.end()

    def _array(self, path: Path) -> None:
        self.i += 1
        index = 0
        while True:
            self._skip(newlines=True)
            if self.text[self.i] == "]":
                self.i += 1
                return
            self._value(path + (index,))
            index += 1
            self._skip(newlines=True)
            if self.text[self.i] == ",":
                self.i += 1

    def _inline_table(self, path: Path) -> None:
        self.i += 1
        while True:
            self._skip(newlines=True)
            if self.text[self.i] == "}":
                self.i += 1
                return
            self._keyval(path)
            self._skip(newlines=True)
            if self.text[self.i] == ",":
                self.i += 1

    def _string(self) -> None:
        quote = self.text[self.i]
        if self.text.startswith(quote * 3, self.i):
            end = self._find_close(quote * 3, self.i + 3)
            for _ in range(2):  # up to two more quotes belong to the content: """a""""
                if self.text.startswith(quote, end):
                    end += 1
            self.i = end
        else:
            self.i = self._find_close(quote, self.i + 1)

    def _find_close(self, close: str, i: int) -> int:
        """Offset just past the first unescaped ``close`` at or after ``i``."""
        escapes = close[0] == '"'
        while not self.text.startswith(close, i):
            i += 2 if escapes and self.text[i] == "\\" else 1
        return i + len(close)

    def _skip(self, newlines: bool = False) -> None:
        """Skip spaces and tabs, and with ``newlines`` also line ends and comments."""
        blanks = " \t\r\n" if newlines else " \t"
        while self.i < len(self.text):
            char = self.text[self.i]
            if char in blanks:
                self.i += 1
            elif char == "#" and newlines:
                end = self.text.find("\n", self.i)
                self.i = len(self.text) if end < 0 else end
            else:
                return
