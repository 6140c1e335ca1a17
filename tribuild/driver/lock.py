"""The project lock: one `tribuild build` at a time writes a project's outputs and cache.

Terms:
- *lock file*: ``<cache dir>/lock``, held with ``fcntl.flock`` (released by the kernel when
  the process dies, so a killed build never leaves it stuck). It holds the pid of the
  holder, for the waiting message. Anything but a regular file at its name (a link, a
  FIFO, a folder) is damage: it is removed and the file made again.
- A second process first tries without blocking; if the lock is taken it says so once
  (``waiting for another tribuild (pid N) ...``) and then waits, or, with ``wait=False``,
  raises ``Busy``.

This module imports only the standard library (and ``base.files``): the no-op path uses it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from contextlib import contextmanager

from tribuild.base.files import drop_special

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


class Busy(RuntimeError):
    """The lock is held by another process and the caller chose not to wait."""


@contextmanager
def project_lock(
    cache_dir: str, on_wait: Callable[[str], None] | None = None, wait: bool = True
) -> Iterator[None]:
    """Hold the lock of the project whose cache folder is ``cache_dir`` while the block runs.
    ``on_wait(message)`` is called once if another process holds it."""
    if os.path.lexists(cache_dir) and not os.path.isdir(cache_dir):
        raise NotADirectoryError(
            errno.ENOTDIR,
            "the cache folder is a file (or a link to "
            "nothing): move it away, or set [cache] dir in Tribuild.toml",
            cache_dir,
        )
    os.makedirs(cache_dir, exist_ok=True)
    fd = _open(os.path.join(cache_dir, "lock"))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            message = f"waiting for another tribuild ({_holder(fd)}) to finish with {cache_dir}"
            if not wait:
                raise Busy(message.replace("waiting for", "busy:")) from None
            if on_wait is not None:
                on_wait(message)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


@contextmanager
def model_lock(models_dir: str, stem: str) -> Iterator[None]:
    """Hold the lock of one compiled model (``<models_dir>/.<stem>.lock``) while the block
    runs, waiting silently: the ranks of one ``torchrun`` call ``compile_model`` for the same
    model at once, and one compile's sweep of leftover temporary files would otherwise
    delete another's file in flight. Held across the compile only, never the project lock's
    whole build."""
    os.makedirs(models_dir, exist_ok=True)
    fd = _open(os.path.join(models_dir, f".{stem}.lock"))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _open(path: str) -> int:
    """The lock file opened for reading and writing, made if missing; what else sits at its
    name is removed first (never followed, never waited on)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:  # ELOOP: a link; EISDIR: a folder
        if err.errno not in (errno.ELOOP, errno.EISDIR):
            raise
        drop_special(path)
        return os.open(path, flags, 0o644)
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    drop_special(path)
    return os.open(path, flags, 0o644)


def _holder(fd: int) -> str:
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return f"pid {text}" if text.isdigit() else "another process"
