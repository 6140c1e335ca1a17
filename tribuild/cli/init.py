"""`tribuild init`: a starter project (``tribuild.driver.starter``), and what to run next.
Exit codes: 0 written, 2 a file it would write exists (nothing written)."""

from __future__ import annotations

import os
import sys

from tribuild.project import EXIT_OK, EXIT_USAGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", nargs="?", default=".", help="where to create the project")
    p.add_argument("--name", help="the project's name (default: the folder's)")


def run(args) -> int:
    from tribuild.driver.starter import init_project

    try:
        written = init_project(args.folder, args.name)
    except FileExistsError as err:
        print(f"tribuild init: {err} exists; nothing written", file=sys.stderr)
        return EXIT_USAGE
    for path in written:
        print(f"wrote {os.path.relpath(path)}", file=sys.stderr)
    at = "" if os.path.abspath(args.folder) == os.getcwd() else f"-C {args.folder} "
    print(
        "next:\n"
        f"  tribuild {at}check    # check models/mlp.tri and the target\n"
        f"  tribuild {at}build    # write build/mlp.py and its kernels\n"
        f"  tribuild {at}watch    # rebuild on every save",
        file=sys.stderr,
    )
    return EXIT_OK
