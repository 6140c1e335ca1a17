"""The build manifest: answers "nothing to do" without the engine or the compiler.

Terms:
- *manifest*: ``<cache dir>/build-manifest.json``, written at the end of a build that
  succeeded for every target it was asked for. It holds the *request key*, the *tool stamp*,
  every *input* (Tribuild.toml and each target's import closure) as ``[path, size,
  mtime_ns, digest]`` and every *output* as ``[path, size, mtime_ns]``, paths relative to
  the project root, the (absolute) cache folder it was written to: when that is the
  default folder and Tribuild.toml is unchanged, ``locate`` needs no TOML parser; and the
  table parsed from Tribuild.toml's recorded bytes, which the next build validates instead
  of parsing the file again when it still holds those bytes (``recorded_config``).
- *request key*: what on the command line changes outputs (the targets asked for, an
  ``-O`` override). ``--jobs`` does not: outputs are the same whatever it is.
- *package signature*: ``[path, size, mtime_ns, ctime_ns, inode]`` of every ``.py`` file of
  tribuild itself (the files ``engine.fingerprint.package_hash`` reads), taken once per
  process. An edit changes the ctime even when a tool restores the mtime (``cp -p``,
  ``rsync -t``); a file replaced by a rename has another inode.
- *tool stamp*: a checksum of the package signature and Python's version: a different
  tribuild never trusts a manifest written by another.
- *up to date*: the manifest exists, its key and stamp match, every input has its recorded
  size and mtime, or, when only the mtime moved (a branch switched back and forth, a
  ``touch``), its recorded digest; and every output has its recorded size and mtime.
  Inputs whose mtime moved but not their bytes are re-stamped, so the next check is stats
  only again.

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

from tribuild.base.hashing import digest
from tribuild.project import CONFIG_FILE, DEFAULT_CACHE_DIR, PACKAGE_DIR, find_project_root

NAME = "build-manifest.json"
_SIGNATURES: dict[str, tuple[int, list[list]]] = {}  # package folder -> its signature


def request_key(targets: tuple[str, ...], opt_level: str | None) -> str:
    return json.dumps([sorted(set(targets)), opt_level])


@functools.cache
def tool_stamp() -> str:
    """Once per process, as the package signature."""
    rows = package_signature()[1]
    entries = [sys.version] + [":".join(map(str, row)) for row in rows]
    return f"{zlib.crc32(chr(0).join(entries).encode()):08x}:{len(entries)}"


def package_signature(package: str = PACKAGE_DIR) -> tuple[int, list[list]]:
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


def file_digest(path: str) -> str:
    with open(path, "rb") as file:
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
        with open(os.path.join(cache_dir, NAME), "rb") as file:
            data = json.load(file)
        st = os.stat(os.path.join(root, CONFIG_FILE))
        return data["cache"] == cache_dir and [CONFIG_FILE, st.st_size, st.st_mtime_ns] in (
            e[:3] for e in data["inputs"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False


def up_to_date(root: str, cache_dir: str, key: str, name: str = NAME) -> bool:
    """Whether the manifest ``name`` in ``cache_dir`` says a build of ``key`` has nothing
    to do."""
    path = os.path.join(cache_dir, name)
    try:
        with open(path, "rb") as file:
            data = json.load(file)
        if data["key"] != key or data["tool"] != tool_stamp():
            return False
        restamped = _check_inputs(root, data["inputs"])
        if restamped is None or not _outputs_unchanged(root, data["outputs"]):
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if restamped:
        _write(path, data)
    return True


def _check_inputs(root: str, inputs: list) -> bool | None:
    """None if an input changed; else whether an entry was re-stamped (in place)."""
    restamped = False
    for entry in inputs:
        full = os.path.join(root, entry[0])
        st = os.stat(full)
        if st.st_size != entry[1]:
            return None
        if st.st_mtime_ns != entry[2]:
            if file_digest(full) != entry[3]:
                return None
            entry[2] = st.st_mtime_ns
            restamped = True
    return restamped


def _outputs_unchanged(root: str, outputs: list) -> bool:
    for rel, size, mtime in outputs:
        st = os.stat(os.path.join(root, rel))
        if st.st_size != size or st.st_mtime_ns != mtime:
            return False
    return True


def recorded_config(cache_dir: str, digest: str) -> dict | None:
    """The table of Tribuild.toml recorded by the manifest in ``cache_dir`` if that file's
    bytes then had ``digest`` and this tribuild wrote it there; else None."""
    try:
        with open(os.path.join(cache_dir, NAME), "rb") as file:
            data = json.load(file)
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
    config: dict | None = None,
) -> dict:
    """The manifest of a build of ``key`` made from ``inputs`` (root-relative path -> digest
    of the bytes the build used) that left ``outputs`` (root-relative), and the ``config``
    table parsed from the recorded bytes of Tribuild.toml, with the files as they are now
    (``write`` it). An input whose file no longer holds those bytes, or a file gone since
    the build, is recorded with size -1, so the next check rebuilds; a file changed after
    this is seen by its stamp."""

    def entry(rel: str) -> list:
        try:
            st = os.stat(os.path.join(root, rel))
        except FileNotFoundError:  # deleted since the build wrote it: rebuild next time
            return [rel, -1, 0]
        return [rel, st.st_size, st.st_mtime_ns]

    def input_entry(rel: str) -> list:
        row = entry(rel) + [inputs[rel]]
        if file_digest(os.path.join(root, rel)) != inputs[rel]:
            row[1] = -1
        return row

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


def write(cache_dir: str, data: dict, name: str = NAME) -> None:
    """Write a ``snapshot`` as the manifest ``name``."""
    _write(os.path.join(cache_dir, name), data)


def forget(cache_dir: str) -> None:
    try:
        os.unlink(os.path.join(cache_dir, NAME))
    except FileNotFoundError:
        pass


def _write(path: str, data: dict) -> None:
    """Not synced: a manifest lost, emptied or cut short by a crash of the machine does not
    parse, and the next build takes the full way."""
    from tribuild.base.tempname import replace

    os.makedirs(os.path.dirname(path), exist_ok=True)
    replace(path, json.dumps(data, separators=(",", ":")).encode(), sync=False)
