"""The output record and the early journal: what tribuild wrote, so that only that is ever
deleted.

Terms:
- *record*: ``<out>/.tribuild-outputs.json``, what tribuild wrote for each target: relative
  path -> digest of the bytes written. Only recorded files are ever deleted, and only while
  they still hold the bytes tribuild wrote: a file a person edited or put there is kept. It
  is written in the batch of the outputs it records, renamed into place after them.
- *early journal*: ``<out>/.tribuild-outputs.early``, the files a parallel build wrote as
  their targets were built, before its record: one JSON line ``[relative path, digest]``
  each, appended and made durable before the files are renamed into place (``writing``). A
  build killed before its record would otherwise leave files no record names, there for
  good. The next build (or ``clean``) takes them as recorded, and writing a record deletes
  the journal.
"""

from __future__ import annotations

import json
import os

from tribuild.base.files import OWN_FILE_BYTES, drop_special, read_regular
from tribuild.driver.outputs.paths import is_relative

RECORD = ".tribuild-outputs.json"

EARLY = ".tribuild-outputs.early"

# The name whose temporary files (``.tribuild-stale.XXXXXXXX.tmp``, in the output folder) are
# stale outputs moved aside, to be deleted once the new outputs are in place
# (``stale.remove_stale``): a killed build's are swept as any temporary file of the record's.
STALE = "tribuild-stale"


class Record:
    """What tribuild wrote, per target: ``{target: {relpath: digest}}``, and ``early``:
    what the early journal lists (relpath -> digest; never written into the record)."""

    __slots__ = ("targets", "early", "lost")

    def __init__(
        self,
        targets: dict[str, dict[str, str]] | None = None,
        early: dict[str, str] | None = None,
        lost: bool = False,
    ) -> None:
        self.targets = {} if targets is None else targets
        self.early = {} if early is None else early
        self.lost = lost  # no readable record file: what it listed is not known

    @classmethod
    def load(cls, out_dir: str) -> "Record":
        """The record and early journal of ``out_dir`` (anything but a regular file at their
        names reads as nothing: ``drop_records`` removes it before a write)."""
        targets = _recorded(out_dir)
        return cls(targets or {}, _early(out_dir), targets is None)

    def encode(self) -> bytes:
        """The bytes of the record file."""
        text = json.dumps({"version": 1, "targets": self.targets}, indent=1, sort_keys=True)
        return text.encode() + b"\n"

    def owned(self) -> dict[str, str]:
        """Every recorded or journaled path with its digest (a journaled one was written
        after the record)."""
        return {p: d for files in self.targets.values() for p, d in files.items()} | self.early


def _read_text(path: str) -> str:
    """The text of a record of tribuild's (``OSError`` if it is not a regular file within
    bounds, ``ValueError`` if it is not UTF-8: damage either way)."""
    return read_regular(path, OWN_FILE_BYTES).decode("utf-8")


def drop_records(out_dir: str) -> None:
    """Remove anything but a regular file at the names of the record and the early journal
    of ``out_dir`` (a link, a FIFO, a folder: a repository may commit one), as damage, so
    no write or append goes through it or fails on it."""
    for name in (RECORD, EARLY):
        drop_special(os.path.join(out_dir, name))


def _recorded(out_dir: str) -> dict[str, dict[str, str]] | None:
    """The targets of the record, or None when there is no readable one."""
    try:
        data = json.loads(_read_text(os.path.join(out_dir, RECORD)))
        targets = data["targets"]
        if isinstance(targets, dict) and all(isinstance(v, dict) for v in targets.values()):
            return {
                str(k): {str(p): str(d) for p, d in v.items() if is_relative(str(p))}
                for k, v in targets.items()
            }
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _early(out_dir: str) -> dict[str, str]:
    """The early journal of ``out_dir``: relative path -> digest (a line a crash cut short
    is skipped: its files were never renamed into place). Its lines are parsed as one JSON
    array when they are all whole (a tenth of the time of a parse per line)."""
    try:
        lines = _read_text(os.path.join(out_dir, EARLY)).splitlines()
    except (OSError, ValueError):
        return {}
    try:
        rows = json.loads(f"[{','.join(lines)}]")
    except ValueError:
        rows = [_journal_row(line) for line in lines]
    found = {}
    for row in rows:
        if (
            type(row) is list
            and len(row) == 2
            and type(row[0]) is str
            and type(row[1]) is str
            and is_relative(row[0])
        ):
            found[row[0]] = row[1]
    return found


def _journal_row(line: str) -> object:
    """A line of the early journal parsed, or None."""
    try:
        return json.loads(line)
    except ValueError:
        return None
