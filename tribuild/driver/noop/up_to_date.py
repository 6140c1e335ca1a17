"""The no-op path of `tribuild build`: "nothing to do" without argparse, the engine or the
compiler.

Terms:
- *simple command line*: target names and only options that do not change what a no-op
  prints: ``-j N``/``--jobs N``, ``-O LEVEL``, ``-k``/``--keep-going``, ``-q``/``--quiet``.
  Anything else (``--timing``, ``--explain``, dumps...) goes the full way. What it says
  (``simple``: a ``SimpleLine``) is what argparse would read from it, so a build that is
  not a no-op runs without argparse either (whose import and parser cost ~5 ms): the
  command line's ``build.Options.of`` gives the other options their defaults. Target names
  may come between options.
- The check runs under the project lock, taken without waiting: a build in progress sends
  this one the full way, which waits for it.
"""

from __future__ import annotations

import os
import sys

from tribuild.driver.lock import Busy, project_lock
from tribuild.driver.noop import manifest
from tribuild.project import OPT_LEVELS, job_count

_FLAGS = {"-k", "--keep-going", "-q", "--quiet"}
_VALUED = {"-j", "--jobs", "-O"}


class SimpleLine:
    """What a simple command line says: the only options it may hold."""

    def __init__(
        self,
        targets: list[str],
        jobs: int | None,
        opt_level: str | None,
        keep_going: bool,
        quiet: bool,
    ) -> None:
        self.targets, self.jobs, self.opt_level = targets, jobs, opt_level
        self.keep_going, self.quiet = keep_going, quiet


def quick_build(args: SimpleLine) -> int | None:
    """0 after printing "no work to do" if the build is up to date; None to go the full way."""
    located = manifest.locate(os.getcwd())
    if located is None:
        return None
    root, cache_dir = located
    key = manifest.request_key(tuple(args.targets), args.opt_level)
    try:
        with project_lock(cache_dir, wait=False):
            if not manifest.up_to_date(root, cache_dir, key):
                return None
    except (Busy, OSError):
        return None
    if not args.quiet:
        print("tribuild: no work to do", file=sys.stderr)
    return 0


def simple(argv: list[str]) -> SimpleLine | None:
    """What the simple command line ``argv`` says, else None."""
    found = SimpleLine([], None, None, False, False)
    args = iter(argv)
    for arg in args:
        name, eq, value_or_none = arg.partition("=")
        value: str | None = value_or_none
        if arg in _FLAGS:
            if arg in ("-q", "--quiet"):
                found.quiet = True
            else:
                found.keep_going = True
        elif name in _VALUED or arg[:2] in ("-j", "-O"):
            if not eq and name in _VALUED:
                value = next(args, None)
            elif not eq:
                name, value = arg[:2], arg[2:]
            if value is None or (name == "-O" and value not in OPT_LEVELS):
                return None
            if name == "-O":
                found.opt_level = value
            elif not value.isdigit():
                return None
            else:
                found.jobs = job_count(int(value))
        elif arg.startswith("-") or not arg:
            return None
        else:
            found.targets.append(arg)
    return found
