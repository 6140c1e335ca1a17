"""Reading, writing, listing and removing files, without ``pathlib``: importing it loads
``urllib.parse`` and ``ipaddress`` (~3 ms in every build process), for what ``os`` does.
"""

from __future__ import annotations

import os


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


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
