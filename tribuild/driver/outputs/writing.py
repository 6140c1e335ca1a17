"""Writing files atomically, only when their bytes change, and durably.

Terms:
- *write if changed*: an output whose file already holds the same bytes is left alone, so its
  mtime does not move (what ninja's ``restat = 1`` and make rely on); otherwise it is written
  to a temporary file, synced to disk and renamed into place.
- *durable*: on disk, so it survives a crash of the machine, not only of tribuild: a file's
  bytes after ``fsync`` of the file, a rename after ``fsync`` of its folder. Only what a
  build wrote is synced, never the whole system (``os.sync`` waits for every other
  program's writes too).
- *temporary file*: ``.NAME.XXXXXXXX.tmp`` beside ``NAME`` (``tribuild.base.tempname``), where a
  file's new bytes wait for their rename. A killed writer leaves it behind, never at an
  output's path; the next build of the folder deletes it (``stale.remove_temps``).
"""

from __future__ import annotations

import _thread
import fcntl
import json
import os
import stat
from contextlib import contextmanager
from queue import SimpleQueue

from tribuild.base.files import drop_special, unlink
from tribuild.base.hashing import digest
from tribuild.base.tempname import create_beside
from tribuild.driver.outputs.paths import WriteFailed
from tribuild.driver.outputs.records import EARLY

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

_SYNC_THREADS = 32  # fsyncs in flight at once

_SYNCERS: dict[int, "_Syncers"] = {}  # pid -> the _Syncers of that process


def write_if_changed(path: str, data: bytes) -> bool:
    """Write ``data`` to ``path`` unless it already holds exactly those bytes; True if written."""
    return bool(write_changed({path: data}))


def write_changed(files: dict[str, bytes], early: str | None = None) -> list[str]:
    """Write every ``path: data`` whose file does not already hold exactly ``data``, as one
    batch: all temporary files are written and made durable, then renamed into place in the
    order of ``files``, then each folder that received one is made durable. A crash at any
    point leaves every file with either its old or its new bytes; once this returns, the new
    ones are durable. ``early``: the output folder whose early journal lists the files
    before they are renamed. Returns the paths written, in order."""
    changed = [path for path, data in files.items() if not holds(path, data)]
    temps = []
    try:
        for folder in {os.path.dirname(path) or "." for path in changed}:
            os.makedirs(folder, exist_ok=True)
        for path in changed:
            fd, tmp = create_beside(path, 0o666)  # outputs are not private: the umask decides
            temps.append(tmp)
            with os.fdopen(fd, "wb") as file:
                file.write(files[path])
        journal = _note_early(early, {p: files[p] for p in changed}) if early and changed else []
        fsync_all(temps + journal)
        for tmp, path in zip(temps, changed, strict=True):
            os.replace(tmp, path)
    except BaseException as err:
        for tmp in temps:
            unlink(tmp)
        if isinstance(err, OSError):
            where = err.filename or (changed[len(temps) - 1] if temps else "output")
            raise WriteFailed(
                where,
                f"cannot write outputs: {err.strerror or err}; each "
                "output holds its previous or its new bytes",
            ) from err
        raise
    fsync_all(sorted({os.path.dirname(path) or "." for path in changed}))
    return changed


def _note_early(out_dir: str, files: dict[str, bytes]) -> list[str]:
    """Append ``files`` (full path -> bytes) to the early journal of ``out_dir``; what to
    fsync before renaming them: the journal, and its folder when this created it."""
    path = os.path.join(out_dir, EARLY)
    drop_special(path)
    new = not os.path.exists(path)
    lines = [
        json.dumps([_relative_to(out_dir, full), digest(data)]) + "\n"
        for full, data in files.items()
    ]
    with open(path, "a", encoding="utf-8") as journal:
        journal.write("".join(lines))
    return [path, out_dir] if new else [path]


def _relative_to(out_dir: str, full: str) -> str:
    """``full`` relative to ``out_dir``: the rest of it, when it starts with that folder (as
    the paths ``resolve`` gives do; ``os.path.relpath`` costs 3 µs a file)."""
    inside = os.path.join(out_dir, "")
    return full[len(inside) :] if full.startswith(inside) else os.path.relpath(full, out_dir)


@contextmanager
def writing(out_dir: str, wait: bool) -> Iterator[bool]:
    """Hold the right to create files in ``out_dir`` (an exclusive ``flock`` on the folder,
    for processes of one build writing at once); yields False, without waiting, when another
    holds it and not ``wait``. Two processes creating files in one folder at once make the
    kernel spin on the folder's lock while the other allocates its inode, which is slow on
    ext4 just after many files were deleted: 8% of the CPU of a ``--jobs 2`` build measured
    so went to that spinning."""
    os.makedirs(out_dir, exist_ok=True)
    fd = os.open(out_dir, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def fsync_all(paths: list[str]) -> None:
    """Make each file or folder of ``paths`` durable, concurrently when there are several: a
    journalling file system (ext4, xfs) commits the fsyncs that wait at the same time
    together, so a batch costs about one commit instead of one per file."""
    if len(paths) < 2:
        for path in paths:
            _fsync(path)
        return
    _syncers().run(paths)


def _syncers() -> "_Syncers":
    """This process's threads that fsync, started once and kept (a forked child makes its
    own): a sleeping thread that is woken runs at once, while a new one waits behind every
    busy process for its first time slice (milliseconds on a loaded machine)."""
    pid = os.getpid()
    if pid not in _SYNCERS:
        _SYNCERS.clear()
        _SYNCERS[pid] = _Syncers()
    return _SYNCERS[pid]


class _Syncers:
    """Up to ``_SYNC_THREADS`` threads taking paths to fsync from one queue (what a
    ``concurrent.futures`` pool does, whose import costs ~10 ms, ``logging`` mostly). They
    are started with ``_thread``, which does not wait for each new thread to run, as
    ``threading.Thread.start`` does: while another process keeps the other CPU busy (a
    parallel build), each such start waits for a time slice, with the CPU idle meanwhile.
    Like daemon threads, they do not hold up the exit, and ``run`` returns only once its
    paths are all done, so no sync is ever cut short by the end of the process."""

    def __init__(self) -> None:
        self.jobs: SimpleQueue[tuple[int, str, SimpleQueue[tuple[int, BaseException | None]]]] = (
            SimpleQueue()
        )
        self.threads = 0

    def run(self, paths: list[str]) -> None:
        """``_fsync`` each of ``paths`` on the threads; re-raises the first error, in order."""
        while self.threads < min(len(paths), _SYNC_THREADS):
            _thread.start_new_thread(self._work, ())
            self.threads += 1
        done: SimpleQueue[tuple[int, BaseException | None]] = SimpleQueue()
        for index, path in enumerate(paths):
            self.jobs.put((index, path, done))
        for _, error in sorted(done.get() for _ in paths):
            if error is not None:
                raise error

    def _work(self) -> None:
        while True:
            index, path, done = self.jobs.get()
            try:
                _fsync(path)
                done.put((index, None))
            except BaseException as error:  # handed to ``run``, which raises it
                done.put((index, error))


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def holds(path: str, data: bytes) -> bool:
    """Whether the file ``path`` holds exactly ``data`` (one open, one fstat, one read: a
    short read only makes the file be written again). Only a regular file can: a FIFO is
    opened without waiting and a link is not followed, and either is then replaced."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        os.set_blocking(fd, True)
        return os.read(fd, len(data) + 1) == data
    except OSError:
        return False
    finally:
        os.close(fd)
