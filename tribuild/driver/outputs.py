"""Writing outputs: atomically, only when their bytes change, and only inside the output folder.

Terms:
- *output folder*: ``out`` of Tribuild.toml (or the folder of ``-o`` in one-file mode). Every
  path written is checked to stay inside it, by its text and, symbolic links followed, by
  where its folder leads (the output folder itself may be a link: the user chose it).
- *write if changed*: an output whose file already holds the same bytes is left alone, so its
  mtime does not move (what ninja's ``restat = 1`` and make rely on); otherwise it is written
  to a temporary file, synced to disk and renamed into place.
- *durable*: on disk, so it survives a crash of the machine, not only of tribuild: a file's
  bytes after ``fsync`` of the file, a rename after ``fsync`` of its folder. Only what a
  build wrote is synced, never the whole system (``os.sync`` waits for every other
  program's writes too).
- *record*: ``<out>/.tribuild-outputs.json``, what tribuild wrote for each target: relative
  path -> digest of the bytes written. Only recorded files are ever deleted, and only while
  they still hold the bytes tribuild wrote: a file a person edited or put there is kept. It
  is written in the batch of the outputs it records, renamed into place after them.
- *early journal*: ``<out>/.tribuild-outputs.early``, the files a parallel build wrote as
  their targets were built, before its record: one JSON line ``[relative path, digest]``
  each, appended and made durable before the files are renamed into place. A build killed
  before its record would otherwise leave files no record names, there for good. The next
  build (or ``clean``) takes them as recorded, and writing a record deletes the journal.
- *stale*: a recorded file that no target of this build produces any more.
- *temporary file*: ``.NAME.XXXXXXXX.tmp`` beside ``NAME`` (``tribuild.base.tempname``), where a
  file's new bytes wait for their rename. A killed writer leaves
  it behind, never at an output's path; the next build of the folder deletes it.
"""

from __future__ import annotations

import _thread
import fcntl
import json
import os
import posixpath
import re
import stat
import time
from contextlib import contextmanager
from queue import SimpleQueue

from tribuild.base.files import (
    OWN_FILE_BYTES,
    drop_special,
    listdir,
    open_regular,
    read_regular,
    unlink,
)
from tribuild.base.hashing import digest
from tribuild.base.record import record
from tribuild.base.tempname import create_beside
from tribuild.config.load import resolves_inside
from tribuild.config.problems import ConfigError, Problem

RECORD = ".tribuild-outputs.json"
KERNELS = "kernels"  # the folder of the kernel files, in the output folder
EARLY = ".tribuild-outputs.early"
_TEMP = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")
_SYNC_THREADS = 32  # fsyncs in flight at once
_SYNCERS: dict = {}  # pid -> the _Syncers of that process


class OutsideOutput(ValueError):
    """A generated path that would leave the output folder (a bug upstream, never written)."""


