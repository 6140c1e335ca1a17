"""A save's argument table made apart, in a forked *helper* process, while this process does
the rest of the save (``store.save``: placing values, the other columns, the new pack):
after a parallel build's last unit the other job slot is idle, and the table is the largest
part of a save that the rest does not need (0.12 s of the 0.25 s save of the 50-file
benchmark project).

Terms:
- *helper*: a child forked by ``Helper``; it makes the node table and the argument columns
  (``store.arguments``) of the memos the database holds when it forks, sends them back over
  a pipe as one message (a JSON header line with the node count and the lengths of the
  parts, then the table text and the integer columns as 64-bit integers; no pickle), closes
  the pipe and exits. Its exit frees its copy of the heap;
  the save reads the message when the pipe closes and waits for the exit only at its end.
- *prefix*: what it sent, for the first ``keys`` memos. The save extends it with the memos
  made since the fork, as it extends a loaded store's table (``store.arguments``).
A helper that dies or sends something malformed costs only its time: the save then makes
the table itself.
"""

from __future__ import annotations

import gc
import json
import os
from array import array

from tribuild.base.files import write_all
from tribuild.base.record import record
from tribuild.engine.store import disk as store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from tribuild.engine.database import Database

_PARTS = ("text", "args_len", "args", "seeds")


@record
class Prefix:
    keys: int  # the memos it covers: the first ``keys`` of ``db.memos``
    text: bytes  # the node table's text
    nodes: int  # its node count
    args_len: array[int]  # of int64, extended by the save
    args: array[int]
    seeds: array[int]  # ids of memos whose arguments cannot be encoded (or wrong queries)


class Helper:
    """A helper at work; ``result`` waits for what it sends, ``end`` for its exit. ``on_end``
    is called once it has exited (the caller gives back the job slot it ran in)."""

    def __init__(self, db: Database, on_end: Callable[[], None]) -> None:
        self.keys = len(db.every_memo())
        self.on_end = on_end
        read, write = os.pipe()
        gc.freeze()  # the child's collections then skip (and do not copy) the heap
        try:
            self.pid: int | None = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            raise
        if self.pid == 0:
            try:  # never back into the saving process's code, even on a Ctrl-C
                os.close(read)
                _serve(db, self.keys, write)
            finally:
                os._exit(0)
        os.close(write)
        self.fd: int | None = read

    def result(self) -> Prefix | None:
        """What the helper sent; None if it failed. Call it once; ``end`` waits for the
        helper's exit."""
        try:
            data = self._read()
        except OSError:
            return None
        try:
            return _decode(data, self.keys)
        except (ValueError, KeyError, TypeError):
            return None

    def end(self) -> None:
        """Wait for the helper's exit (reading what it sends, if ``result`` did not: it may
        be blocked writing), then call ``on_end``. Safe to call more than once."""
        if self.pid is None:
            return
        try:
            if self.fd is not None:
                self._read()
        finally:
            os.waitpid(self.pid, 0)
            self.pid = None
            self.on_end()

    def _read(self) -> bytes:
        """All the helper sends, until it closes its end of the pipe."""
        fd = self.fd
        assert fd is not None  # read once
        chunks = []
        try:
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
            self.fd = None
        return b"".join(chunks)


def _serve(db: Database, keys: int, fd: int) -> None:
    """In the helper: make and send the prefix of the first ``keys`` memos (the caller
    exits)."""
    gc.disable()
    # Helper.__init__ materialised every memo (every_memo) before the fork: none is None
    memos = db.memos[:keys]
    table, columns, seeds = store.arguments(memos, db.loaded)  # type: ignore[arg-type]
    parts = {
        "text": table.text(),
        "args_len": array("q", columns["args_len"]).tobytes(),
        "args": array("q", columns["args"]).tobytes(),
        "seeds": array("q", sorted(seeds)).tobytes(),
    }
    header = {"nodes": table.nodes(), "lengths": [len(parts[p]) for p in _PARTS]}
    write_all(fd, [json.dumps(header).encode() + b"\n", *(parts[p] for p in _PARTS)])
    os.close(fd)  # the reader sees the end now, not after this exit's clean-up


def _decode(data: bytes, keys: int) -> Prefix:
    end = data.index(b"\n")
    header = json.loads(data[:end])
    parts, at = {}, end + 1
    for name, length in zip(_PARTS, header["lengths"], strict=True):
        parts[name] = data[at : at + length]
        at += length
    if at != len(data):
        raise ValueError("the helper's message has the wrong length")
    ints = {name: array("q", parts[name]) for name in _PARTS[1:]}
    if len(ints["args_len"]) != keys or sum(ints["args_len"]) != len(ints["args"]):
        raise ValueError("the helper's columns do not cover its keys")
    return Prefix(keys, parts["text"], header["nodes"], **ints)
