"""Paths a depfile can name: the ones GNU make and ninja both read back as exactly that path.

Terms:
- *writable path*: one that both read back as exactly that path. Four characters are
  escaped the one way both undo: a space ``\\ ``, ``#`` ``\\#``, ``:`` ``\\:`` (an unescaped
  colon in a prerequisite makes make read a pattern rule) and ``$`` ``$$``. Every other
  character in a writable path is one both take as it is: letters, digits, ``/ . _ - + , @ !
  ) { } ]`` and any non-ASCII character (and a space not last).
- *unwritable path*: any other. Some characters have no escape both read back (``\\;`` is
  ``\\;`` to make, the end of a name to ninja); some mean something else to one of them.
  ``unwritable`` says why; ``escape`` refuses such a path rather than write one that means
  something else.

What each refused character did, with real make 4.3 and ninja 1.11-1.13
(``tests/driver/test_depfile_names.py`` reads every generated name back through both):
``;`` ends make's prerequisites and starts a recipe line (``x;touch PWNED;.tri`` ran
``touch``); ``=`` turns the line into a target-specific variable (the input is lost); ``|``
starts order-only prerequisites; ``%`` makes a target a pattern; ``*``, ``?`` and ``[``
are globs to make; ``\\`` escapes the next character in both, differently (a name ending in
one swallows the line break); ``<``, ``>``, ``^`` and backquote end a name in ninja, and
quotes and ``&`` in ninja 1.11 (Debian's; 1.12 reads them as they are); a
leading ``~`` is a home folder to make, ``(`` starts an archive's members (up to the next
name ending in ``)``), a trailing ``:`` stays ``\\:`` in ninja and a trailing space is
dropped by make; control characters break lines, and bytes that are not UTF-8 cannot be the
text of a generated module.

No imports: Tribuild.toml's reader checks the output folder with it on every build.
"""

from __future__ import annotations

# character -> what make or ninja makes of it (the reason a path holding it is refused)
_MEANS = {
    ";": "make ends the prerequisites there and runs the rest as a command",
    "=": "make reads the line as a variable assignment and drops the file",
    "|": "make reads the files after it as order-only prerequisites",
    "%": "make reads a name holding it as a pattern",
    "*": "make expands it as a wildcard",
    "?": "make expands it as a wildcard",
    "[": "make expands it as a wildcard",
    "\\": "make and ninja read it as an escape, each its own way",
    "<": "ninja ends a name there",
    ">": "ninja ends a name there",
    "^": "ninja ends a name there",
    "`": "ninja ends a name there",
    '"': "ninja 1.11 ends a name there",
    "'": "ninja 1.11 ends a name there",
    "&": "ninja 1.11 ends a name there",
    "(": "make reads `archive(member ...)`, across names too, as members of an archive",
}
_ESCAPES = str.maketrans({"$": "$$", "#": "\\#", " ": "\\ ", ":": "\\:"})


class Unwritable(ValueError):
    """A path no depfile can name faithfully; ``path`` is it, ``why`` the reason."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"`{path}` cannot be named in a depfile: {why}")
        self.path = path
        self.why = why


def unwritable(path: str) -> str | None:
    """Why make or ninja would read ``path`` in a depfile as something else (ending with what
    to do), or None when ``escape(path)`` reads back as exactly ``path`` in both."""
    what = "rename it"
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in path):
        return f"its name holds a control character, which breaks a depfile's lines: {what}"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # os.fsdecode keeps undecodable bytes as lone surrogates
        return f"its name is not valid UTF-8: {what}"
    for ch in path:
        if ch in _MEANS:
            return f"its name holds `{ch}`, which no depfile can name ({_MEANS[ch]}): {what}"
    if path.startswith("~"):
        return f"it starts with `~`, which no depfile can name (make reads a home folder): {what}"
    if path.endswith(":"):
        return f"it ends with `:`, which no depfile can name (ninja keeps the escape): {what}"
    if path.endswith(" "):
        return f"it ends with a space, which no depfile can name (make drops it): {what}"
    return None


def escape(path: str) -> str:
    """``path`` as make and ninja read it back; raises Unwritable for an unwritable one."""
    why = unwritable(path)
    if why is not None:
        raise Unwritable(path, why)
    return path.translate(_ESCAPES)