class WriteFailed(ConfigError):
    """An output could not be written (no space, a read-only folder, a folder that leads
    outside the output folder); every output keeps its previous or its new bytes. The CLI
    reports it like a configuration problem: the build cannot go on where it was told to."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__([Problem(path, None, None, "", message)])


def resolve(out_dir: str, relpath: str) -> str:
    """The file ``relpath`` names under ``out_dir``; raises OutsideOutput if it leaves it."""
    return os.path.join(out_dir, *_normal(relpath).split("/"))


def _normal(relpath: str) -> str:
    """``relpath`` normalized; raises OutsideOutput if it leaves the folder it is relative
    to."""
    norm = posixpath.normpath(relpath)
    if (
        not relpath
        or posixpath.isabs(relpath)
        or norm == ".."
        or norm.startswith("../")
        or "\\" in relpath
        or norm == "."
    ):
        raise OutsideOutput(f"refusing to write `{relpath}` outside the output folder")
    return norm


def inside_output(out_dir: str, relpaths) -> dict[str, str]:
    """``resolve`` each of ``relpaths``: relpath -> path; refuse (WriteFailed) a path whose
    folder leads outside ``out_dir`` through a symbolic link (each folder checked once), and
    an output folder that is not a folder."""
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise WriteFailed(
            out_dir,
            "the output folder is a file (or a link to nothing): move "
            "it away, or set `out` in Tribuild.toml to a folder",
        )
    paths = {rel: resolve(out_dir, rel) for rel in relpaths}
    inside = {}
    for rel, path in paths.items():
        folder = os.path.dirname(path)
        if folder not in inside:
            inside[folder] = resolves_inside(out_dir, folder)
        if not inside[folder]:
            raise WriteFailed(
                path,
                f"refusing to write `{rel}`: its folder leads outside the "
                f"output folder through a symbolic link",
            )
    return paths


def _relative(relpath: str) -> bool:
    """Whether ``relpath`` names a file inside an output folder (a damaged or crafted record
    may hold anything)."""
    try:
        _normal(relpath)
        return True
    except OutsideOutput:
        return False


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
    changed = [path for path, data in files.items() if not _holds(path, data)]
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
            and _relative(row[0])
        ):
            found[row[0]] = row[1]
    return found


def _journal_row(line: str):
    """A line of the early journal parsed, or None."""
    try:
        return json.loads(line)
    except ValueError:
        return None


@contextmanager
def writing(out_dir: str, wait: bool):
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
        self.jobs: SimpleQueue = SimpleQueue()
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


def _holds(path: str, data: bytes) -> bool:
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
                str(k): {str(p): str(d) for p, d in v.items() if _relative(str(p))}
                for k, v in targets.items()
            }
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


@record
class WriteReport:
    written: tuple[str, ...]  # relative paths whose bytes changed
    unchanged: tuple[str, ...]
    removed: tuple[str, ...]  # stale files deleted
    kept: tuple[str, ...]  # stale files not deleted: their bytes are not tribuild's


def foreign(paths: dict[str, str], files: dict[str, bytes], owned: dict[str, str]) -> list[str]:
    """The relative paths of ``paths`` (relpath -> full path) where a file sits that tribuild
    did not write: not recorded (``owned``), without a generated file's header, and holding
    other bytes than ``files`` would write (the same bytes are harmless). A symbolic link is
    none: it is replaced, never followed, so nothing it points to is lost."""
    found = []
    for rel, full in paths.items():
        if rel in owned or not os.path.exists(full) or os.path.islink(full):
            continue
        if _holds(full, files[rel]):
            continue
        if not (os.path.isfile(full) and not os.path.islink(full) and _generated(full)):
            found.append(rel)
    return found


_HEADER = re.compile(
    rb'"""(Target [^\n]*\.\n\nGenerated by tribuild from |Kernel [^\n]*, generated by tribuild\.)'
)


def _generated(full: str) -> bool:
    """Whether the file starts as the modules and kernels tribuild generates do."""
    try:
        with open_regular(full, OWN_FILE_BYTES) as file:
            return bool(_HEADER.match(file.read(256)))
    except OSError:
        return False


def adopted(out_dir: str) -> dict[str, str]:
    """The files of ``out_dir`` that tribuild generated, by their header (relpath -> digest;
    ``.py`` modules and kernels, and the depfile ``NAME.d`` beside a module ``NAME.py``):
    what a lost record listed, so a build can still delete the stale ones. Only where a
    build writes: the folder itself and its ``kernels`` folder (``out = "."`` is the project
    root, whose other folders are not tribuild's), not through a symbolic link."""
    found = {}
    for folder, rel in _output_folders(out_dir):
        for name in listdir(folder):
            full = os.path.join(folder, name)
            if name.endswith(".py") and not os.path.islink(full) and _generated(full):
                key = name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")
                found[key] = digest(read_regular(full, OWN_FILE_BYTES))
                depfile = full[:-3] + ".d"
                if rel == "." and os.path.isfile(depfile) and not os.path.islink(depfile):
                    found[name[:-3] + ".d"] = digest(read_regular(depfile, OWN_FILE_BYTES))
    return found


