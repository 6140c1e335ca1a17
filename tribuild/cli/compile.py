"""`tribuild compile`: one layer of one file into a module, as a make or ninja rule runs it.
Exit codes: 0 written (or unchanged), 1 errors in the program, 2 usage or configuration."""

from __future__ import annotations

import os

from tribuild.cli import shared
from tribuild.project import EXIT_OK, EXIT_USER

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="IN.tri", help="the .tri file that defines the layer")
    p.add_argument("-o", dest="output", metavar="OUT.py", required=True, help="the module to write")
    p.add_argument("--target", metavar="LAYER", help="the layer to compile (default: the only one)")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=shared.construction_arg,
        help="a construction argument (a TOML value); others take their defaults",
    )
    p.add_argument("--depfile", metavar="OUT.d", help="write a Makefile-syntax depfile")
    shared.add_opt_level(p, "[project] opt_level, else 2")
    p.add_argument(
        "--touch",
        action="store_true",
        help="update the module's and depfile's modification times even when their bytes "
        "are unchanged (make has no restat: this lets it settle)",
    )


def run(args) -> int:
    from tribuild.driver.compile import compile_file

    result = compile_file(
        args.source, args.output, args.target, tuple(args.arg), args.depfile, args.opt_level
    )
    shared.show_target(result.target, result.sources)
    if result.target.failed:
        return EXIT_USER
    if args.touch:  # the depfile first: make compares the module's time with the sources'
        for path in (args.depfile, args.output):
            if path:
                os.utime(path)
    return EXIT_OK
