"""The build manifest: answers "nothing to do" without the engine or the compiler.

Terms:
- *manifest*: ``<cache dir>/build-manifest.json``, written at the end of a build that
  succeeded for every target it was asked for. It holds the *request key*, the *tool stamp*,
  every *input* (Tribuild.toml and each target's import closure) as ``[path, size,
  mtime_ns, digest, ctime_ns, inode]`` and every *output* as ``[path, size, mtime_ns,
  ctime_ns, inode]``, paths relative to the project root, the (absolute) cache folder it
  was written to: when that is the default folder and Tribuild.toml is unchanged,
  ``locate`` needs no TOML parser; and the table parsed from Tribuild.toml's recorded
  bytes, which the next build validates instead of parsing the file again when it still
  holds those bytes (``recorded_config``).
- *request key*: what on the command line changes outputs (the targets asked for, an
  ``-O`` override). ``--jobs`` does not: outputs are the same whatever it is.
- *package signature*: ``[path, size, mtime_ns, ctime_ns, inode]`` of every ``.py`` file of
  tribuild itself (the files ``engine.fingerprint.package_hash`` reads), taken once per
  process. An edit changes the ctime even when a tool restores the mtime (``cp -p``,
  ``rsync -t``); a file replaced by a rename has another inode.
- *tool stamp*: a checksum of the package signature and Python's version: a different
  tribuild never trusts a manifest written by another.
- *stamp*: a file's size, mtime, ctime and inode. An edit that restores the mtime
  (``os.utime``, ``touch -r``) still moves the ctime, which no program can set back.
- *racily clean*: an input whose recorded mtime lies within ``RACY_NS`` (the coarsest
  timestamp tick of common file systems) of the manifest's own mtime: an edit in the same
  tick as the build's stat leaves every stamp as recorded, so its digest is checked, as git
  does for its index. Once the tick has passed, a check that found it clean writes the
  manifest again, which puts it out of the window.
- *up to date*: the manifest exists, its key and stamp match, every input has its recorded
  stamp and is not racily clean, or else (a branch switched back and forth, a ``touch``)
  its recorded digest; and every output has its recorded stamp. Inputs whose stamp moved
  but not their bytes are re-stamped, so the next check is stats only again.

A build deletes the manifest before it writes anything, so a failed or killed build never
leaves one behind. This module imports only the standard library (no engine, no
compiler; ``tomllib`` only when the cache folder is not the default one): ``python -c pass``
plus reading one JSON file and a few hundred ``stat`` calls.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import zlib

from tribuild.base.files import OWN_FILE_BYTES, open_regular, remove_entry
from tribuild.base.hashing import digest
from tribuild.project import CONFIG_FILE, DEFAULT_CACHE_DIR, PACKAGE_DIR, find_project_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAME = "build-manifest.json"
RACY_NS = 2_000_000_000  # FAT's 2 s tick; ext4 and xfs stamp files from a coarse clock too
_SIGNATURES: dict[str, tuple[int, list[list[Any]]]] = {}  # package folder -> its signature


def request_key(targets: tuple[str, ...], opt_level: str | None) -> str:
    return json.dumps([sorted(set(targets)), opt_level])


@functools.cache
def tool_stamp() -> str:
    """Once per process, as the package signature."""
    rows = package_signature()[1]
    entries = [sys.version] + [":".join(map(str, row)) for row in rows]
    return f"{zlib.crc32(chr(0).join(entries).encode()):08x}:{len(entries)}"


def package_signature(package: str = PACKAGE_DIR) -> tuple[int, list[list[Any]]]:
    """(when it was taken, in ``time.time_ns()``, and the rows of) the package signature of
    ``package``, sorted by path; taken once per process (what it describes is the code this
    process runs). Like ``package_hash``, it does not follow symbolic links to folders."""
    if package not in _SIGNATURES:
        taken = time.time_ns()
        rows = []
        for folder, _, files in os.walk(package):
            rel = os.path.relpath(folder, package).replace(os.sep, "/")
            for name in files:
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    path = name if rel == "." else f"{rel}/{name}"
                    rows.append([path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
        _SIGNATURES[package] = (taken, sorted(rows))
    return _SIGNATURES[package]


def file_digest(path: str, limit: int = OWN_FILE_BYTES) -> str:
    """The digest of a regular file's bytes, symbolic links followed (a source may be one);
    ``OSError`` for anything else (``open_regular``)."""
    with open_regular(path, limit, follow_links=True) as file:
        return digest(file.read())


def locate(start: str) -> tuple[str, str] | None:
    """(project root, cache folder) of the project around ``start``; None when there is no
    Tribuild.toml or it does not parse (the full build path then reports why). The cache
    folder is the default one when the manifest there says so (``_recorded_here``), else
    read from a plain parse of Tribuild.toml."""
    folder = find_project_root(start)
    if folder is None:
        return None
    default = os.path.join(folder, DEFAULT_CACHE_DIR)
    if _recorded_here(folder, default):
        return folder, default
    try:
        import tomllib

        with open(os.path.join(folder, CONFIG_FILE), "rb") as file:
            table = tomllib.load(file)
        cache = table.get("cache", {}).get("dir", DEFAULT_CACHE_DIR)
        return folder, os.path.join(folder, os.path.normpath(cache.replace("\\", "/")))
    except (OSError, ValueError, AttributeError):
        return None


def _recorded_here(root: str, cache_dir: str) -> bool:
    """Whether the manifest in ``cache_dir`` was written there as the configured cache
    folder by a build of Tribuild.toml as it is now (same size and mtime): then that is
    still the configured folder, and parsing Tribuild.toml (tomllib costs more than the
    rest of the no-op check) is not needed."""
    try:
        data = _load(os.path.join(cache_dir, NAME))[0]
        st = os.stat(os.path.join(root, CONFIG_FILE))
        return data["cache"] == cache_dir and [CONFIG_FILE, st.st_size, st.st_mtime_ns] in (
            e[:3] for e in data["inputs"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def up_to_date(root: str, cache_dir: str, key: str, name: str = NAME) -> bool:
    """Whether the manifest ``name`` in ``cache_dir`` says a build of ``key`` has nothing
    to do."""
    return vouching(root, cache_dir, key, name) is not None


def vouching(root: str, cache_dir: str, key: str, name: str = NAME) -> dict[str, Any] | None:
    """The manifest ``name`` in ``cache_dir`` if it says a build of ``key`` has nothing to
    do, else None."""
    path = os.path.join(cache_dir, name)
    try:
        data, written = _load(path)
        if data["key"] != key or data["tool"] != tool_stamp():
            return None
        restamped = _check_inputs(root, data["inputs"], written - RACY_NS)
        if restamped is None or not _outputs_unchanged(root, data["outputs"]):
            return None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    if restamped:
        _write(path, data)
    return data


def _load(path: str) -> tuple[dict[str, Any], int]:
    """The manifest at ``path`` and its mtime (``OSError`` when it is not a regular file of
    at most ``OWN_FILE_BYTES``)."""
    with open_regular(path, OWN_FILE_BYTES) as file:
        written = os.fstat(file.fileno()).st_mtime_ns
        data = json.loads(file.read())
    if not isinstance(data, dict):
        raise ValueError("not a manifest")
    return data, written


def _stamp(st: os.stat_result) -> list[int]:
    """What the manifest records of a file besides its path and digest: size, mtime, and
    (appended after the digest for inputs) ctime and inode."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _check_inputs(root: str, inputs: list[Any], racy_from: int) -> bool | None:
    """None if an input changed; else whether an entry was re-stamped (in place). An input
    is hashed when its stamp moved or it is racily clean (mtime at or after ``racy_from``);
    a racily clean one whose tick has passed is re-stamped, so the manifest is written
    again, out of its window."""
    restamped = False
    settled = time.time_ns() - RACY_NS
    for entry in inputs:
        full = os.path.join(root, entry[0])
        size, mtime, ctime, inode = _stamp(os.stat(full))
        if size != entry[1]:
            return None
        racy = entry[2] >= racy_from
        if [mtime, ctime, inode] != [entry[2], *entry[4:6]] or racy:
            if file_digest(full) != entry[3]:
                return None
            if [mtime, ctime, inode] != [entry[2], *entry[4:6]] or mtime < settled:
                entry[2], entry[4:6] = mtime, [ctime, inode]
                restamped = True
    return restamped


