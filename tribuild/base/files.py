"""Reading, writing, listing and removing files, without ``pathlib``: importing it loads
``urllib.parse`` and ``ipaddress`` (~3 ms in every build process), for what ``os`` does.
"""

from __future__ import annotations

import errno
import os
import stat

OWN_FILE_BYTES = 1 << 30  # the most tribuild reads of a file of its own (cache, records)


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def open_regular(path: str, limit: int, follow_links: bool = False):
    """``path`` opened for reading in binary, if it is a regular file of at most ``limit``
    bytes; else ``OSError``. Not through a symbolic link unless ``follow_links``, and
    without waiting on a FIFO: a cache or output folder may hold anything (``/dev/zero``
    would be read until memory runs out, a FIFO would block for ever), and its readers take
    the error for a damaged file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes, else
    ``OSError`` (``open_regular``). Reads no more than the size it had when opened (and one
    byte): tribuild replaces its files by renames, never grows them in place."""
    with open_regular(path, limit) as file:
        return file.read(os.fstat(file.fileno()).st_size + 1)


def read_text(path: str) -> str:
    """The file's text, UTF-8, newlines translated (as ``Path.read_text`` reads it)."""
    with open(path, encoding="utf-8") as file:
        return file.read()


def unlink(path: str) -> None:
    """Remove the file if it is there."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def remove_tree(path: str) -> None:
    """Remove the folder ``path`` and everything in it (symbolic links are removed, never
    followed); nothing if it is gone."""
    import shutil  # rare: a folder where tribuild keeps a file of its own

    shutil.rmtree(path, ignore_errors=True)


def remove_entry(path: str) -> None:
    """Remove whatever sits at ``path`` (a file, a link, a FIFO, a folder and its
    contents); nothing if it is gone. For cache files, which are disposable."""
    drop_special(path)
    unlink(path)


def drop_special(path: str) -> None:
    """Remove what sits at ``path`` unless it is a regular file or nothing: a symbolic link,
    a FIFO, a device node, a folder. For the files that only tribuild writes (its records in
    an output folder, its cache files): anything else there is damage, dropped and rebuilt."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        remove_tree(path)
    elif not stat.S_ISREG(mode):
        unlink(path)


def listdir(folder: str) -> list[str]:
    """The names in ``folder``; none if it is missing or not a folder."""
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


_IOV_MAX = 1024  # byte strings per ``writev`` (Linux's limit)


def write_all(fd: int, chunks: list) -> None:
    """Write ``chunks`` (bytes-like) back to back to the file or pipe ``fd``, without joining
    them: ``writev`` of up to ``_IOV_MAX`` at a time; after a short write (rare: a signal, a
    full disk) the rest is joined and written on."""
    for at in range(0, len(chunks), _IOV_MAX):
        batch = chunks[at : at + _IOV_MAX]
        written = os.writev(fd, batch)
        if written < sum(map(len, batch)):
            rest = memoryview(b"".join(chunks[at:]))[written:]
            while rest:
                rest = rest[os.write(fd, rest) :]
            return
