"""`tribuild fmt`: lay out .tri files (``tribuild.driver.fmt``), or with ``--check`` only say
which would change. Exit codes: 0 done (or nothing to change), 1 a file would change under
``--check`` or could not be formatted."""

from __future__ import annotations

import sys

from tribuild.cli import shared
from tribuild.project import EXIT_OK, EXIT_USER

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    shared.add_paths(p)
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a file would change"
    )


def run(args) -> int:
    from tribuild.driver.fmt import format_files

    result = format_files(shared.project(), tuple(args.paths), args.check)
    for path, why in result.skipped:
        print(f"{path}: not formatted: {why}", file=sys.stderr)
    verb = "would reformat" if args.check else "reformatted"
    for path in result.changed:
        print(f"{verb} {path}", file=sys.stderr)
    print(f"{len(result.changed)} of {result.files} files {verb}", file=sys.stderr)
    return EXIT_USER if (args.check and result.changed) or result.skipped else EXIT_OK
