"""Reading, listing and removing files by path, without ``pathlib``: importing it loads
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
