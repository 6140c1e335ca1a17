"""Reading source files into the database (the driver is the only writer of inputs).

Terms:
- *root*: the project folder (the one holding Tribuild.toml, else the current directory);
  paths given to queries are relative to it, in POSIX form.
- *scan*: the sorted list of ``.tri`` files under the source folders.
- *closure*: the scanned files plus every file they import, transitively. Imported files
  outside the source folders are read too, so long as they are inside the root. Finding
  what a file imports means lexing it, so only files that *may import* are lexed here: an
  import item starts with the keyword ``import`` or ``from``, and a text holding neither
  word imports nothing. The other files are lexed by whoever builds them (in a parallel
  build, the workers).

A UTF-8 byte order mark at the start is dropped, as Python and most compilers do (it read as
an unknown character, E0103, which a target reported only as "defines no layer"); lines and
columns count from the character after it. Reading never raises for a bad file: a missing
file, a directory, undecodable bytes or an OS error becomes a ``SourceText`` with an error,
which the checker reports at the import. A file that is not a regular file (a FIFO would
block the read) or is larger than ``MAX_BYTES`` (checking time grows with size; 1 MiB of
layers is tested) is refused too. Two more are refused before reading: a path that leads
outside the root through a symbolic link (of the file or of a folder on the way; a shared
cache or CI job must not read files the project does not hold), a name holding a control
character (a newline in a name would inject lines into depfiles and generated text), and a
name no depfile can hold faithfully (``depfile.unwritable``: a `;` ran a command through
make, a `=` hid the file from it), so the import that names it is the error, not the depfile.
"""

from __future__ import annotations

import os
import stat

from tribuild.base.depnames import unwritable
from tribuild.base.files import read_bytes
from tribuild.config.load import resolves_inside
from tribuild.queries.inputs import SourceText, source_text
from tribuild.queries.names import import_targets

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from tribuild.engine import Database

    ImportLists = Callable[[Database, list[str]], dict[str, tuple[str, ...]]]

MAX_BYTES = 4 << 20  # 4 MiB: the zoo's largest file is a few KiB


def read_source(root: str, path: str) -> SourceText:
    full = os.path.join(root, *path.split("/"))
    refused = _refused(root, path, full)
    if refused is not None:
        return SourceText(None, refused)
    try:
        info = os.stat(full)
        if stat.S_ISREG(info.st_mode) and too_large(info.st_size):
            return SourceText(None, too_large(info.st_size))
        if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
            return SourceText(None, "is not a regular file (a FIFO, socket or device)")
        data = read_bytes(full)
    except IsADirectoryError:
        return SourceText(None, "is a directory, not a file")
    except FileNotFoundError:
        return SourceText(None, "no such file")
    except OSError as err:
        return SourceText(None, err.strerror or str(err))
    try:
        return SourceText(data.decode("utf-8").removeprefix("\ufeff"))  # BOM: as Python does
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - data.rfind(b"\n", 0, err.start)
        return SourceText(
            None,
            f"not valid UTF-8: byte 0x{data[err.start]:02x} at line {line}, "
            f"column {column} (offset {err.start})",
        )


def too_large(size: int) -> str | None:
    """Why a source of ``size`` bytes is refused (the editor's open documents too), or None."""
    if size <= MAX_BYTES:
        return None
    return f"is {size} bytes, more than the limit of {MAX_BYTES}: split it into several files"


def _refused(root: str, path: str, full: str) -> str | None:
    """Why the file ``path`` (``full`` once joined to ``root``) must not be read, or None."""
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in path):
        return "its name holds a control character"
    why = unwritable(path)
    if why is not None:
        return why
    if not resolves_inside(root, full):
        return (
            f"it leads outside the project root through a symbolic link "
            f"(to `{os.path.realpath(full)}`)"
        )
    return None


def scan(root: str, folders: tuple[str, ...]) -> tuple[str, ...]:
    """Every .tri path under ``folders`` (relative to ``root``), sorted; symlinked folders are
    not followed, so a symlink loop cannot hang the scan."""
    found = set()
    for folder in folders:
        base = os.path.join(root, folder)
        if os.path.isfile(base) and base.endswith(".tri"):
            found.add(_relative(root, base))
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in filenames + [d for d in dirnames if d.endswith(".tri")]:
                if name.endswith(".tri"):
                    found.add(_relative(root, os.path.join(dirpath, name)))
    return tuple(sorted(found))


def _relative(root: str, full: str) -> str:
    return os.path.relpath(full, root).replace(os.sep, "/")


def load_sources(
    db: Database, root: str, files: tuple[str, ...], import_lists: ImportLists | None = None
) -> tuple[str, ...]:
    """Set the text of every file of the closure of ``files``. Returns the closure,
    sorted. Unchanged texts do not start a new revision. Inputs of files that left the closure
    stay set but nothing reads them: a file that comes back is read afresh.
    ``import_lists(db, paths)``: the files each of ``paths`` imports (by default the queries'
    ``import_targets``; the remote cache's ``Closures.batch`` asks the remote first)."""
    lists = import_lists or _import_lists
    loaded: set[str] = set()
    pending = list(files)
    while pending:
        for path in pending:
            db.set(source_text, path, read_source(root, path))
            loaded.add(path)
        found = lists(db, pending)
        pending = sorted({t for p in pending for t in found[p]} - loaded)
    return tuple(sorted(loaded))


def _import_lists(db: Database, paths: list[str]) -> dict[str, tuple[str, ...]]:
    return {p: import_targets(db, p) if may_import(source_text(db, p).text) else () for p in paths}


def may_import(text: str | None) -> bool:
    """Whether a file's text (None: unreadable) may hold an import item."""
    return text is not None and ("import" in text or "from" in text)