def write_outputs(
    out_dir: str,
    files: dict[str, bytes],
    record: Record,
    produced: dict[str, tuple[str, ...]],
    targets: set[str],
    done: frozenset[str] = frozenset(),
    force: bool = False,
) -> WriteReport:
    """Delete what is stale: what the targets of ``produced`` (target -> its relpaths)
    produced before but not now, and what targets no longer in ``targets`` (those of the
    configuration) produced. Then write ``files`` (relpath -> bytes) and record them under
    their targets, the record in the same batch, renamed last. Stale files go first, while
    the record on disk still lists them: a build killed between the record's rename and
    the last deletion left files that no record named, there for good. A target that failed
    keeps its previous outputs and record. The files of ``done`` were written in this build
    already (as their targets were built, under the same lock): they count as written and
    are not read back. A file at an output path that tribuild did not write (``foreign``)
    is refused (``WriteFailed``, nothing written), unless ``force``. When the record is
    lost, the files with a generated file's header count as recorded (``adopted``)."""
    paths = inside_output(out_dir, sorted(files))
    if record.lost:
        record.early = adopted(out_dir) | record.early
    if not force:
        refused = foreign({r: p for r, p in paths.items() if r not in done}, files, record.owned())
        if refused:
            more = f" and {len(refused) - 1} more" if len(refused) > 1 else ""
            raise WriteFailed(
                paths[refused[0]],
                f"refusing to overwrite `{refused[0]}`{more}: tribuild did not write it (it is "
                "not in the output record and is no generated file); move it away, rename the "
                "target, or build with --force",
            )
    drop_records(out_dir)
    mine = set(paths.values()) | {
        resolve(out_dir, rel) for rel in (*record.owned(), RECORD) if rel not in paths
    }
    names = {os.path.basename(p) for p in mine}
    for folder in sorted({os.path.dirname(p) for p in mine}):
        if resolves_inside(out_dir, folder):
            remove_temps(folder, names.__contains__)
    before = record.owned()
    early, record.early = record.early, {}  # recorded again only if produced now
    for name in [t for t in record.targets if t not in targets]:
        del record.targets[name]
    for target, rels in produced.items():  # this build journaled what it wrote early
        record.targets[target] = {
            rel: early[rel] if rel in done and rel in early else digest(files[rel])
            for rel in sorted(rels)
        }
    removed, kept = remove_stale(out_dir, before, record.owned())
    batch = {paths[rel]: files[rel] for rel in paths if rel not in done}
    batch[os.path.join(out_dir, RECORD)] = record.encode()
    written = set(write_changed(batch))
    unlink(os.path.join(out_dir, EARLY))  # the record now says what is tribuild's
    changed = {rel for rel, full in paths.items() if rel in done or full in written}
    return WriteReport(
        tuple(r for r in paths if r in changed),
        tuple(r for r in paths if r not in changed),
        removed,
        kept,
    )


