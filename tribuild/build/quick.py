"""The no-op path of `tribuild build`: "nothing to do" without argparse, the engine or the
compiler.

Terms:
- *simple command line*: target names and only options that do not change what a no-op
  prints: ``-j N``/``--jobs N``, ``-O LEVEL``, ``-k``/``--keep-going``, ``-q``/``--quiet``.
  Anything else (``--timing``, ``--explain``, dumps...) goes the full way.
- The check runs under the project lock, taken without waiting: a build in progress sends
  this one the full way, which waits for it.
"""
from __future__ import annotations

import os
import sys

from tribuild.build import manifest
from tribuild.build.lock import Busy, project_lock

_FLAGS = {"-k", "--keep-going", "-q", "--quiet"}
_VALUED = {"-j", "--jobs", "-O"}


def quick_build(argv: list[str]) -> int | None:
    """0 after printing "no work to do" if the build is up to date; None to go the full way."""
    parsed = _simple(argv)
    if parsed is None:
        return None
    targets, opt_level, quiet = parsed
    located = manifest.locate(os.getcwd())
    if located is None:
        return None
    root, cache_dir = located
    try:
        with project_lock(cache_dir, wait=False):
            if not manifest.up_to_date(root, cache_dir, manifest.request_key(targets, opt_level)):
                return None
    except (Busy, OSError):
        return None
    if not quiet:
        print("tribuild: no work to do", file=sys.stderr)
    return 0


def _simple(argv: list[str]) -> tuple[tuple[str, ...], str | None, bool] | None:
    """(targets, -O level, quiet) of a simple command line, else None."""
    targets, opt_level, quiet = [], None, False
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg in _FLAGS:
            quiet = quiet or arg in ("-q", "--quiet")
        elif name in _VALUED or arg[:2] in ("-j", "-O"):
            if not eq and name in _VALUED:
                value = next(args, None)
            elif not eq:
                name, value = arg[:2], arg[2:]
            if value is None or (name == "-O" and value not in ("0", "1", "2", "3", "s")):
                return None
            if name == "-O":
                opt_level = value
            elif not value.isdigit() or int(value) < 1:
                return None
        elif arg.startswith("-") or not arg:
            return None
        else:
            targets.append(arg)
    return tuple(targets), opt_level, quiet
