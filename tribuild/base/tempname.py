"""Temporary files beside their destination, for atomic writes (write, fsync, rename).

A *temporary name* for ``DIR/NAME`` is ``DIR/.NAME.XXXXXXXX.tmp`` with eight characters from
``[a-z0-9_]``, the form ``tempfile.mkstemp`` gives with that prefix and suffix (the sweeps of
litter left by killed builds match it), created exclusively so two processes never share
one. Made here without ``tempfile``, whose import (``shutil``, ``random``, ...) costs ~4 ms of
CPU in every build process.
"""

from __future__ import annotations

import os

from tribuild.base.files import remove_tree, write_all

_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def create_beside(path: str | os.PathLike[str], mode: int = 0o600) -> tuple[int, str]:
    """Create a new temporary file beside ``path`` (``mode`` less the umask); returns its
    open file descriptor and its path."""
    folder, name = os.path.split(os.fspath(path))
    while True:
        letters = "".join(_CHARS[b % len(_CHARS)] for b in os.urandom(8))
        tmp = os.path.join(folder, f".{name}.{letters}.tmp")
        try:
            return os.open(tmp, _FLAGS, mode), tmp
        except FileExistsError:
            continue


def replace(path: str | os.PathLike[str], data: bytes | list[bytes], sync: bool) -> None:
    """Write ``data`` (bytes, or a list of byte strings written back to back without joining
    them) to a temporary file beside ``path`` and rename it over ``path``; other processes
    see the old bytes or the new, never a part. With ``sync``, the temporary file is fsynced
    before the rename (the caller fsyncs the folder to make the rename durable). Without,
    for the files whose loss costs only work and whose readers take an unreadable one for a
    missing one (the build manifest, ``explain.json``): after a crash of the machine the
    file may be old, empty or missing. Its callers write cache files, which are disposable:
    a folder found at ``path`` (no rename replaces one) is deleted."""
    fd, tmp = create_beside(path)
    try:
        try:
            write_all(fd, data if type(data) is list else [data])
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, path)
        except OSError:  # EISDIR, ENOTEMPTY: a folder where the file belongs
            if not os.path.isdir(path) or os.path.islink(path):
                raise
            remove_tree(os.fspath(path))
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