def _outputs_unchanged(root: str, outputs: list[Any]) -> bool:
    for rel, *stamp in outputs:
        if _stamp(os.stat(os.path.join(root, rel))) != stamp:
            return False
    return True


def recorded_config(cache_dir: str, digest: str) -> dict[str, Any] | None:
    """The table of Tribuild.toml recorded by the manifest in ``cache_dir`` if that file's
    bytes then had ``digest`` and this tribuild wrote it there; else None."""
    try:
        data = _load(os.path.join(cache_dir, NAME))[0]
        if (
            data["cache"] == cache_dir
            and data["tool"] == tool_stamp()
            and [CONFIG_FILE, digest] in ([e[0], e[3]] for e in data["inputs"])
            and isinstance(data["config"], dict)
        ):
            return data["config"]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass
    return None


def snapshot(
    root: str,
    cache_dir: str,
    key: str,
    inputs: dict[str, str],
    outputs: tuple[str, ...],
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of a build of ``key`` made from ``inputs`` (root-relative path -> digest
    of the bytes the build used) that left ``outputs`` (root-relative), and the ``config``
    table parsed from the recorded bytes of Tribuild.toml, with the files as they are now
    (``write`` it). An input whose file no longer holds those bytes, or a file gone since
    the build, is recorded with size -1, so the next check rebuilds; a file changed after
    this is seen by its stamp."""

    def entry(rel: str) -> list[Any]:
        try:
            return [rel, *_stamp(os.stat(os.path.join(root, rel)))]
        except FileNotFoundError:  # deleted since the build wrote it: rebuild next time
            return [rel, -1, 0, 0, 0]

    def input_entry(rel: str) -> list[Any]:
        path, size, mtime, ctime, inode = entry(rel)
        if size >= 0 and file_digest(os.path.join(root, rel)) != inputs[rel]:
            size = -1
        return [path, size, mtime, inputs[rel], ctime, inode]

    data = {
        "version": 1,
        "key": key,
        "tool": tool_stamp(),
        "cache": cache_dir,
        "inputs": [input_entry(rel) for rel in sorted(inputs)],
        "outputs": [entry(rel) for rel in sorted(outputs)],
        "config": config,
    }
    return data


def write(cache_dir: str, data: dict[str, Any], name: str = NAME) -> None:
    """Write a ``snapshot`` as the manifest ``name``."""
    _write(os.path.join(cache_dir, name), data)


def forget(cache_dir: str) -> None:
    """Delete the manifest (whatever sits at its name: a folder or a FIFO is damage)."""
    remove_entry(os.path.join(cache_dir, NAME))


def _write(path: str, data: dict[str, Any]) -> None:
    """Not synced: a manifest lost, emptied or cut short by a crash of the machine does not
    parse, and the next build takes the full way."""
    from tribuild.base.tempname import replace

    os.makedirs(os.path.dirname(path), exist_ok=True)
    replace(path, json.dumps(data, separators=(",", ":")).encode(), sync=False)