def remove_temps(folder: str, owns, older_than: float | None = None) -> tuple[str, ...]:
    """Delete the temporary files a killed writer left in ``folder`` for the names that
    ``owns(name)`` accepts; their names. Call it only while no other process can be writing
    those files (under the project lock), or with ``older_than`` (seconds): then only
    temporary files not changed for that long are deleted (a live writer renames its
    temporary file within seconds)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return ()
    gone = []
    before = None if older_than is None else time.time() - older_than
    for name in names:
        if (m := _TEMP.fullmatch(name)) and owns(m["name"]):
            try:
                if before is not None and os.lstat(os.path.join(folder, name)).st_mtime > before:
                    continue
                os.unlink(os.path.join(folder, name))
                gone.append(name)
            except OSError:
                pass
    return tuple(gone)


def remove_all_temps(out_dir: str) -> tuple[str, ...]:
    """Delete the temporary files of tribuild's own outputs that killed builds left anywhere
    in ``out_dir`` (of a module or kernel ``.py``, a depfile ``.d``, the record or the early
    journal; in the folders a build writes, ``_output_folders``); their paths, relative to
    ``out_dir``. A build deletes only those of the outputs it writes, so the temporary files
    of outputs that a killed build was writing for the first time stayed until ``clean``."""
    gone = []
    for folder, rel in _output_folders(out_dir):
        for name in remove_temps(folder, _ours):
            gone.append(name if rel == "." else os.path.join(rel, name).replace(os.sep, "/"))
    return tuple(gone)


def _output_folders(out_dir: str) -> list[tuple[str, str]]:
    """(folder, path relative to ``out_dir``) of the folders a build writes files in: the
    output folder and its ``kernels`` folder, unless that is a symbolic link."""
    kernels = os.path.join(out_dir, KERNELS)
    inner = [(kernels, KERNELS)] if os.path.isdir(kernels) and not os.path.islink(kernels) else []
    return [(out_dir, ".")] + inner


def _ours(name: str) -> bool:
    return name.endswith((".py", ".d")) or name in (RECORD, EARLY)


def remove_stale(
    out_dir: str, before: dict[str, str], now: dict[str, str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Delete the files of ``before`` missing from ``now`` that still hold tribuild's bytes;
    empty folders they leave are removed too. Returns (removed, kept)."""
    removed, kept = [], []
    for rel in sorted(set(before) - set(now)):
        full = resolve(out_dir, rel)
        try:
            if (
                resolves_inside(out_dir, os.path.dirname(full))
                and digest(read_regular(full, OWN_FILE_BYTES)) == before[rel]
            ):
                os.unlink(full)
                removed.append(rel)
                _remove_empty_parents(out_dir, os.path.dirname(full))
                continue
        except FileNotFoundError:
            continue
        except OSError:
            pass
        kept.append(rel)
    return tuple(removed), tuple(kept)


def why_kept(out_dir: str, rel: str) -> str:
    """Why ``remove_stale`` kept the recorded file ``rel``, said the way a message ends."""
    full = resolve(out_dir, rel)
    if not resolves_inside(out_dir, os.path.dirname(full)):
        return "its folder leads outside the output folder through a symbolic link"
    try:
        mode = os.lstat(full).st_mode
    except OSError as err:
        return f"it cannot be read ({err.strerror})"
    if stat.S_ISLNK(mode):
        return "it is now a symbolic link, which tribuild never writes"
    if not stat.S_ISREG(mode):
        return "it is no longer a regular file"
    try:
        read_regular(full, OWN_FILE_BYTES)
    except OSError as err:
        return f"it cannot be read ({err.strerror})"
    return "it was edited since tribuild wrote it"


def _remove_empty_parents(out_dir: str, folder: str) -> None:
    top = os.path.abspath(out_dir)
    folder = os.path.abspath(folder)
    while folder != top and folder.startswith(top + os.sep):
        try:
            os.rmdir(folder)
        except OSError:
            return
        folder = os.path.dirname(folder)


def clean(out_dir: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Delete every recorded output that still holds tribuild's bytes, then the record, and
    the temporary files killed builds left in the output folder (``remove_all_temps``).
    Returns (removed, kept). Call it under the project lock."""
    temps = remove_all_temps(out_dir)
    record = Record.load(out_dir)
    owned = (adopted(out_dir) if record.lost else {}) | record.owned()
    removed, kept = remove_stale(out_dir, owned, {})
    removed = tuple(sorted(removed + temps))
    drop_records(out_dir)
    if not kept:
        unlink(os.path.join(out_dir, RECORD))
        unlink(os.path.join(out_dir, EARLY))
        _remove_empty_parents(os.path.dirname(os.path.abspath(out_dir)), out_dir)
    return removed, kept
