"""`tribuild explain OUTPUT`: why a file `tribuild build` wrote was last written
(``tribuild.driver.explain``). Exit codes: 0 explained, 1 not a file the last build wrote."""

from __future__ import annotations

import sys

from tribuild.cli import shared
from tribuild.project import EXIT_OK, EXIT_USER

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("output", help="a file `tribuild build` wrote")


def run(args) -> int:
    from tribuild.driver import explain

    project = shared.project()
    lines = explain.why(project.cache_dir, project.root, args.output)
    if lines is None:
        print(
            f"tribuild explain: {explain.unknown(project.root, project.out_dir, args.output)}",
            file=sys.stderr,
        )
        return EXIT_USER
    print("\n".join([f"{args.output}: last written because"] + ["  " + line for line in lines]))
    return EXIT_OK
