"""What several commands share: their options, each defined once, the project of the working
folder, and printing to stderr.

Terms:
- *option helper*: ``add_targets``, ``add_paths``, ``add_opt_level``, ``add_debounce``: one
  option as every command that takes it spells it.
- *value type*: ``jobs``, ``days``, ``construction_arg``: an option's text to its value, or
  argparse's usage error (``argparse`` is imported only when the line is parsed by it, never
  on the no-op path).
"""

from __future__ import annotations

import os
import sys

from tribuild import terminal
from tribuild.project import OPT_LEVELS, job_count

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from tribuild.driver.session import Project


def project() -> Project:
    """The project of the working folder (``-C`` has moved there already)."""
    from tribuild.driver.session import Project

    return Project.discover(os.getcwd())


def version() -> str:
    """tribuild's installed version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tribuild")
    except PackageNotFoundError:  # run from a checkout that was not installed
        return "unknown (not installed)"


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def add_targets(p: argparse.ArgumentParser) -> None:
    p.add_argument("targets", nargs="*", help="targets of Tribuild.toml (default: all)")


def add_paths(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths", nargs="*", help=".tri files or folders (default: the project's sources)"
    )


def add_opt_level(p: argparse.ArgumentParser, default: str = "[project] opt_level") -> None:
    """``-O LEVEL``; ``default`` says where the level comes from when it is not given."""
    p.add_argument(
        "-O",
        dest="opt_level",
        choices=OPT_LEVELS,
        metavar="LEVEL",
        help=f"-O0, -O1, -O2, -O3 or -Os (default: {default})",
    )


def add_debounce(p: argparse.ArgumentParser, after: str) -> None:
    """``--debounce MS``: how long to wait after ``after`` (an event, an edit) for the next."""
    p.add_argument(
        "--debounce",
        type=float,
        default=50.0,
        metavar="MS",
        help=f"wait this long after {after} (default: 50 ms)",
    )


def show_target(target, sources, shown: set | None = None) -> None:
    """A target's diagnostics (with source excerpts), or the traceback of a bug, on stderr;
    those in ``shown`` (printed for an earlier target) are skipped, and added to it."""
    from tribuild.diagnostics_render import render_text

    shown = set() if shown is None else shown
    if target.error is not None:
        say(f"error: internal error while building `{target.name}` (a bug in tribuild):")
        say(target.error.rstrip())
    for diag in target.diagnostics:
        if diag not in shown:
            shown.add(diag)
            say(render_text(diag, sources, color=terminal.color(sys.stderr)))


def jobs(text: str) -> int:
    """``--jobs``: a number of processes, 0 for one per CPU (as ``jobs`` in Tribuild.toml)."""
    import argparse

    if not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"expected a number of processes (0 = one per CPU), got {text!r}"
        )
    return job_count(int(text))


def days(text: str) -> float:
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 <= value < math.inf):
        raise argparse.ArgumentTypeError(f"expected a number of days, 0 or more, got {text!r}")
    return value


def construction_arg(text: str):
    """``--arg NAME=VALUE``: the name and its TOML value."""
    import argparse

    from tribuild.driver.compile import parse_arg

    try:
        return parse_arg(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
